"""No eagle3-enable plan is verified or published without the CPU forward evidence.

The recipe requires the smoke check (the patched model's forward on a tiny random config
collects one aux state per requested layer, and without aux layers equals the unpatched
model's output). ``bot verify`` adds a failing ``evidence`` check when it did not pass, and
``bot publish`` refuses a plan whose recorded verification lacks it.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from bot.errors import BotError
from bot.plan import READY, Plan
from bot.propose import branch_name
from bot.publish import publish_plan
from bot.verify import smoke
from bot.verify.checks import Check
from bot.verify.evidence import (
    SMOKE_VALUES_PROVEN,
    engine_line,
    evidence_check,
    missing_evidence,
    require_evidence,
)
from tests.conftest import UPSTREAM

PASSED_SMOKE = {
    "name": "smoke",
    "passed": True,
    "detail": f"2 aux hidden states for layers [2, 3]; each, {SMOKE_VALUES_PROVEN}, gives ...",
}
ENGINE_PASSED = {"name": "engine", "passed": True, "detail": "EAGLE-3: ...; DFlash: ..."}
ENGINE_NOT_CHECKED = {
    "name": "engine",
    "passed": None,
    "detail": "not checked: vllm.model_executor.models.x does not import on this engine",
}


def _plan(recipe: str, checks: list[dict]) -> Plan:
    return Plan(status=READY, reason="", recipe=recipe, verification={"checks": checks})


def test_the_enable_recipe_requires_a_passed_smoke_check() -> None:
    assert missing_evidence("eagle3-enable", [PASSED_SMOKE, ENGINE_PASSED]) is None
    not_checked = {"name": "smoke", "passed": None, "detail": "not checked: no config class"}
    assert "not checked: no config class" in (missing_evidence("eagle3-enable", [not_checked]))
    assert "it was not run" in missing_evidence("eagle3-enable", [ENGINE_PASSED])
    failed = {"name": "smoke", "passed": False, "detail": "2 aux states for 3 layers"}
    assert missing_evidence(
        "eagle3-enable", [failed, ENGINE_PASSED, {"name": "apply", "passed": True}]
    )


def test_a_smoke_check_that_proved_only_shapes_is_not_the_evidence() -> None:
    """Recorded by the harness before it checked the aux values: count and shape only."""
    shapes_only = {
        "name": "smoke",
        "passed": True,
        "detail": "2 aux hidden states for layers [2, 3]; with none requested the output "
        "equals the unpatched model's bit for bit",
    }
    assert "proves the aux values" in missing_evidence(
        "eagle3-enable", [shapes_only, ENGINE_PASSED]
    )
    with pytest.raises(BotError, match="proves the aux values"):
        require_evidence(_plan("eagle3-enable", [shapes_only, ENGINE_PASSED]))
    # Any passed smoke check with the values proven will do.
    assert missing_evidence("eagle3-enable", [shapes_only, PASSED_SMOKE, ENGINE_PASSED]) is None


def _function(module: ast.Module, name: str) -> ast.FunctionDef:
    (found,) = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return found


def _rendered(text: ast.JoinedStr, values: dict[str, str]) -> str:
    """An f-string as it prints, each interpolation by name from ``values`` (else ``0``)."""
    return "".join(
        part.value if isinstance(part, ast.Constant) else values.get(ast.unparse(part.value), "0")
        for part in text.values
    )


def _passed_detail(harness: ast.Module) -> tuple[ast.JoinedStr, str]:
    """The f-string of the harness's passed result that interpolates the value check's return,
    and the name that return is bound to."""
    calls = [
        node
        for node in ast.walk(harness)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func) == "check_aux_values"
    ]
    (bound,) = calls
    name = ast.unparse(bound.targets[0])
    details = [
        text
        for node in ast.walk(harness)
        if isinstance(node, ast.Dict)
        and {
            ast.unparse(k): ast.unparse(v)
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None
        }.get("'status'")
        == "'passed'"
        for text in ast.walk(node)
        if isinstance(text, ast.JoinedStr)
        and any(ast.unparse(v) == f"{{{name}}}" for v in text.values)
    ]
    (detail,) = details
    return detail, name


def test_the_harness_says_what_the_gate_looks_for() -> None:
    """The harness cannot import the bot, so the phrase is written twice. What must agree is
    what the harness reports, not its text: the passed result's detail, with the value check's
    own return in it, satisfies the gate; the same detail without that return does not; and no
    other string the harness can report carries the phrase."""
    harness = ast.parse(smoke.HARNESS.read_text(encoding="utf-8"))
    check = _function(harness, "check_aux_values")
    returned = [n.value for n in ast.walk(check) if isinstance(n, ast.Return)]
    assert returned and all(isinstance(r, ast.JoinedStr) for r in returned)
    detail, name = _passed_detail(harness)
    for value in returned:
        proven = _rendered(detail, {name: _rendered(value, {})})
        smoke_check = {"name": "smoke", "passed": True, "detail": proven}
        assert missing_evidence("eagle3-enable", [smoke_check, ENGINE_PASSED]) is None, proven
    unproven = {**smoke_check, "detail": _rendered(detail, {name: ""})}
    assert "proves the aux values" in missing_evidence("eagle3-enable", [unproven, ENGINE_PASSED])
    elsewhere = [
        node.value
        for node in ast.walk(harness)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and SMOKE_VALUES_PROVEN in node.value
        and not any(node in ast.walk(r) for r in returned)
    ]
    assert elsewhere == []


def test_the_interface_recipe_requires_nothing_more() -> None:
    assert missing_evidence("eagle3-interface", []) is None
    assert evidence_check("eagle3-interface", []) is None
    require_evidence(_plan("eagle3-interface", []))


def test_verify_adds_a_failing_evidence_check() -> None:
    engine = Check("engine", None, "not checked: no engine")
    check = evidence_check("eagle3-enable", [Check("smoke", None, "not checked: no env"), engine])
    assert check is not None and check.passed is False
    assert "requires a passed smoke check" in check.detail
    passed = evidence_check("eagle3-enable", [Check("smoke", True, SMOKE_VALUES_PROVEN), engine])
    assert passed is not None and passed.passed is True
    assert passed.detail == "smoke passed; engine: not checked: no engine"


def test_the_engine_check_gates_what_it_could_run() -> None:
    """Where the engine ran the target it must have passed; where it could not, the reason is
    recorded and shown, and the smoke check stays the gate; never run at all is refused."""
    assert missing_evidence("eagle3-enable", [PASSED_SMOKE, ENGINE_NOT_CHECKED]) is None
    failed = {"name": "engine", "passed": False, "detail": "EAGLE-3 after the patch: run_error"}
    assert "requires a passed engine check (EAGLE-3 after the patch: run_error)" in (
        missing_evidence("eagle3-enable", [PASSED_SMOKE, failed])
    )
    silent = {"name": "engine", "passed": None, "detail": "skipped"}
    assert "neither passed nor says why not" in missing_evidence(
        "eagle3-enable", [PASSED_SMOKE, silent]
    )
    with pytest.raises(BotError, match="engine check's result, and it was not run"):
        require_evidence(_plan("eagle3-enable", [PASSED_SMOKE]))
    require_evidence(_plan("eagle3-enable", [PASSED_SMOKE, ENGINE_NOT_CHECKED]))
    assert (
        engine_line([PASSED_SMOKE, ENGINE_NOT_CHECKED]) == f"engine: {ENGINE_NOT_CHECKED['detail']}"
    )
    # A declaration shows the engine check but is not gated by it.
    assert missing_evidence("eagle3-interface", [failed]) is None


def test_publish_side_check() -> None:
    require_evidence(_plan("eagle3-enable", [PASSED_SMOKE, ENGINE_PASSED]))
    with pytest.raises(BotError, match="requires a passed smoke check"):
        require_evidence(
            _plan("eagle3-enable", [{"name": "smoke", "passed": None}, ENGINE_NOT_CHECKED])
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
        publish_plan(seed_plan, reviewer="maintainer1", work_dir=tmp_path / "work")
    assert upstream_standin.pulls(UPSTREAM) == []
