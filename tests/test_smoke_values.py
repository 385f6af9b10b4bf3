"""The smoke check proves the aux VALUES, not only their number and shape.

Each aux hidden state, fed back into its layer as the stream (``residual=None``), must carry
the rest of the decoder to the model's own output. A real eagle3-enable patch passes; the same
patch with a capture that drops the residual, or counts it twice, fails.
"""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from bot.cli import main
from bot.tree.fetch import release_tree
from bot.tree.worktree import scratch_worktree
from bot.verify import scratch, smoke
from bot.verify.env import vllm_env

GEMMA2 = "vllm/model_executor/models/gemma2.py"
CAPTURE = "aux_hidden_states, idx + 1, hidden_states, residual"


@pytest.mark.vllm_tree
@pytest.mark.vllm_env
def test_a_capture_that_drops_or_doubles_the_residual_fails(tmp_path: Path) -> None:
    env = vllm_env("0.34.0")
    tree_repo = release_tree("0.34.0")
    plan_dir = tmp_path / "plan"
    argv = ["propose", "--class", "Gemma2ForCausalLM", "--repo", str(tree_repo)]
    assert main([*argv, "--dry-run", "--out", str(plan_dir)]) == 0
    head = git.Repo(tree_repo).head.commit.hexsha
    target = smoke.SmokeTarget("vllm.model_executor.models.gemma2", "Gemma2ForCausalLM")
    with scratch_worktree(tree_repo, head) as tree:
        work = tmp_path / "smoke"
        reference = smoke.run_harness(env.python, tree, target, work / "reference", reference=None)
        assert reference.status == "passed", (reference.detail, reference.log_excerpt)
        assert scratch.apply_patch(tree, plan_dir / "patch.diff") is None

        patched = smoke.run_harness(env.python, tree, target, work / "good", reference=reference)
        good = smoke.smoke_check(patched)
        assert good.passed is True, (good.detail, patched.log_excerpt)
        assert "fed back as the stream into its layer" in good.detail
        assert good.record == {"values_proven": True}

        source = (tree / GEMMA2).read_text()
        assert source.count(CAPTURE) == 1
        outcomes = {}
        for name, capture in {
            "dropped": "aux_hidden_states, idx + 1, hidden_states, None",
            "doubled": "aux_hidden_states, idx + 1, hidden_states + residual, residual",
        }.items():
            (tree / GEMMA2).write_text(source.replace(CAPTURE, capture))
            run = smoke.run_harness(env.python, tree, target, work / name, reference=reference)
            outcomes[name] = smoke.smoke_check(run)
    for name, check in outcomes.items():
        assert check.passed is False, (name, check.detail)
        # The count and shapes are right; only the values give it away.
        assert check.detail.startswith(
            "the aux hidden state of layer 2 is not the stream entering it"
        ), (name, check.detail)


# A shape the analysis reads since issue 21, with its real patch and one sabotaged capture
# (the residual counted twice where the layers already hand on the whole stream). The other
# such shapes (Cohere's norm factory, ...) run in benchmarks/sweeps/smoke_values.py: each costs
# two minutes of vLLM runs, and this one already shows the check failing a full-stream capture.
NEW_SHAPES = [
    (
        "GraniteMoeHybridForCausalLM",  # a loop over every layer, rewritten to the stage's slice
        "vllm.model_executor.models.granitemoehybrid",
        "vllm/model_executor/models/granitemoehybrid.py",
    ),
]
NONE_CAPTURE = "aux_hidden_states, idx + 1, hidden_states, None"


@pytest.mark.vllm_tree
@pytest.mark.vllm_env
@pytest.mark.parametrize(("cls", "module", "path"), NEW_SHAPES, ids=[s[0] for s in NEW_SHAPES])
def test_a_new_shape_passes_and_its_sabotaged_capture_fails(
    tmp_path: Path, cls: str, module: str, path: str
) -> None:
    env = vllm_env("0.34.0")
    tree_repo = release_tree("0.34.0")
    plan_dir = tmp_path / "plan"
    argv = ["propose", "--class", cls, "--repo", str(tree_repo)]
    assert main([*argv, "--dry-run", "--out", str(plan_dir)]) == 0
    head = git.Repo(tree_repo).head.commit.hexsha
    target = smoke.SmokeTarget(module, cls)
    with scratch_worktree(tree_repo, head) as tree:
        work = tmp_path / "smoke"
        reference = smoke.run_harness(env.python, tree, target, work / "reference", reference=None)
        assert reference.status == "passed", (reference.detail, reference.log_excerpt)
        assert scratch.apply_patch(tree, plan_dir / "patch.diff") is None
        patched = smoke.run_harness(env.python, tree, target, work / "good", reference=reference)
        good = smoke.smoke_check(patched)
        assert good.passed is True, (good.detail, patched.log_excerpt)
        source = (tree / path).read_text()
        # ruff may wrap the call; the capture's arguments stay on one line
        assert source.count(NONE_CAPTURE.replace("aux_hidden_states, ", "")) == 1
        doubled = source.replace("idx + 1, hidden_states, None", "idx + 1, hidden_states, residual")
        (tree / path).write_text(doubled)
        run = smoke.run_harness(env.python, tree, target, work / "doubled", reference=reference)
        check = smoke.smoke_check(run)
    assert check.passed is False, check.detail
    assert check.detail.startswith("the aux hidden state of layer 2 is not the stream entering it")
