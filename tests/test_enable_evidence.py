"""No eagle3-enable plan is verified or published without the CPU forward evidence.

The recipe requires the smoke check (the patched model's forward on a tiny random config
collects one aux state per requested layer, and without aux layers equals the unpatched
model's output). ``bot verify`` adds a failing ``evidence`` check when it did not pass, and
``bot publish`` refuses a plan whose recorded verification lacks it.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

from bot.errors import BotError
from bot.plan import READY, Plan
from bot.propose.proposal import branch_name
from bot.publish.pr import publish_plan
from bot.verify import smoke
from bot.verify.checks import Check
from bot.verify.evidence import (
    engine_line,
    evidence_check,
    missing_evidence,
    require_evidence,
)
from tests.attest import READS
from tests.claimed import claimed
from tests.conftest import UPSTREAM

PASSED_SMOKE = Check(
    "smoke",
    True,
    "2 aux hidden states for layers [2, 3]; each, fed back ..., gives ...",
    record={"values_proven": True},
)
ENGINE_PASSED = Check("engine", True, "EAGLE-3: ...; DFlash: ...")
ENGINE_NOT_CHECKED = Check(
    "engine", None, "not checked: vllm.model_executor.models.x does not import on this engine"
)


def _plan(recipe: str, checks: list[Check]) -> Plan:
    """A plan whose plan.json records ``checks``, read back as publish reads it."""
    recorded = [c.to_json() for c in checks]
    return Plan(status=READY, reason="", recipe=recipe, verification=claimed(None, checks=recorded))


def test_the_enable_recipe_requires_a_passed_smoke_check() -> None:
    assert missing_evidence("eagle3-enable", [PASSED_SMOKE, ENGINE_PASSED]) is None
    not_checked = Check("smoke", None, "not checked: no config class")
    assert "not checked: no config class" in (missing_evidence("eagle3-enable", [not_checked]))
    assert "it was not run" in missing_evidence("eagle3-enable", [ENGINE_PASSED])
    failed = Check("smoke", False, "2 aux states for 3 layers")
    assert missing_evidence("eagle3-enable", [failed, ENGINE_PASSED, Check("apply", True, "")])


def test_a_smoke_check_that_proved_only_shapes_is_not_the_evidence() -> None:
    """Recorded by the harness before it checked the aux values: count and shape only."""
    shapes_only = Check(
        "smoke",
        True,
        "2 aux hidden states for layers [2, 3]; with none requested the output "
        "equals the unpatched model's bit for bit",
    )
    assert "proves the aux values" in missing_evidence(
        "eagle3-enable", [shapes_only, ENGINE_PASSED]
    )
    with pytest.raises(BotError, match="proves the aux values"):
        require_evidence(_plan("eagle3-enable", [shapes_only, ENGINE_PASSED]))
    # Any passed smoke check with the values proven will do.
    assert missing_evidence("eagle3-enable", [shapes_only, PASSED_SMOKE, ENGINE_PASSED]) is None


def _harness() -> ModuleType:
    """The smoke harness as a module: it imports only the standard library at load time."""
    spec = importlib.util.spec_from_file_location("bot_smoke_under_test", smoke.HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _recorded(result: dict) -> Check:
    """A harness result as plan.json records it: through JSON, read as verify reads it."""
    run = smoke.read_result(json.loads(json.dumps(result)), reference=False)
    return smoke.smoke_check(run)


def test_the_gate_recognises_the_harness_proven_values() -> None:
    """The harness cannot import the bot, so what it reports is the contract: the result it
    writes once the aux values are proven, read back as verify reads it, satisfies the gate;
    the same passed result without the field (a harness that proved only count and shape) or
    with anything but ``true`` in it does not, and a reference run never proves values."""
    harness = _harness()
    written = harness.values_proven_result("Glm4ForCausalLM on a tiny random config: ...", 1e-7)
    assert missing_evidence("eagle3-enable", [_recorded(written), ENGINE_PASSED]) is None
    without = {k: v for k, v in written.items() if k != "values_proven"}
    for unproven in (without, {**written, "values_proven": "true"}):
        recorded = _recorded(unproven)
        assert recorded.passed is True
        assert "proves the aux values" in missing_evidence(
            "eagle3-enable", [recorded, ENGINE_PASSED]
        )
    assert smoke.read_result(written, reference=True).values_proven is False


def test_the_harness_reports_proven_values_only_after_checking_them() -> None:
    """``run`` is the one caller of the proven result, and hands it the value check's own
    return: no other path of the harness can claim the values."""
    tree = ast.parse(smoke.HARNESS.read_text(encoding="utf-8"))
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "values_proven_result"
    ]
    (call,) = calls
    (checked,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func) == "check_aux_values"
    ]
    assert ast.unparse(call.args[-1]) == ast.unparse(checked.targets[0])
    assert checked.lineno < call.lineno
    literal = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value == "values_proven"
    ]
    (function,) = [
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "values_proven_result"
    ]
    assert literal and all(node in ast.walk(function) for node in literal)


def test_the_interface_recipe_requires_nothing_more() -> None:
    assert missing_evidence("eagle3-interface", []) is None
    assert evidence_check("eagle3-interface", []) is None
    require_evidence(_plan("eagle3-interface", []))


def test_verify_adds_a_failing_evidence_check() -> None:
    engine = Check("engine", None, "not checked: no engine")
    check = evidence_check("eagle3-enable", [Check("smoke", None, "not checked: no env"), engine])
    assert check is not None and check.passed is False
    assert "requires a passed smoke check" in check.detail
    proven = Check("smoke", True, "values proven", record={"values_proven": True})
    passed = evidence_check("eagle3-enable", [proven, engine])
    assert passed is not None and passed.passed is True
    assert passed.detail == "smoke passed; engine: not checked: no engine"


def test_the_engine_check_gates_what_it_could_run() -> None:
    """Where the engine ran the target it must have passed; where it could not, the reason is
    recorded and shown, and the smoke check stays the gate; never run at all is refused."""
    assert missing_evidence("eagle3-enable", [PASSED_SMOKE, ENGINE_NOT_CHECKED]) is None
    failed = Check("engine", False, "EAGLE-3 after the patch: run_error")
    assert "requires a passed engine check (EAGLE-3 after the patch: run_error)" in (
        missing_evidence("eagle3-enable", [PASSED_SMOKE, failed])
    )
    silent = Check("engine", None, "skipped")
    assert "neither passed nor says why not" in missing_evidence(
        "eagle3-enable", [PASSED_SMOKE, silent]
    )
    with pytest.raises(BotError, match="engine check's result, and it was not run"):
        require_evidence(_plan("eagle3-enable", [PASSED_SMOKE]))
    require_evidence(_plan("eagle3-enable", [PASSED_SMOKE, ENGINE_NOT_CHECKED]))
    assert engine_line([PASSED_SMOKE, ENGINE_NOT_CHECKED]) == f"engine: {ENGINE_NOT_CHECKED.detail}"
    # A declaration shows the engine check but is not gated by it.
    assert missing_evidence("eagle3-interface", [failed]) is None


def test_publish_side_check() -> None:
    require_evidence(_plan("eagle3-enable", [PASSED_SMOKE, ENGINE_PASSED]))
    with pytest.raises(BotError, match="requires a passed smoke check"):
        require_evidence(
            _plan("eagle3-enable", [replace(PASSED_SMOKE, passed=None), ENGINE_NOT_CHECKED])
        )
    with pytest.raises(BotError, match="requires a passed smoke check"):
        require_evidence(Plan(status=READY, reason="", recipe="eagle3-enable"))


@pytest.mark.vllm_tree
def test_publish_refuses_an_enable_plan_without_the_evidence(
    seed_plan: Path, upstream_standin, tmp_path: Path
) -> None:
    """The real publisher on a verified plan (verified without the runtime stage, so no smoke
    check) that says it is an eagle3-enable plan: refused before anything is pushed."""
    data = json.loads((seed_plan / "plan.json").read_text())
    data["recipe"] = "eagle3-enable"
    # Branch and fingerprint as this recipe gives them (publish re-derives both), so that the
    # evidence gate is the check that refuses.
    data["branch"] = branch_name(data["recipe"], data["class_name"], None)
    data["fingerprint"] = f"{data['recipe']}:{data['class_name']}:{data['base_commit'][:12]}"
    (seed_plan / "plan.json").write_text(json.dumps(data))
    with pytest.raises(BotError, match="requires a passed smoke check"):
        publish_plan(seed_plan, reviewer="maintainer1", work_dir=tmp_path / "work", attest=READS)
    assert upstream_standin.pulls(UPSTREAM) == []
