"""`bot gpu-guard`: the GPU runner tests only the head of a bot branch on the bot's fork (or
that head's parent, for the fail-before run), as GitHub reports it; everything else is refused.
Real PyGithub against the GitHub stand-in, whose fork is a real bare git repository."""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from bot.cli import main
from tests.conftest import FORK, UPSTREAM
from tests.github_standin import GitHubStandIn
from tests.test_verify_local import commit_all

BOT_BRANCH = "bot/eagle3-interface/foo-for-causal-lm"
# Another fix's branch on the same fork: not the plan's, so not testable under its dispatch.
OTHER_BOT_BRANCH = "bot/eagle3-interface/bar-for-causal-lm"
MERGED_BRANCH = "bot/eagle3-interface/merged"
IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@invalid",
}


def _commit_on(repo: git.Repo, branch: str, path: str) -> str:
    repo.git.checkout("-q", "-b", branch, "main")
    Path(repo.working_dir, path).write_text(f"{branch}\n")
    repo.git.add("--all")
    repo.git.commit("-q", "--no-gpg-sign", "-m", branch, env=IDENTITY)
    return repo.head.commit.hexsha


@pytest.fixture
def fork(github_standin: GitHubStandIn, tmp_path: Path) -> dict[str, str]:
    """The fork: main (upstream's commit), the bot's branch on it, someone's other branch,
    and a pull-request ref."""
    work = tmp_path / "work"
    (work / "vllm").mkdir(parents=True)
    (work / "vllm" / "__init__.py").write_text("")
    base = commit_all(work)
    repo = git.Repo(work)
    shas = {
        "base": base,
        "bot": _commit_on(repo, BOT_BRANCH, "vllm/fix.py"),
        "other": _commit_on(repo, "feature/other", "vllm/other.py"),
        "other_bot": _commit_on(repo, OTHER_BOT_BRANCH, "vllm/bar.py"),
        "longer": _commit_on(repo, BOT_BRANCH + "-amd", "vllm/amd.py"),
    }
    repo.git.checkout("-q", "-b", "bot/eagle3-interface/bar-parent", "main")
    (work / "vllm" / "bar_base.py").write_text("base\n")
    repo.git.add("--all")
    repo.git.commit("-q", "--no-gpg-sign", "-m", "other base", env=IDENTITY)
    shas["other_base"] = repo.head.commit.hexsha
    shas["other_on_base"] = _commit_on(repo, "bot/eagle3-interface/baz", "vllm/baz.py")
    # A bot branch whose head merges someone's commit: its second parent is not the base.
    repo.git.checkout("-q", "-b", MERGED_BRANCH, "main")
    repo.git.merge("-q", "--no-ff", "--no-gpg-sign", "-m", "merge", "feature/other", env=IDENTITY)
    repo.git.update_ref("refs/pull/1/head", shas["other"])
    github_standin.add_repo(UPSTREAM, seed_from=work)
    git_dir = github_standin.add_repo(FORK, seed_from=work)
    git.Repo(git_dir).git.fetch("-q", str(work), "+refs/pull/*:refs/pull/*")
    return shas


def guard(
    repository: str, ref: str, capsys: pytest.CaptureFixture, branch: str = BOT_BRANCH
) -> tuple[int, str, str]:
    code = main(["gpu-guard", "--repository", repository, "--branch", branch, "--sha", ref])
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


def test_the_bot_branch_resolves_to_its_head_on_the_fork(
    fork: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    assert guard(FORK, BOT_BRANCH, capsys) == (0, fork["bot"], "")
    assert guard(FORK, fork["bot"], capsys) == (0, fork["bot"], "")


def test_the_heads_parent_is_allowed_for_the_fail_before_run(
    fork: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    assert guard(FORK, fork["base"], capsys) == (0, fork["base"], "")


def test_only_the_first_parent_of_a_merge_is_allowed(
    fork: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    code, out, err = guard(FORK, fork["other"], capsys, branch=MERGED_BRANCH)
    assert (code, out) == (2, "") and "first parent" in err
    assert guard(FORK, fork["base"], capsys, branch=MERGED_BRANCH) == (0, fork["base"], "")


@pytest.mark.parametrize(
    "repository, ref",
    [
        (FORK, "refs/pull/1/head"),
        (FORK, "refs/heads/" + BOT_BRANCH),
        (FORK, "feature/other"),
        (FORK, "main"),
        (FORK, "bot/eagle3-interface/no-such-class"),
        (FORK, "0" * 40),
        (UPSTREAM, BOT_BRANCH),
        ("someone/vllm", BOT_BRANCH),
    ],
)
def test_anything_else_is_refused(
    fork: dict[str, str], capsys: pytest.CaptureFixture, repository: str, ref: str
) -> None:
    code, out, err = guard(repository, ref, capsys)
    assert (code, out) == (2, "")
    assert err.startswith("bot: refused:") and "\n" not in err


def test_another_bot_branch_or_its_commits_are_refused(
    fork: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    """Dispatched for the plan's branch, the runner tests that branch's commits only: not
    another fix's branch, its head or its head's parent, nor a branch whose name merely
    starts with the plan's."""
    for ref in (
        OTHER_BOT_BRANCH,
        fork["other_bot"],
        fork["other_on_base"],
        fork["other_base"],
        fork["longer"],
        BOT_BRANCH + "-amd",
    ):
        code, out, err = guard(FORK, ref, capsys)
        assert (code, out) == (2, ""), ref
        assert err.startswith("bot: refused:") and "\n" not in err
    # The same commits are fine when the dispatch is for their own branch.
    assert guard(FORK, fork["other_bot"], capsys, OTHER_BOT_BRANCH) == (0, fork["other_bot"], "")
    assert guard(FORK, fork["longer"], capsys, BOT_BRANCH + "-amd") == (0, fork["longer"], "")


@pytest.mark.parametrize("branch", ["feature/other", "main", "refs/heads/" + BOT_BRANCH, "bot/x"])
def test_a_branch_that_is_not_a_bot_branch_is_refused(
    fork: dict[str, str], capsys: pytest.CaptureFixture, branch: str
) -> None:
    code, out, err = guard(FORK, fork["bot"], capsys, branch)
    assert (code, out) == (2, "") and err.startswith("bot: refused:")


def test_a_commit_outside_the_bot_branch_or_a_short_sha_is_refused(
    fork: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    for ref in (fork["other"], fork["bot"][:12]):
        code, out, err = guard(FORK, ref, capsys)
        assert (code, out) == (2, "") and err.startswith("bot: refused:")


def test_without_a_fork_configured_nothing_is_allowed(
    fork: dict[str, str], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BOT_FORK_OWNER")
    code, out, err = guard(FORK, BOT_BRANCH, capsys)
    assert (code, out) == (2, "") and "BOT_FORK_OWNER" in err
