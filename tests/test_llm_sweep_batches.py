"""The whole-release sweep's batching (benchmarks/sweeps/llm_tests.py), on a synthetic git tree:
many plans' model edits applied together for one after-run, a plan whose edits conflict with
an earlier member's deferred to a later batch (the tree left as the others made it), and the
batches sized by targets. The engine runs themselves are the sweep's, in benchmarks/."""

from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks.sweeps.llm_tests import (
    Member,
    apart,
    apply_together,
    model_files,
    patch_targets,
    take_batch,
)
from bot.codemods.llm_target_test import new_llm_test_file
from bot.tree.layout import LLM_TEST_PATH

MODELS = "vllm/model_executor/models"


def _git(tree: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), *args], check=True, capture_output=True, text=True
    ).stdout


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / MODELS).mkdir(parents=True)
    for name in ("alpha", "beta"):
        (tree / MODELS / f"{name}.py").write_text(
            f"class {name.title()}Model:\n    pass\n\n\nclass {name.title()}ForCausalLM:\n"
            "    pass\n",
            encoding="utf-8",
        )
    # gamma builds on alpha's decoder (as 0.34.0's glm4_moe_lite imports glm4_moe)
    (tree / MODELS / "gamma.py").write_text(
        "from .alpha import AlphaModel\n\n\nclass GammaForCausalLM(AlphaModel):\n    pass\n",
        encoding="utf-8",
    )
    _git(tree, "init", "-q")
    _git(tree, "add", ".")
    _git(tree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return tree


def _plan_patch(tree: Path, model: str, line: str, arch: str) -> str:
    """A plan's patch: its model file's edit and the test file listing its target."""
    path = tree / MODELS / f"{model}.py"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("class ", f"{line}\nclass ", 1), encoding="utf-8")
    (tree / LLM_TEST_PATH).parent.mkdir(parents=True, exist_ok=True)
    (tree / LLM_TEST_PATH).write_text(new_llm_test_file({arch: "norm"}), encoding="utf-8")
    _git(tree, "add", "-A")
    patch = _git(tree, "diff", "--cached")
    _git(tree, "reset", "-q", "--hard")
    return patch


def test_edits_of_many_plans_apply_together_and_a_conflicting_one_waits(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    alpha = _plan_patch(tree, "alpha", "# alpha's edit", "AlphaForCausalLM")
    beta = _plan_patch(tree, "beta", "# beta's edit", "BetaForCausalLM")
    other = _plan_patch(tree, "alpha", "# another edit of alpha", "OtherForCausalLM")
    assert patch_targets(alpha) == {"AlphaForCausalLM": "norm"}
    assert model_files(alpha) == [f"{MODELS}/alpha.py"]  # the test file is not a model edit
    members = [
        Member(arch, patch, patch_targets(patch), model_files(patch))
        for arch, patch in (("alpha", alpha), ("other", other), ("beta", beta))
    ]
    work = tmp_path / "work"
    work.mkdir()

    applied, deferred = apply_together(tree, work, members)

    assert [m.name for m in applied] == ["alpha", "beta"]
    assert list(deferred) == ["other"] and "patch failed" in deferred["other"]
    assert (tree / MODELS / "alpha.py").read_text(encoding="utf-8").startswith("# alpha's edit")
    assert (tree / MODELS / "beta.py").read_text(encoding="utf-8").startswith("# beta's edit")
    assert "another edit" not in (tree / MODELS / "alpha.py").read_text(encoding="utf-8")

    # In a later batch, on the base, the deferred plan's edits apply.
    _git(tree, "checkout", "-q", "--", ".")
    applied, deferred = apply_together(tree, work, [members[1]])
    assert [m.name for m in applied] == ["other"] and not deferred


def test_batches_hold_at_most_the_size_in_targets_and_never_nothing() -> None:
    def member(name: str, count: int) -> Member:
        return Member(name, "", {f"{name}{i}ForCausalLM": None for i in range(count)})

    pending = [member("a", 2), member("b", 3), member("c", 1), member("big", 9)]
    sizes = []
    while pending:
        sizes.append([m.name for m in take_batch(pending, 5)])
    assert sizes == [["a", "b"], ["c"], ["big"]]


def test_a_plan_whose_model_imports_another_members_edited_module_runs_in_another_batch(
    tmp_path: Path,
) -> None:
    tree = _tree(tmp_path)
    plans = {
        name: _plan_patch(tree, name, f"# {name}'s edit", f"{name.title()}ForCausalLM")
        for name in ("alpha", "beta", "gamma")
    }
    members = [Member(n, p, patch_targets(p), model_files(p)) for n, p in plans.items()]

    kept, deferred = apart(tree, members)

    assert [m.name for m in kept] == ["alpha", "beta"]
    assert deferred == {"gamma": "its model files and alpha's import each other"}
    # alone (a later batch), or with a member it does not import, it runs
    assert [m.name for m in apart(tree, members[1:])[0]] == ["beta", "gamma"]
