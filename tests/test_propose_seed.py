"""bot propose end to end on real trees: the seed issue reproduces upstream's fix exactly."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import git
import pytest

from bot.tree.fetch import release_tree
from tests.cli import propose_class, propose_issue

pytestmark = pytest.mark.vllm_tree
QWEN3_NEXT = "vllm/model_executor/models/qwen3_next.py"


@pytest.fixture(scope="module")
def seed_plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("seed") / "plan"
    tree = release_tree("0.23.0")
    result = propose_issue(tree, out)
    assert result.returncode == 0, result.stderr
    return out


def added_and_removed(patch: str, path: str) -> tuple[list[str], list[str]]:
    section = patch.split(f"diff --git a/{path} b/{path}", 1)[1].split("\ndiff --git", 1)[0]
    lines = section.splitlines()
    added = [ln[1:] for ln in lines if ln.startswith("+") and not ln.startswith("+++")]
    removed = [ln[1:] for ln in lines if ln.startswith("-") and not ln.startswith("---")]
    return added, removed


def test_model_change_is_exactly_upstreams_two_lines(seed_plan: Path) -> None:
    patch = (seed_plan / "patch.diff").read_text()
    added, removed = added_and_removed(patch, "vllm/model_executor/models/qwen3_next.py")
    assert removed == []
    assert added == ["    SupportsEagle3,", "    SupportsEagle3,"]
    # The same two lines upstream's PR #45319 added, at the same places: compare with 0.24.0.
    after = (release_tree("0.24.0") / "vllm/model_executor/models/qwen3_next.py").read_text()
    assert "    MixtureOfExperts,\n    SupportsEagle3,\n    SupportsLoRA," in after
    assert "    IsHybrid,\n    SupportsEagle3,\n):" in after
    assert "    MixtureOfExperts,\n+    SupportsEagle3,\n     SupportsLoRA," in patch
    assert "     IsHybrid,\n+    SupportsEagle3,\n ):" in patch


def registry_call(source: str, key: str) -> tuple[ast.Call, list[str]]:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == (
            "_SPECULATIVE_DECODING_EXAMPLE_MODELS"
        ):
            keys = [k.value for k in node.value.keys]
            return node.value.values[keys.index(key)], keys
    raise AssertionError("dict not found")


def test_registry_entry_equals_upstreams(seed_plan: Path, tmp_path: Path) -> None:
    clone = tmp_path / "tree"
    git.Repo.clone_from(str(release_tree("0.23.0")), clone, shared=True, no_checkout=True)
    repo = git.Repo(clone)
    repo.git.checkout("HEAD", "--", "tests/models/registry.py", "vllm/model_executor/models/")
    repo.git.apply("--include=tests/models/registry.py", str(seed_plan / "patch.diff"))
    ours, our_keys = registry_call(
        (clone / "tests/models/registry.py").read_text(), "DFlashQwen3NextDraftModel"
    )
    theirs, _ = registry_call(
        (release_tree("0.24.0") / "tests/models/registry.py").read_text(),
        "DFlashQwen3NextDraftModel",
    )
    assert ast.dump(ours) == ast.dump(theirs)  # arguments and keywords, comments aside
    assert our_keys[our_keys.index("DFlashDraftModel") + 1] == "DFlashQwen3NextDraftModel"


def test_touched_files_are_ruff_format_clean_under_the_trees_settings(
    seed_plan: Path, tmp_path: Path
) -> None:
    clone = tmp_path / "tree"
    git.Repo.clone_from(str(release_tree("0.23.0")), clone, shared=True)
    git.Repo(clone).git.apply(str(seed_plan / "patch.diff"))
    plan = json.loads((seed_plan / "plan.json").read_text())
    touched = [edit["path"] for edit in plan["edits"]]
    assert "vllm/model_executor/models/qwen3_next.py" in touched
    ruff = Path(sys.executable).with_name("ruff")
    for path in touched:
        before = subprocess.run(
            [str(ruff), "format", "--no-cache", "--check", "--quiet", path],
            cwd=release_tree("0.23.0"),
            capture_output=True,
            check=False,
        ).returncode
        after = subprocess.run(
            [str(ruff), "format", "--no-cache", "--check", "--quiet", path],
            cwd=clone,
            capture_output=True,
            check=False,
        ).returncode
        assert before == 0, f"{path} is not ruff-formatted in the release itself"
        assert after == 0, f"{path} is not ruff-format clean after the edit"

    # A second run on the patched tree proposes nothing.
    git.Repo(clone).git.commit("-qam", "apply the bot's patch", "--no-verify")
    out = tmp_path / "again"
    again = propose_issue(clone, out)
    assert again.returncode == 0, again.stderr
    second = json.loads((out / "plan.json").read_text())
    assert second["status"] == "nothing-to-fix"
    assert second["reason"].startswith("already fixed")
    assert (out / "patch.diff").read_text() == ""


def test_plan_and_writeup(seed_plan: Path) -> None:
    plan = json.loads((seed_plan / "plan.json").read_text())
    assert plan["status"] == "ready"
    assert plan["branch"] == "bot/eagle3-interface/qwen3-next-for-causal-lm"
    assert plan["fingerprint"].startswith("eagle3-interface:Qwen3NextForCausalLM:")
    # What the fix resolves, for verify's re-scan (tests/test_verify_do_no_harm.py).
    resolves = [{"recipe": "eagle3-interface", "class": "Qwen3NextForCausalLM", "path": QWEN3_NEXT}]
    assert plan["resolves"] == plan["members"][0]["resolves"] == resolves
    assert plan["triage"]["architecture"] == "Qwen3NextForCausalLM"
    assert plan["tests"]["gpu"] == [
        "tests/models/test_initialization.py::test_can_initialize_large_subset"
        "[DFlashQwen3NextDraftModel]"
    ]
    assert plan["tests"]["cpu"]
    pr = (seed_plan / "pr.md").read_text()
    title, _, body = pr.partition("\n\n")
    assert title.startswith("[Model][Spec Decode]") and "Qwen3NextForCausalLM" in title
    for heading in ("## Purpose", "## Test Plan", "## Test Result"):  # 0.23's PR template
        assert heading in body
    assert "Fixes #33329" in body
    assert "blob/v0.23.0/vllm/model_executor/models/qwen3_next.py#L709" in body
    assert "AI assistance was used" in body and "an automation bot" in body  # the disclosure
    assert f"<!-- bot:fingerprint={plan['fingerprint']} -->" in body
    patch = (seed_plan / "patch.diff").read_text()
    check = subprocess.run(
        ["git", "apply", "--check", "-"],
        input=patch,
        text=True,
        cwd=release_tree("0.23.0"),
        capture_output=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr


def test_newest_release_uses_the_new_pr_template(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    result = propose_class(release_tree("0.34.0"), "Glm4ForCausalLM", out)
    assert result.returncode == 0, result.stderr
    body = (out / "pr.md").read_text()
    for heading in ("## Overview", "## Claims", "## Validation", "## Details"):
        assert heading in body
    assert "Fixes #" not in body  # the proactive path has no issue
    patch = (out / "patch.diff").read_text()
    added, _ = added_and_removed(patch, "vllm/model_executor/models/glm4.py")
    assert sum("SupportsEagle3" in line for line in added) == 2  # the import and the base


def test_nothing_to_fix_after_upstreams_fix(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    result = propose_issue(release_tree("0.24.0"), out)
    assert result.returncode == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["status"] == "nothing-to-fix"
    assert "already fixed" in plan["reason"]


def test_propose_never_touches_the_users_tree(seed_plan: Path) -> None:
    repo = git.Repo(release_tree("0.23.0"))
    assert not repo.is_dirty(untracked_files=True)
    assert [wt for wt in repo.git.worktree("list").splitlines() if "bot-worktree" in wt] == []


def test_a_platform_variant_is_tested_by_importing_that_variant(tmp_path: Path) -> None:
    # On CPU and CUDA the registry resolves KimiLinearForCausalLM to the nvidia class, which
    # already declares the interface, so a registry test would pass before the patch; the
    # contributed test imports the amd variant this plan fixes.
    out = tmp_path / "plan"
    result = propose_class(release_tree("0.34.0"), "KimiLinearForCausalLM", out)
    assert result.returncode == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert [e["path"] for e in plan["edits"]][0] == "vllm/models/kimi_k3/amd/linear.py"
    assert plan["branch"] == "bot/eagle3-interface/kimi-linear-for-causal-lm-amd"
    assert plan["tests"]["cpu"] == [
        "tests/models/kimi_k3/test_eagle3.py::"
        "test_kimi_linear_for_causal_lm_amd_advertises_eagle3_support"
    ]
    assert "from vllm.models.kimi_k3.amd import linear" in (out / "patch.diff").read_text()
