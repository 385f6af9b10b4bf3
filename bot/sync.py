"""``bot sync``: GitHub is the source of truth for what was published.

1. Rebuild journal rows from the bot's PRs and issue comments (hidden fingerprint markers),
   and follow PR state (open / merged / closed).
2. Keep one dashboard issue in the bot's repository (like Renovate's Dependency Dashboard):
   pending proposals as checkboxes keyed by hidden markers; a ticked box approves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bot.dashboard import actions
from bot.errors import BotError
from bot.github import GitHubClient
from bot.markdown import inline
from bot.store import PENDING, Journal

DASHBOARD_MARKER = "<!-- bot:dashboard -->"
DASHBOARD_TITLE = "vLLM EAGLE-3 bot: dashboard"
DASHBOARD_ACTOR = "github-dashboard-issue"
_FINGERPRINT = re.compile(r"<!--\s*bot:fingerprint[=:]\s*([^\s>]+)\s*-->")
_TICKED = re.compile(r"^\s*[-*]\s*\[[xX]\]\s*<!--\s*bot:approve[=:]\s*([^\s>]+)\s*-->", re.M)


@dataclass
class SyncReport:
    rebuilt: list[int] = field(default_factory=list)
    pr_updates: int = 0
    approved: list[str] = field(default_factory=list)
    dashboard_issue: str | None = None

    def lines(self) -> list[str]:
        return [
            f"rebuilt {len(self.rebuilt)} journal rows from GitHub",
            f"followed {self.pr_updates} pull requests",
            f"approved from the dashboard issue: {', '.join(self.approved) or 'none'}",
            f"dashboard issue: {self.dashboard_issue or 'not kept (set BOT_REPO)'}",
        ]


def sync(
    journal: Journal | None = None,
    github: GitHubClient | None = None,
    publish: actions.Publisher | None = None,
) -> SyncReport:
    journal = journal or Journal()
    github = github or GitHubClient()
    if not github.authenticated:
        raise BotError("bot sync needs a token: set GITHUB_TOKEN")
    report = SyncReport()
    _rebuild(journal, github, report)
    if github.settings.bot_repo:
        _dashboard_issue(journal, github, github.settings.bot_repo, report, publish)
    return report


def _rebuild(journal: Journal, github: GitHubClient, report: SyncReport) -> None:
    settings = github.settings
    items = github.list_issues(
        settings.upstream, creator=github.login, labels=[settings.label], state="all"
    )
    for item in items:
        found = _FINGERPRINT.search(item.get("body") or "")
        if not found:
            continue
        fingerprint = found.group(1)
        is_pr = bool(item.get("pull_request"))
        state = _pr_state(item) if is_pr else "closed"
        known = journal.proposal_by_fingerprint(fingerprint)
        if known is None:
            new_id = journal.import_published(
                fingerprint,
                str(item.get("title") or ""),
                str(item.get("body") or ""),
                item.get("number") if is_pr else None,
                item.get("html_url"),
                state if is_pr else "approved",
            )
            if new_id is not None:
                report.rebuilt.append(new_id)
        elif is_pr:
            journal.record_pr(known.id, item["number"], item.get("html_url"), state, "sync")
            report.pr_updates += 1


def _pr_state(item: dict[str, Any]) -> str:
    if item.get("state") == "open":
        return "open"
    merged = (item.get("pull_request") or {}).get("merged_at")
    return "merged" if merged else "closed"


def render_dashboard(journal: Journal) -> str:
    lines = [
        DASHBOARD_MARKER,
        "This issue lists the bot's proposals waiting for a maintainer. Tick a box to approve "
        "and publish it; `bot sync` acts on it. The review dashboard (`bot dashboard`) shows "
        "diffs, write-ups and verification.",
        "",
        "## Pending approval",
        "",
    ]
    pending = journal.proposals(PENDING)
    for proposal in pending:
        title = inline(proposal.title, limit=200)
        issue = f" (issue #{proposal.issue_number})" if proposal.issue_number else ""
        lines.append(
            f"- [ ] <!-- bot:approve={proposal.fingerprint} --> {title} — `{proposal.state}`{issue}"
        )
    if not pending:
        lines.append("Nothing is waiting.")
    return "\n".join(lines) + "\n"


def _dashboard_issue(
    journal: Journal,
    github: GitHubClient,
    repo: str,
    report: SyncReport,
    publish: actions.Publisher | None,
) -> None:
    existing = [
        issue
        for issue in github.list_issues(repo, creator=github.login, state="open")
        if DASHBOARD_MARKER in (issue.get("body") or "") and not issue.get("pull_request")
    ]
    issue = existing[0] if existing else None
    if issue is not None:
        for fingerprint in _TICKED.findall(issue.get("body") or ""):
            proposal = journal.proposal_by_fingerprint(fingerprint)
            if proposal is None or proposal.state not in PENDING:
                continue
            # The REST API does not say who ticked the box, so nobody is named in the PR.
            outcome = actions.approve(
                journal, proposal.id, DASHBOARD_ACTOR, publish, named_reviewer=False
            )
            if outcome.done:
                report.approved.append(fingerprint)
    body = render_dashboard(journal)
    if issue is None:
        created = github.create_issue(repo, DASHBOARD_TITLE, body)
        report.dashboard_issue = created.get("html_url")
    else:
        if issue.get("body") != body:
            github.edit_issue(repo, issue["number"], body=body)
        report.dashboard_issue = issue.get("html_url")
