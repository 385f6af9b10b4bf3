"""`bot sync` against the GitHub stand-in: the dashboard issue, ticking approves, rebuilds."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.github import GitHubClient
from bot.store import FOUND, PR_OPEN, Journal
from bot.sync import DASHBOARD_MARKER, sync
from bot.tree.fetch import release_tree
from tests.conftest import UPSTREAM
from tests.dashboard_seed import HOSTILE_TITLE, populate
from tests.github_standin import STANDIN_BOT_LOGIN, GitHubStandIn

pytestmark = pytest.mark.vllm_tree


def test_dashboard_issue_lists_pending_and_a_tick_approves_once(
    tmp_path: Path, upstream_standin: GitHubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_REPO", "example/bot")
    upstream_standin.add_repo("example/bot")
    journal = Journal(tmp_path / "journal.sqlite3")
    ids = populate(journal, tmp_path, release_tree("0.23.0"))
    github = GitHubClient()
    publish = None  # the real bot.publish.publish_plan, against the stand-in

    report = sync(journal, github, publish)
    issues = github.list_issues("example/bot", creator=STANDIN_BOT_LOGIN)
    assert len(issues) == 1 and report.dashboard_issue
    body = issues[0]["body"]
    seed = journal.proposal(ids["seed"])
    assert DASHBOARD_MARKER in body
    assert f"- [ ] <!-- bot:approve={seed.fingerprint} -->" in body
    assert "<script>" not in body and HOSTILE_TITLE not in body  # escaped as Markdown

    # A maintainer ticks the seed's box on GitHub.
    ticked = body.replace(
        f"- [ ] <!-- bot:approve={seed.fingerprint}",
        f"- [x] <!-- bot:approve={seed.fingerprint}",
    )
    github.edit_issue("example/bot", issues[0]["number"], body=ticked)
    report = sync(journal, github, publish)
    assert report.approved == [seed.fingerprint]
    assert journal.proposal(ids["seed"]).state == PR_OPEN
    sync(journal, github, publish)  # the tick is gone from the refreshed body: no re-publish
    pulls = upstream_standin.pulls(UPSTREAM)
    assert len(pulls) == 1  # published once, however often sync runs
    assert "Reviewed and approved by @" not in pulls[0]["body"]  # nobody to name
    issues = github.list_issues("example/bot", creator=STANDIN_BOT_LOGIN)
    assert len(issues) == 1 and seed.fingerprint not in issues[0]["body"]
    assert journal.proposal(ids["hostile"]).state == FOUND


def test_sync_rebuilds_rows_from_published_markers(
    tmp_path: Path, github_standin: GitHubStandIn
) -> None:
    github_standin.add_repo("vllm-project/vllm")
    github_standin.add_issue(
        "vllm-project/vllm",
        None,
        "[Model] Foo: support EAGLE-3",
        "Body\n<!-- bot:fingerprint=eagle3-interface:FooForCausalLM:abc -->",
        user=STANDIN_BOT_LOGIN,
        labels=["bot:eagle3"],
    )
    journal = Journal(tmp_path / "journal.sqlite3")
    report = sync(journal, GitHubClient())
    assert len(report.rebuilt) == 1
    rebuilt = journal.proposal_by_fingerprint("eagle3-interface:FooForCausalLM:abc")
    assert rebuilt is not None and rebuilt.pr_title == "[Model] Foo: support EAGLE-3"
    assert sync(journal, GitHubClient()).rebuilt == []  # idempotent
