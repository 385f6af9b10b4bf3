"""Publishing the seed plan (vllm#33329, real 0.23.0 tree) while GitHub fails: lost replies,
a run killed mid-way, an earlier PR under an older branch name, rate limits, the open-PR cap.

Real PyGithub over HTTP and real git pushes to the stand-in's bare fork; the faults are the
stand-in's, injected before or after the request takes effect.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import git
import pytest

from bot import pipeline
from bot.cli import main
from bot.journal.store import PR_OPEN, Journal
from bot.plan import read_plan_dir
from bot.publish.pr import fingerprint_marker
from tests.attest import READS, cli_publish_argv
from tests.conftest import FORK, UPSTREAM
from tests.github_standin import STANDIN_BOT_LOGIN, STANDIN_FORK_OWNER, STANDIN_TOKEN
from tests.publish_world import kill_in_flight

pytestmark = pytest.mark.vllm_tree

BRANCH = "bot/eagle3-interface/qwen3-next-for-causal-lm"
OLD_BRANCH = "bot/eagle3-interface/qwen3-next"
LABEL = "bot:eagle3"


@pytest.fixture
def seed(seed_plan: Path, upstream_standin, monkeypatch):
    monkeypatch.setenv("BOT_GITHUB_TIMEOUT", "1")
    return seed_plan


def _labels(standin, number: int) -> list[str]:
    return [x["name"] for x in standin.issue(UPSTREAM, number)["labels"]]


def _journal_pr(plan_dir: Path) -> tuple[str, int | None]:
    journal = Journal()
    proposal = journal.proposal(journal.record_proposal(plan_dir))
    return proposal.state, proposal.pr_number


def _fork_sha(standin, branch: str) -> str | None:
    try:
        return git.Repo(standin.state.repos[FORK].git_dir).commit(f"refs/heads/{branch}").hexsha
    except git.BadName:
        return None


@pytest.mark.parametrize("kind", ["status", "reset", "timeout", "truncate"])
def test_a_lost_create_reply_is_adopted_and_finished(seed, github_standin, kind):
    github_standin.inject("POST", r"/pulls$", 502, kind=kind, when="after", delay=2.5)
    result = pipeline.publish(seed, reviewer="maintainer1", attest=READS)

    pulls = github_standin.pulls(UPSTREAM)
    assert len(pulls) == 1
    assert result.action == "adopted" and result.pr_number == pulls[0]["number"]
    assert f"PR #{pulls[0]['number']}" in result.message and "adopted" in result.message
    assert _labels(github_standin, pulls[0]["number"]) == [LABEL]
    comments = github_standin.comments(UPSTREAM, 33329)
    assert len(comments) == 1 and f"#{pulls[0]['number']}" in comments[0]["body"]
    assert _journal_pr(seed) == (PR_OPEN, pulls[0]["number"])
    assert not [f for f in github_standin.state.faults if f.times]


@pytest.mark.parametrize("kind", ["status", "reset", "timeout", "truncate"])
def test_a_lost_comment_reply_leaves_one_comment(seed, github_standin, kind):
    github_standin.inject("POST", r"/issues/33329/comments$", 504, kind=kind, when="after")
    result = pipeline.publish(seed, reviewer="maintainer1", attest=READS)
    assert result.action == "opened"
    assert len(github_standin.pulls(UPSTREAM)) == 1
    assert len(github_standin.comments(UPSTREAM, 33329)) == 1
    assert result.comment_url == github_standin.comments(UPSTREAM, 33329)[0]["html_url"]


def test_an_earlier_runs_unlabelled_pr_gets_its_label_comment_and_a_true_report(
    seed, github_standin
):
    """A run that died after the create left a PR without label or comment."""
    plan = read_plan_dir(seed).plan
    number = github_standin.add_pull(
        UPSTREAM,
        f"{STANDIN_FORK_OWNER}:{BRANCH}",
        user=STANDIN_BOT_LOGIN,
        title="[Model][Spec Decode] Declare SupportsEagle3 on Qwen3NextForCausalLM",
        body=f"earlier\n\n{fingerprint_marker(plan.fingerprint)}\n",
    )
    result = pipeline.publish(seed, reviewer="maintainer1", attest=READS)
    assert result.pr_number == number and result.action == "updated"
    assert f"added label {LABEL}" in result.message
    assert "created the comment on #33329" in result.message
    assert _labels(github_standin, number) == [LABEL]
    assert len(github_standin.comments(UPSTREAM, 33329)) == 1
    assert len(github_standin.pulls(UPSTREAM)) == 1
    assert _journal_pr(seed) == (PR_OPEN, number)


@pytest.mark.parametrize("state", ["open", "closed"])
def test_an_earlier_pr_under_an_older_slug_is_the_one_pr(seed, github_standin, state):
    """Found by its fingerprint among the bot's PRs (two a page), not by the branch name."""
    plan = read_plan_dir(seed).plan
    old = "2020-01-01T00:00:00Z"  # outside the hourly window: the caps leave room
    for n in range(3):  # other PRs of the bot's, so the match is on a later page
        github_standin.add_pull(
            UPSTREAM,
            f"{STANDIN_FORK_OWNER}:bot/x/other-{n}",
            user=STANDIN_BOT_LOGIN,
            created_at=old,
        )
    number = github_standin.add_pull(
        UPSTREAM,
        f"{STANDIN_FORK_OWNER}:{OLD_BRANCH}",
        user=STANDIN_BOT_LOGIN,
        state=state,
        body=f"old words\n\n{fingerprint_marker(plan.fingerprint)}\n",
        labels=[LABEL],
        created_at=old,
    )
    for n in range(3):
        github_standin.add_pull(
            UPSTREAM,
            f"{STANDIN_FORK_OWNER}:bot/x/newer-{n}",
            user=STANDIN_BOT_LOGIN,
            created_at=old,
        )
    result = pipeline.publish(seed, reviewer="maintainer1", attest=READS)
    assert len(github_standin.pulls(UPSTREAM)) == 7  # no new PR
    assert result.pr_number == number
    assert _fork_sha(github_standin, BRANCH) is None  # nothing pushed under the new slug
    if state == "closed":
        assert result.action == "closed-by-maintainer"
        assert github_standin.comments(UPSTREAM, 33329) == []
    else:
        assert result.action == "updated"
        pushed = _fork_sha(github_standin, OLD_BRANCH)
        assert pushed is not None  # the fix went onto the PR's own branch
        body = github_standin.pulls(UPSTREAM)[3]["body"]
        assert "<!-- bot:contribution:start -->" in body  # the body was composed again
        assert "maintainer1" not in body  # no approval was recorded, so no reviewer is named
        assert len(github_standin.comments(UPSTREAM, 33329)) == 1


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_run_killed_while_creating_the_pr_leaves_one_pr_after_the_rerun(
    seed, github_standin, monkeypatch, when
):
    """SIGKILL after the push, while the create request is in flight (before GitHub acted on
    it, or after); the next run ends with exactly one PR, labelled, and one comment."""
    monkeypatch.setenv("BOT_GITHUB_TIMEOUT", "60")
    github_standin.inject("POST", r"/pulls$", 0, kind="timeout", when=when, delay=30)
    run = subprocess.Popen(
        [sys.executable, "-m", "bot", *cli_publish_argv(seed)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    kill_in_flight(github_standin, run, "POST", r"/pulls$")
    pushed = _fork_sha(github_standin, BRANCH)
    assert pushed is not None
    assert len(github_standin.pulls(UPSTREAM)) == (1 if when == "after" else 0)

    monkeypatch.setenv("BOT_GITHUB_TIMEOUT", "1")
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "5")  # a rerun that waited on the lock would fail
    # Killed holding the fork's publish lock ("before"): the lock records the plan's
    # fingerprint, so this plan's rerun takes it over at once, well within the 600 s TTL.
    result = pipeline.publish(seed, reviewer="maintainer1", attest=READS)
    pulls = github_standin.pulls(UPSTREAM)
    assert len(pulls) == 1 and result.pr_number == pulls[0]["number"]
    assert result.action == ("updated" if when == "after" else "opened")
    assert _labels(github_standin, pulls[0]["number"]) == [LABEL]
    assert len(github_standin.comments(UPSTREAM, 33329)) == 1
    assert _fork_sha(github_standin, BRANCH) == pushed  # the pushed commit is reused


def test_a_primary_limit_stops_the_cli_in_one_line_within_the_wait_cap(
    seed, github_standin, monkeypatch, capsys
):
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "3")
    reset = str(int(time.time()) + 3600)
    github_standin.inject(
        "POST",
        r"/pulls$",
        403,
        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset},
        message="API rate limit exceeded for user ID 1.",
    )
    started = time.monotonic()
    assert main(cli_publish_argv(seed)) == 2
    assert time.monotonic() - started < 3 + 60  # the publish's own git work, never the hour
    err = capsys.readouterr().err
    assert err.startswith("bot: ") and err.count("\n") == 1 and "BOT_GITHUB_MAX_WAIT" in err
    assert STANDIN_TOKEN not in err
    assert github_standin.pulls(UPSTREAM) == []

    assert main(cli_publish_argv(seed)) == 0  # after the reset
    assert len(github_standin.pulls(UPSTREAM)) == 1
    assert len(github_standin.comments(UPSTREAM, 33329)) == 1


