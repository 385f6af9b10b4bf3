"""The PR caps on every publishing path, with three different real plans (vLLM 0.34.0).

* three publishes started together with ``BOT_MAX_PRS_PER_HOUR=1`` open exactly one PR (the
  count is read again under the fork's publish lock, so they cannot all see room);
* one ``bot sync`` acting on three ticked dashboard boxes with ``BOT_MAX_PRS_PER_RUN=1``
  opens one PR: the run has one budget, not one per plan.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from bot.cli import main
from bot.github.client import GitHubClient
from bot.journal.store import PR_OPEN, VERIFIED, Journal
from bot.journal.sync import sync
from bot.pipeline import refresh_duplicate_search
from bot.plan import read_plan_dir, update_plan
from bot.publish.pr import publish_plan
from bot.tree.fetch import release_tree
from bot.verify import VerifyOptions, verify_plan
from tests.attest import READS, cli_publish_argv
from tests.claimed import claimed
from tests.cli import run_bot
from tests.conftest import FORK, UPSTREAM
from tests.github_standin import STANDIN_BOT_LOGIN, GitHubStandIn

pytestmark = pytest.mark.vllm_tree

VERSION = "0.34.0"
# Three wrappers whose plans build on nothing (a runtime wrapper's waits for the forwarding
# core's PR to merge, bot/publish/dependencies.py).
CLASSES = (
    "KimiVLForConditionalGeneration",
    "AudioFlamingo3ForConditionalGeneration",
    "BagelForConditionalGeneration",
)
ALICE_TOKEN = "ghp_aliceTOKEN0123456789abcdefghijklmn"


@pytest.fixture(scope="module")
def _plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bot's own verified plans (`bot propose --class`, local checks) for three classes."""
    from bot import pipeline

    root = tmp_path_factory.mktemp("cap-plans")
    checkout = root / "checkout"
    git.Repo.clone_from(str(release_tree(VERSION)), str(checkout), shared=True).close()
    plans = {}
    for name in CLASSES:
        out = root / name
        pipeline.propose(checkout, out, class_name=name, upstream=UPSTREAM)
        verified = verify_plan(out, VerifyOptions(gpu="skip", journal=False, runtime=False))
        assert verified.local_passed, verified.message
        plans[name] = out
    return plans


@pytest.fixture
def standin(
    github_standin: GitHubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> GitHubStandIn:
    tree = release_tree(VERSION)
    github_standin.add_repo(UPSTREAM, seed_from=tree)
    github_standin.add_repo(FORK, seed_from=tree)
    remotes = tmp_path / "standin" / "remotes"
    monkeypatch.setenv("BOT_FORK_URL", f"{remotes / FORK}.git")
    monkeypatch.setenv("BOT_UPSTREAM_URL", f"{remotes / UPSTREAM}.git")
    return github_standin


def test_three_publishes_started_together_open_one_pr_with_an_hourly_cap_of_one(
    _plans, standin, tmp_path, monkeypatch
):
    """Three `bot publish` processes (as three Actions jobs would be), each with its own home."""
    monkeypatch.setenv("BOT_MAX_PRS_PER_HOUR", "1")
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "60")  # the losers wait for the lock, recount
    # Each plan is wanted (a maintainer's request in its run's journal) and attested.
    argvs = {}
    for name in CLASSES:
        home = tmp_path / f"home-{name}"
        monkeypatch.setenv("BOT_HOME", str(home))
        journal = Journal()
        journal.record_request(journal.record_proposal(_plans[name]), "maintainer1")
        argvs[name] = cli_publish_argv(_plans[name])
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "bot", *argvs[name]],
            env={**os.environ, "BOT_HOME": str(tmp_path / f"home-{name}")},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in CLASSES
    ]
    outputs = [run.communicate(timeout=600) for run in runs]

    assert [run.returncode for run in runs] == [0, 0, 0], outputs
    actions = sorted(out.split(":", 1)[0] for out, _ in outputs)
    assert actions == ["opened", "rate-limited", "rate-limited"], outputs
    assert len(standin.pulls(UPSTREAM)) == 1
    assert sum("BOT_MAX_PRS_PER_HOUR" in out for out, _ in outputs) == 2
    fork = git.Repo(standin.state.repos[FORK].git_dir)
    assert "bot-publish-lock" not in [h.name for h in fork.heads]  # released


def _gpu_verified(plan_dir: Path, tmp_path: Path) -> Path:
    """A copy of the plan as the GPU run would leave it (the dashboard lists verified ones)."""
    copy = Path(shutil.copytree(plan_dir, tmp_path / "plans" / plan_dir.name))
    refresh_duplicate_search(copy)  # the search's record, as propose makes it when online
    plan = read_plan_dir(copy).plan
    plan.verification = claimed(plan.verification, passed=True)
    update_plan(copy, plan)
    return copy


