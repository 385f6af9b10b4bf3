"""`bot sync` against the GitHub stand-in: the dashboard issue, ticking approves, rebuilds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.github import GitHubClient
from bot.store import FOUND, PR_OPEN, Journal
from bot.sync import DASHBOARD_MARKER, sync
from bot.tree.fetch import release_tree
from tests.dashboard_seed import HOSTILE_TITLE, populate
from tests.github_standin import STANDIN_BOT_LOGIN, GitHubStandIn

pytestmark = pytest.mark.vllm_tree


@dataclass
class Published:
    action: str
    pr_number: int | None
    pr_url: str | None
    comment_url: str | None
    message: str


def test_dashboard_issue_lists_pending_and_a_tick_approves_once(
    tmp_path: Path, github_standin: GitHubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_REPO", "example/bot")
    github_standin.add_repo("example/bot")
    github_standin.add_repo("vllm-project/vllm")
    journal = Journal(tmp_path / "journal.sqlite3")
    ids = populate(journal, tmp_path, release_tree("0.23.0"))
    github = GitHubClient()
    published: list[str] = []

    def publish(plan_dir: Path, reviewer: str) -> Published:
        published.append(reviewer)
        return Published("pr", 45319, "https://github.com/vllm-project/vllm/pull/45319", None, "ok")

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
    assert published == ["github-dashboard-issue"]
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