def test_the_open_pr_cap_counts_the_bots_open_prs_on_github(seed, github_standin, monkeypatch):
    monkeypatch.setenv("BOT_MAX_OPEN_PRS", "2")
    old = "2020-01-01T00:00:00Z"  # long before the hourly window
    for n in range(2):
        github_standin.add_pull(
            UPSTREAM, f"{STANDIN_FORK_OWNER}:bot/x/y{n}", user=STANDIN_BOT_LOGIN, created_at=old
        )
    github_standin.add_pull(UPSTREAM, "someone:feature", user="someone", created_at=old)
    result = pipeline.publish(seed, reviewer="maintainer1", attest=READS)
    assert result.action == "rate-limited" and "BOT_MAX_OPEN_PRS" in result.message
    assert len(github_standin.pulls(UPSTREAM)) == 3 and _fork_sha(github_standin, BRANCH) is None

    github_standin.close_pull(UPSTREAM, 1, merged=True)
    assert pipeline.publish(seed, reviewer="maintainer1", attest=READS).action == "opened"


def test_a_push_whose_answer_is_lost_is_taken_as_pushed(seed, github_standin):
    """The fork's receive-pack dies right after updating the branch, before it reports: git
    says the remote hung up, yet the branch is ours. The run looks again and carries on."""
    hook = Path(github_standin.state.repos[FORK].git_dir) / "hooks" / "reference-transaction"
    hook.write_text(
        '#!/bin/sh\nif [ "$1" = committed ] && grep -q refs/heads/bot/; then kill -9 $PPID; fi\n'
    )
    hook.chmod(0o755)
    result = pipeline.publish(seed, reviewer="maintainer1", attest=READS)
    hook.unlink()
    assert result.action == "opened"
    pulls = github_standin.pulls(UPSTREAM)
    assert len(pulls) == 1 and pulls[0]["head"]["sha"] == _fork_sha(github_standin, BRANCH)


@pytest.mark.parametrize("path", [r"/pulls$", r"/issues/\d+/comments$"])
def test_a_secondary_limit_without_retry_after_is_one_line_and_the_rerun_completes(
    seed, github_standin, monkeypatch, capsys, path
):
    """GitHub's secondary rate limit: 403, its message, no Retry-After (GitHub asks for a
    minute's wait then); more than BOT_GITHUB_MAX_WAIT allows, so one line and exit 2."""
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "3")
    github_standin.inject("POST", path, 403, times=10)
    assert main(cli_publish_argv(seed)) == 2
    err = capsys.readouterr().err
    assert err.startswith("bot: ") and err.count("\n") == 1, err
    assert "secondary" in err or "BOT_GITHUB_MAX_WAIT" in err
    assert STANDIN_TOKEN not in err
    github_standin.state.faults.clear()

    assert main(cli_publish_argv(seed)) == 0
    assert len(github_standin.pulls(UPSTREAM)) == 1
    assert len(github_standin.comments(UPSTREAM, 33329)) == 1