def test_one_sync_with_three_ticked_boxes_opens_as_many_prs_as_the_run_cap(
    _plans, standin, tmp_path, monkeypatch
):
    monkeypatch.setenv("BOT_MAX_PRS_PER_RUN", "1")
    monkeypatch.setenv("BOT_REPO", "example/bot")
    monkeypatch.setenv("BOT_MAINTAINERS", "alice")
    standin.add_repo("example/bot")
    standin.add_token(ALICE_TOKEN, "alice")
    journal = Journal(tmp_path / "journal.sqlite3")
    ids = [journal.record_proposal(_gpu_verified(_plans[name], tmp_path)) for name in CLASSES]
    assert {journal.proposal(i).state for i in ids} == {VERIFIED}
    github = GitHubClient()
    # Nobody asked for these: they wait as requestable items; alice requests all three.
    for kind in ("requestable", "approvable"):
        sync(journal, github)
        issue = next(
            i for i in github.list_issues("example/bot", creator=STANDIN_BOT_LOGIN, state="open")
        )
        ticked = issue["body"].replace("- [ ] ", "- [x] ")
        assert ticked.count("- [x] ") == 3, (kind, issue["body"])
        GitHubClient(token=ALICE_TOKEN).edit_issue("example/bot", issue["number"], body=ticked)

    report = sync(journal, GitHubClient())

    assert len(report.approved) == 1, report.lines()
    assert len(standin.pulls(UPSTREAM)) == 1
    assert sum("BOT_MAX_PRS_PER_RUN" in line for line in report.refused) == 2
    assert sorted(journal.proposal(i).state for i in ids) == [PR_OPEN, VERIFIED, VERIFIED]


def test_with_no_demand_nothing_opens_and_the_plan_waits_on_the_dashboard_issue(
    _plans, standin, tmp_path, monkeypatch
):
    """A plan nobody asked for (no issue, no public draft) opens nothing; `bot sync` lists it
    on the dashboard issue as requestable; a maintainer's request there is the demand, and
    their approval on the next line publishes it, in their name."""
    monkeypatch.setenv("BOT_REPO", "example/bot")
    monkeypatch.setenv("BOT_MAINTAINERS", "alice")
    standin.add_repo("example/bot")
    standin.add_token(ALICE_TOKEN, "alice")
    plan_dir = _gpu_verified(_plans[CLASSES[0]], tmp_path)
    writes = len(standin.writes())
    result = publish_plan(plan_dir, reviewer=None, work_dir=tmp_path / "work", attest=READS)
    assert result.action == "waiting-for-demand"
    assert "nobody asked for it" in result.message and "dashboard issue" in result.message
    assert len(standin.writes()) == writes and standin.pulls(UPSTREAM) == []

    journal = Journal(tmp_path / "journal.sqlite3")
    proposal_id = journal.record_proposal(plan_dir)
    fingerprint = journal.proposal(proposal_id).fingerprint
    github = GitHubClient()
    sync(journal, github)
    [issue] = github.list_issues("example/bot", creator=STANDIN_BOT_LOGIN, state="open")
    pending, requestable = issue["body"].split("## Requestable")
    assert "Nothing is waiting." in pending and "bot:approve=" not in pending
    line = next(x for x in requestable.splitlines() if f"bot:request={fingerprint} " in x)
    assert line.startswith("- [ ] ") and "tick to request it" in line

    someone = "ghp_someoneTOKEN0123456789abcdefghijkl"
    standin.add_token(someone, "someone")  # not a maintainer: their tick requests nothing
    ticked = issue["body"].replace(line, line.replace("- [ ] ", "- [x] ", 1))
    GitHubClient(token=someone).edit_issue("example/bot", issue["number"], body=ticked)
    assert sync(journal, github).requested == []
    GitHubClient(token=ALICE_TOKEN).edit_issue("example/bot", issue["number"], body=ticked)
    report = sync(journal, github)
    assert report.requested == [fingerprint] and journal.requested_by(proposal_id) == "alice"
    assert standin.pulls(UPSTREAM) == []  # a request is demand, not an approval

    [issue] = github.list_issues("example/bot", creator=STANDIN_BOT_LOGIN, state="open")
    line = next(x for x in issue["body"].splitlines() if f"bot:approve={fingerprint} " in x)
    assert "ticking this attests that you read every changed line" in line
    ticked = issue["body"].replace(line, line.replace("- [ ] ", "- [x] ", 1))
    GitHubClient(token=ALICE_TOKEN).edit_issue("example/bot", issue["number"], body=ticked)
    report = sync(journal, github)
    assert report.approved == [fingerprint], report.lines()
    [pull] = standin.pulls(UPSTREAM)
    assert "@alice read every changed line of the patch" in pull["body"]
    assert "(by ticking its line on the bot's dashboard issue, which says so)" in pull["body"]


def test_a_submitter_at_the_trees_cap_opens_nothing_with_one_line(_plans, standin, tmp_path):
    """0.34.0's docs/contributing/README.md caps a contributor without write access at 6 open
    PRs: the submitter's own, counted upstream, whoever opened them (not only the bot)."""
    old = "2020-01-01T00:00:00Z"  # long before the hourly window
    for n in range(6):
        standin.add_pull(UPSTREAM, f"ada:feature{n}", user=STANDIN_BOT_LOGIN, created_at=old)
    plan_dir = _plans[CLASSES[1]]
    journal = Journal()
    journal.record_request(journal.record_proposal(plan_dir), "maintainer1")

    done = run_bot("publish", str(plan_dir))

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"rate-limited: not opening a PR now: @{STANDIN_BOT_LOGIN} already has 6 open PRs in "
        f'{UPSTREAM}, the cap docs/contributing/README.md sets: "The current cap is 6 open PRs."'
    ], done.stdout
    assert len(standin.pulls(UPSTREAM)) == 6
    fork = git.Repo(standin.state.repos[FORK].git_dir)
    assert not [h.name for h in fork.heads if h.name.startswith("bot/")]

    standin.close_pull(UPSTREAM, 1)  # five open: room for one
    assert main(cli_publish_argv(plan_dir)) == 0
    assert len(standin.pulls(UPSTREAM)) == 7
