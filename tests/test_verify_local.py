"""`bot verify` on real trees: the seed case on vLLM 0.23.0, and the local GPU-test path on a
small synthetic tree whose probe test fails before the patch and passes after it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import git
import pytest

from bot import pipeline
from bot.cli import main
from bot.journal.store import Journal
from bot.pipeline import scan
from bot.plan import READY, Plan, read_plan_dir, write_plan_dir
from bot.publish.render import END, START
from bot.recipes.base import DeclaredEdit, Finding, FixTests
from bot.tree.fetch import release_tree
from bot.tree.worktree import diff_worktree, scratch_worktree
from bot.verification import Verification, runner_identity
from bot.verify import VerifyOptions, verify_plan
from tests.synthetic import READY_DECODER, make_tree

PR_MARKDOWN = f"""Add SupportsEagle3 to a model

Why and what.

{START}
_verification pending_
{END}

Closes nothing.
"""

PROBE_TEST = """
import ast
from pathlib import Path


def test_declares_eagle3():
    source = Path("vllm/model_executor/models/foo.py").read_text()
    classes = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)]
    lm = next(c for c in classes if c.name == "FooForCausalLM")
    assert "SupportsEagle3" in [ast.unparse(b) for b in lm.bases], "SupportsEagle3 missing"
"""

FOO_MODEL = (
    "from torch import nn\n\n"
    "from .interfaces import EagleModelMixin, SupportsEagle3, SupportsPP\n"
    + READY_DECODER.format(name="FooModel")
    + """

class FooForCausalLM(nn.Module, SupportsPP):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = FooModel(vllm_config=vllm_config, prefix=prefix)
"""
)
GPU_NODE = "tests/test_probe_eagle3.py::test_declares_eagle3"


def commit_all(path: Path) -> str:
    repo = git.Repo.init(path, initial_branch="main")
    repo.git.add("--all")
    repo.git.commit(
        "-q",
        "--no-gpg-sign",
        "-m",
        "base",
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@invalid",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@invalid",
        },
    )
    head = repo.head.commit.hexsha
    repo.close()
    return head


def make_patch(repo: Path, commit: str, edits: list[tuple[str, str, str]]) -> str:
    """Edit files in a scratch worktree ([(path, old, new)]) and return the diff."""
    with scratch_worktree(repo, commit) as tree:
        for rel, old, new in edits:
            target = tree / rel
            text = target.read_text()
            assert text.count(old) == 1, (rel, old)
            target.write_text(text.replace(old, new))
        return diff_worktree(tree)


def finding_for(tree: Path, class_name: str) -> Finding:
    found = [f for f in scan(tree).findings if f.class_name == class_name]
    assert len(found) == 1
    return found[0]


def synthetic_plan(tmp_path: Path, *, fixes: bool = True, branch: str | None = None) -> Path:
    """A git repo shaped like vLLM with one interface gap, and a plan directory fixing it."""
    repo = tmp_path / "vllm-synthetic"
    make_tree(
        repo,
        {"model_executor/models/foo.py": FOO_MODEL},
        {"_TEXT_GENERATION_MODELS": {"FooForCausalLM": ("foo", "FooForCausalLM")}},
    )
    (repo / "tests").mkdir()
    (repo / "tests" / "test_probe_eagle3.py").write_text(PROBE_TEST.lstrip())
    base = commit_all(repo)
    new_bases = "(nn.Module, SupportsPP, SupportsEagle3)" if fixes else "(nn.Module, SupportsPP)  "
    patch = make_patch(
        repo,
        base,
        [("vllm/model_executor/models/foo.py", "(nn.Module, SupportsPP):", new_bases + ":")],
    )
    plan = Plan(
        status=READY,
        reason="the decoder collects aux hidden states; only the declaration is missing",
        recipe="eagle3-interface",
        class_name="FooForCausalLM",
        repo_path=str(repo),
        base_commit=base,
        finding=finding_for(repo, "FooForCausalLM"),
        tests=FixTests(gpu=(GPU_NODE,)),
        edits=[DeclaredEdit("vllm/model_executor/models/foo.py", "declare-interface", "")],
        branch=branch,
    )
    plan_dir = tmp_path / "plan"
    write_plan_dir(plan_dir, plan, patch, PR_MARKDOWN)
    return plan_dir


@pytest.fixture(autouse=True)
def bot_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BOT_HOME", str(tmp_path / "bot-home"))
    return tmp_path / "bot-home"


def checks_by_name(verification: Verification) -> dict[str, dict]:
    return {c.name: c.to_json() for c in verification.checks}


def worktrees(repo: Path) -> list[str]:
    repo_obj = git.Repo(repo)
    try:
        return [
            line
            for line in repo_obj.git.worktree("list", "--porcelain").splitlines()
            if line.startswith("worktree ")
        ]
    finally:
        repo_obj.close()


@pytest.mark.vllm_tree
@pytest.mark.vllm_env
def test_seed_case_on_vllm_0_23_0(seed_plan: Path) -> None:
    """The bot's own plan for the seed issue, verified with vLLM 0.23.0 really imported: the
    CPU test fails before the patch and passes after it, and the smoke forward pass passes."""
    plan_dir = seed_plan
    tree = Path(read_plan_dir(plan_dir).plan.repo_path)

    # The engine check of 0.23.0's plans is documented (docs/engine-evidence.md), not rerun here.
    assert main(["verify", str(plan_dir), "--gpu", "skip", "--no-engine"]) == 0

    verification = read_plan_dir(plan_dir).plan.verification
    checks = checks_by_name(verification)
    assert [c.name for c in verification.checks] == [
        "apply",
        "confined",
        "rescan",
        "py_compile",
        "ruff",
        "cpu-tests",
        "smoke",
        "engine",
    ]
    # Not run (--no-engine); its reason may be an earlier verification's of this same patch on
    # the shared plan, kept so that a rerun does not restate it in other words.
    assert checks["engine"]["passed"] is None
    assert checks["engine"]["detail"].startswith("not checked: the ")
    assert checks["confined"]["passed"] is True, checks["confined"]
    assert checks["rescan"]["passed"] is True
    assert "Qwen3NextForCausalLM no longer found" in checks["rescan"]["detail"]
    assert checks["py_compile"]["passed"] is True
    assert checks["ruff"]["passed"] is True, checks["ruff"]["detail"]
    cpu = checks["cpu-tests"]
    assert cpu["passed"] is True, cpu
    assert cpu["detail"].startswith("before the patch: failure; after the patch: success")
    # The before-run failed on the assertion the test makes, not on the environment.
    assert "assert supports_eagle3(model_cls)" in cpu["log_excerpt"], cpu["log_excerpt"]
    smoke = checks["smoke"]
    assert smoke["passed"] is True, smoke
    assert "2 aux hidden states for layers [2, 3]" in smoke["detail"]
    assert "bit for bit" in smoke["detail"]
    assert verification.local_passed is True
    # No GPU test ran, so the verification is not a pass: the PR would stay a draft.
    assert verification.passed is False
    assert verification.gpu.conclusion == "skipped"
    body = read_plan_dir(plan_dir).pr_body
    assert re.search(
        r"\| `pytest -v [^|]*`, without the fix, then with it \| passed \| before the patch: "
        "failure; after the patch: success",
        body,
    ), body
    assert "(`bot smoke`) | passed |" in body
    proposal = Journal().proposals()[0]
    assert proposal.plan["verification"]["checks"][5]["passed"] is True
    # The cached tree is untouched and no worktree is left behind.
    assert git.Repo(tree).git.status("--porcelain") == ""
    assert len(worktrees(tree)) == 1


@pytest.mark.vllm_tree
def test_seed_case_patch_that_misses_the_class_fails_rescan(tmp_path: Path) -> None:
    tree = release_tree("0.23.0")
    head = git.Repo(tree).head.commit.hexsha
    qwen = "vllm/model_executor/models/qwen3_next.py"
    # Imports the interface but never declares it: the finding must still be there.
    patch = make_patch(
        tree,
        head,
        [
            (
                qwen,
                "    SupportsLoRA,\n    SupportsPP,\n)\n",
                "    SupportsEagle3,\n    SupportsLoRA,\n    SupportsPP,\n)\n",
            )
        ],
    )
    plan = Plan(
        status=READY,
        reason="r",
        repo_path=str(tree),
        base_commit=head,
        finding=finding_for(tree, "Qwen3NextForCausalLM"),
    )
    write_plan_dir(tmp_path / "plan", plan, patch, PR_MARKDOWN)
    verification = verify_plan(tmp_path / "plan", VerifyOptions(gpu="skip"))
    checks = checks_by_name(verification)
    assert checks["rescan"]["passed"] is False
    assert "still found after the patch" in checks["rescan"]["detail"]
    # The unused import is a new ruff violation (F401) under vLLM's own configuration.
    assert checks["ruff"]["passed"] is False
    assert "F401" in checks["ruff"]["detail"]
    assert verification.local_passed is False
    assert main(["verify", str(tmp_path / "plan")]) == 1


def test_local_gpu_run_fails_before_and_passes_after(tmp_path: Path, bot_home: Path) -> None:
    plan_dir = synthetic_plan(tmp_path)
    verification = pipeline.verify([plan_dir], VerifyOptions(gpu="local", before=True))[0]

    assert verification.local_passed is True, verification.checks
    gpu = verification.gpu.to_json()
    assert gpu["mode"] == "local"
    assert gpu["before"]["conclusion"] == "failure"
    assert "SupportsEagle3 missing" in gpu["before"]["log_excerpt"]
    assert gpu["conclusion"] == "success"
    assert gpu["after"]["tests"] == 1 and gpu["after"]["failures"] == 0
    assert verification.passed is True

    stored = read_plan_dir(plan_dir)
    assert stored.plan.verification == verification
    body = stored.pr_body
    assert body.count(START) == 1 and body.count(END) == 1
    assert "_verification pending_" not in body
    assert "on the self-hosted GPU runner | not confirmed yet |" in body  # GitHub's to confirm
    assert body.rstrip().endswith("Closes nothing.")
    proposal = Journal().proposals()[0]
    assert proposal.state == "verified"
    assert proposal.plan["verification"]["passed"] is True


def test_verifying_a_journalled_plan_refreshes_the_journals_copy(tmp_path: Path) -> None:
    plan_dir = synthetic_plan(tmp_path, fixes=False)
    proposal_id = Journal().record_proposal(plan_dir)
    pipeline.verify([plan_dir], VerifyOptions(gpu="skip"))[0]
    proposal = Journal().proposal(proposal_id)
    assert proposal.state == "failed"
    assert proposal.pr_markdown == (plan_dir / "pr.md").read_text(encoding="utf-8")
    assert "_verification pending_" not in proposal.pr_markdown


def test_the_record_names_whoever_git_commits_as_when_the_bot_is_not_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submitter who runs `bot verify` before setting BOT_SUBMITTER_NAME/_EMAIL is still
    recorded, under the identity git commits with; the bot's own variables win over git's."""
    for name in ("BOT_SUBMITTER_NAME", "BOT_SUBMITTER_EMAIL", "GITHUB_ACTIONS"):
        monkeypatch.delenv(name, raising=False)
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text("[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.chdir(tmp_path)  # not a repository: no repository's own identity either
    plan_dir = synthetic_plan(tmp_path, fixes=False)

    verification = pipeline.verify([plan_dir], VerifyOptions(gpu="skip"))[0]
    assert verification.ran_by == "Ada Lovelace <ada@example.org>"
    assert read_plan_dir(plan_dir).plan.verification.ran_by == "Ada Lovelace <ada@example.org>"

    monkeypatch.setenv("BOT_SUBMITTER_NAME", "Ada L.")
    monkeypatch.setenv("BOT_SUBMITTER_EMAIL", "ada@users.example.org")
    assert runner_identity() == "Ada L. <ada@users.example.org>"
    monkeypatch.delenv("BOT_SUBMITTER_NAME")
    assert runner_identity() is None  # half the bot's identity is not git's whole one
    monkeypatch.delenv("BOT_SUBMITTER_EMAIL")
    gitconfig.write_text("[user]\n\tname = Ada Lovelace\n")
    assert runner_identity() is None  # a name without an address names nobody
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_RUN_ID", "7")
    monkeypatch.setenv("GITHUB_REPOSITORY", "example/bot")
    assert runner_identity() == "GitHub Actions run 7 of example/bot"


def test_local_gpu_failure_keeps_the_pr_a_draft(tmp_path: Path) -> None:
    plan_dir = synthetic_plan(tmp_path, fixes=False)
    verification = pipeline.verify([plan_dir], VerifyOptions(gpu="local"))[0]
    # The patch changes whitespace only, so the finding is still there: local checks fail
    # and the GPU test does not even run.
    assert verification.local_passed is False
    assert verification.gpu.conclusion == "not_run"
    assert verification.passed is False
    assert Journal().proposals()[0].state == "failed"


def test_refuses_a_patch_outside_vllm_and_tests(tmp_path: Path) -> None:
    plan_dir = synthetic_plan(tmp_path)
    loaded = read_plan_dir(plan_dir)
    evil = loaded.patch.replace("vllm/model_executor/models/foo.py", ".github/workflows/x.py")
    write_plan_dir(plan_dir, loaded.plan, evil, loaded.pr_markdown)
    assert main(["verify", str(plan_dir)]) == 2
    assert read_plan_dir(plan_dir).plan.verification is None


def test_rejects_node_ids_that_look_like_options(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    plan_dir = synthetic_plan(tmp_path)
    loaded = read_plan_dir(plan_dir)
    loaded.plan.tests = FixTests(gpu=("--co", GPU_NODE))
    write_plan_dir(plan_dir, loaded.plan, loaded.patch, loaded.pr_markdown)
    assert main(["verify", str(plan_dir), "--gpu", "local"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bot: not a pytest node id") and "Traceback" not in err


def test_not_a_plan_directory_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["verify", str(tmp_path / "nowhere")]) == 2
    assert "not a plan directory" in capsys.readouterr().err


def test_gpu_test_command_writes_junit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan_dir = synthetic_plan(tmp_path)
    repo = Path(json.loads((plan_dir / "plan.json").read_text())["repo_path"])
    junit = tmp_path / "out" / "junit.xml"
    assert main(["gpu-test", "--cwd", str(repo), "--junit", str(junit), "--tests", GPU_NODE]) == 1
    assert b"SupportsEagle3 missing" in junit.read_bytes()
