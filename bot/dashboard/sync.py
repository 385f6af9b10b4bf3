"""``bot sync``: GitHub is the source of truth for what was published.

1. Rebuild journal rows from the bot's PRs and issue comments (hidden fingerprint markers),
   and follow PR state (open / merged / closed).
2. Keep one dashboard issue in the bot's repository (like Renovate's Dependency Dashboard):
   pending proposals as checkboxes keyed by hidden markers; a ticked box approves exactly the
   content (review hash) it was rendered for, and only when the edit that ticked it was made
   by a maintainer (``BOT_MAINTAINERS``), as GraphQL's ``userContentEdits`` tells.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.content_hash import review_hash
from bot.dashboard import actions
from bot.dashboard.auth import maintainers_from_env
from bot.errors import BotError
from bot.github.client import BodyRevision, GitHubClient
from bot.github.identity import (
    DASHBOARD_MARKER,
    approve_marker,
    plan_fingerprint_in,
    request_marker,
    ticked_approvals,
    ticked_as_rendered,
    ticked_requests,
)
from bot.journal.store import PENDING, Journal, ProposalRecord
from bot.markdown import inline
from bot.publish.published import pull_state

DASHBOARD_TITLE = "vLLM EAGLE-3 bot: dashboard"


@dataclass
class SyncReport:
    rebuilt: list[int] = field(default_factory=list)
    pr_updates: int = 0
    approved: list[str] = field(default_factory=list)
    requested: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    dashboard_issue: str | None = None

    def lines(self) -> list[str]:
        return [
            f"rebuilt {len(self.rebuilt)} journal rows from GitHub",
            f"followed {self.pr_updates} pull requests",
            f"approved from the dashboard issue: {', '.join(self.approved) or 'none'}",
            f"requested from the dashboard issue: {', '.join(self.requested) or 'none'}",
            *(f"tick not acted on: {line}" for line in self.refused),
            f"dashboard issue: {self.dashboard_issue or 'not kept (set BOT_REPO)'}",
        ]


def sync(
    journal: Journal | None = None,
    github: GitHubClient | None = None,
    publish: actions.Publisher | None = None,
    maintainers: frozenset[str] | None = None,
    *,
    render_only: bool = False,
) -> SyncReport:
    """With ``render_only`` (the Actions job that holds only ``issues: write``): follow the
    PRs carrying the bot's label, render the dashboard issue, and act on no tick (a ticked box
    stays ticked for a run that may publish)."""
    journal = journal or Journal()
    github = github or GitHubClient()
    if not github.authenticated:
        raise BotError("bot sync needs a token: set GITHUB_TOKEN")
    report = SyncReport()
    _rebuild(journal, github, report, by_label_only=render_only)
    if github.settings.bot_repo:
        if maintainers is None:
            maintainers = maintainers_from_env()
        if not render_only:
            publish = publish or run_publisher(github)
        _dashboard_issue(
            journal, github, github.settings.bot_repo, report, publish, maintainers, render_only
        )
    return report


def run_publisher(github: GitHubClient) -> actions.Publisher:
    """A publisher for every box ticked in one run, sharing one :class:`PublishBudget`, so
    ``BOT_MAX_PRS_PER_RUN`` limits the run and not each plan."""
    from bot.publish.pr import PublishBudget

    return functools.partial(
        actions.default_publisher,
        client=github,
        settings=github.settings,
        budget=PublishBudget(github.settings, github),
    )


def _rebuild(
    journal: Journal, github: GitHubClient, report: SyncReport, *, by_label_only: bool = False
) -> None:
    settings = github.settings
    creator = None if by_label_only else github.login
    items = github.list_issues(
        settings.upstream, creator=creator, labels=[settings.label], state="all"
    )
    for item in items:
        fingerprint = plan_fingerprint_in(item.get("body") or "")
        if not fingerprint:
            continue
        is_pr = bool(item.get("pull_request"))
        state = pull_state(item) if is_pr else "closed"
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


def render_dashboard(
    journal: Journal, keep_ticked: frozenset[tuple[str, str]] = frozenset()
) -> str:
    """The dashboard issue's body; a box in ``keep_ticked`` is rendered ticked (a run that
    may not publish leaves a maintainer's tick for one that may). Proposals nobody asked for
    (no triaged issue, no public draft, no request) are listed apart, each with a box that
    requests it; a requested one moves up to wait for approval."""
    lines = [
        DASHBOARD_MARKER,
        'This issue lists the bot\'s proposals. Tick a box under "Pending approval" to attest '
        "that you read every changed line of that patch and its write-up and to publish it, "
        "its commit signed off as you; "
        'tick one under "Requestable" to ask for that PR. `bot sync` acts on maintainers\' '
        "ticks only. The review dashboard (`bot dashboard`) shows diffs, write-ups and "
        "verification.",
        "",
        "## Pending approval",
        "",
    ]
    pending = journal.proposals(PENDING)
    inherited = {p.id: _inherited(journal, p) for p in pending}
    wanted = [p for p in pending if inherited[p.id] or has_demand(journal, p)]
    for proposal in wanted:
        box = _box_of(journal, proposal)
        lines.append(_line(proposal, box, ticked=box in keep_ticked))
        if inherited[proposal.id]:
            # Its own line stays as rendered (a tick is checked against it); why it is wanted
            # follows, as the item's continuation.
            shown = "; ".join(
                inline(line, limit=200).replace("\\#", "#") for line in inherited[proposal.id]
            )
            lines.append(f"  Wanted through the plans that build on it: {shown}")
    if not wanted:
        lines.append("Nothing is waiting.")
    requestable = [p for p in pending if p not in wanted]
    if requestable:
        lines += ["", "## Requestable (nobody asked for these yet)", ""]
        for proposal in requestable:
            box = (proposal.fingerprint, "")
            lines.append(request_line(proposal, ticked=box in keep_ticked))
    return "\n".join(lines) + "\n"


def has_demand(journal: Journal, proposal: ProposalRecord) -> bool:
    """Whether the proposal's PR is wanted: a triaged issue, a public draft, a request, or
    (a core plan) one of these for a plan that builds on it."""
    from bot.plan import Plan
    from bot.publish.pr import demand_of

    try:
        plan = Plan.from_dict(dict(journal.as_published(proposal.id).plan))
    except BotError:
        return False
    return bool(demand_of(plan, journal.requested_by(proposal.id), _inherited(journal, proposal)))


def _inherited(journal: Journal, proposal: ProposalRecord) -> list[str]:
    """A core proposal's demand through the plans that build on it (bot/publish/demand.py)."""
    from bot.plan import Plan
    from bot.publish.demand import inherited_demand

    try:
        plan = Plan.from_dict(dict(journal.as_published(proposal.id).plan))
    except BotError:
        return []
    return inherited_demand(plan, journal)


def _box_of(journal: Journal, proposal: ProposalRecord) -> tuple[str, str]:
    """(fingerprint, review hash) of what approving ``proposal`` would publish."""
    shown = journal.as_published(proposal.id)
    return proposal.fingerprint, review_hash(shown.patch, shown.pr_markdown, shown.plan)


def box_line(journal: Journal, proposal: ProposalRecord) -> str:
    """The unticked line the bot renders for ``proposal``: what it shows, and its marker."""
    return _line(proposal, _box_of(journal, proposal), ticked=False)


def _line(proposal: ProposalRecord, box: tuple[str, str], *, ticked: bool) -> str:
    title = inline(proposal.title, limit=200)
    issue = f" (issue #{proposal.issue_number})" if proposal.issue_number else ""
    mark = "x" if ticked else " "
    return (
        f"- [{mark}] {title} — `{proposal.state}`{issue}; ticking this attests that you read "
        "every changed line of its patch and its write-up, and signs its commit off as you "
        f"(your GitHub profile's name, your noreply address) {approve_marker(*box)}"
    )


def _signoff_of(github: GitHubClient, login: str) -> tuple[str, str, tuple[str, ...]] | str:
    """What a tick signs the commit off with, as its line says: the maintainer's GitHub profile
    name and noreply address (bot/publish/signoff.py). A refusal, in one line, when GitHub has
    no name for them."""
    try:
        profile = github.user_profile(login)
    except BotError as exc:
        return f"not approved: {exc}"
    name, user_id = str(profile.get("name") or "").strip(), profile.get("id")
    if not name or not isinstance(user_id, int):
        return (
            f"not approved: @{login}'s GitHub profile has no name to sign the commit off with "
            "(DCO); set one there, or approve on the review dashboard; nothing was published"
        )
    return name, f"{user_id}+{login}@users.noreply.github.com", ()


def request_line(proposal: ProposalRecord, *, ticked: bool) -> str:
    title = inline(proposal.title, limit=200)
    mark = "x" if ticked else " "
    marker = request_marker(proposal.fingerprint)
    return f"- [{mark}] {title} — `{proposal.state}`; tick to request it {marker}"


def ticked_boxes(body: str) -> set[tuple[str, str]]:
    """(fingerprint, review hash) of every ticked box in a dashboard issue body."""
    return ticked_approvals(body)


def who_ticked(
    box: tuple[str, str],
    body: str,
    history: list[BodyRevision],
    ticked: Callable[[str], set[tuple[str, str]]] | None = None,
) -> str | None:
    """The editor of the revision that ticked ``box`` (revisions newest first).

    None when the history cannot say: no history, a newest revision that is not the current
    body, a withheld revision, or a box ticked as far back as the history goes.
    """
    if not history or history[0].body != body:
        return None
    ticker = None
    for revision in history:
        if revision.body is None:
            return None
        if box not in (ticked or ticked_boxes)(revision.body):
            return ticker
        ticker = revision.editor
    return None


def _requests(
    journal: Journal,
    body: str,
    history: list[BodyRevision],
    report: SyncReport,
    maintainers: frozenset[str],
) -> None:
    """Record each request a maintainer ticked (the edit history names who): demand."""
    for fingerprint in sorted(ticked_requests(body)):
        proposal = journal.proposal_by_fingerprint(fingerprint)
        if proposal is None or proposal.state not in PENDING:
            continue
        if journal.requested_by(proposal.id):
            continue
        editor = who_ticked((fingerprint, ""), body, history, ticked=ticked_requests_pairs)
        if editor is None or editor.lower() not in maintainers:
            why = f"request ticked by {editor or 'someone the edit history does not name'}, "
            why += "who is not in BOT_MAINTAINERS"
            report.refused.append(f"{fingerprint}: {why}")
            continue
        if request_line(proposal, ticked=True) not in body:
            report.refused.append(f"{fingerprint}: the ticked request line is not the bot's")
            continue
        journal.record_request(proposal.id, editor, "ticked on the dashboard issue")
        report.requested.append(fingerprint)


def ticked_requests_pairs(body: str) -> set[tuple[str, str]]:
    return {(fingerprint, "") for fingerprint in ticked_requests(body)}


def _dashboard_issue(
    journal: Journal,
    github: GitHubClient,
    repo: str,
    report: SyncReport,
    publish: actions.Publisher | None,
    maintainers: frozenset[str],
    render_only: bool = False,
) -> None:
    existing = [
        issue
        for issue in github.list_issues(repo, creator=github.login, state="open")
        if DASHBOARD_MARKER in (issue.get("body") or "") and not issue.get("pull_request")
    ]
    issue = existing[0] if existing else None
    keep: frozenset[tuple[str, str]] = frozenset()
    if issue is not None and render_only:
        text = issue.get("body") or ""
        keep = frozenset(ticked_boxes(text)) | {(fp, "") for fp in ticked_requests(text)}
        report.refused += [
            f"{fp}: left ticked for a run that may publish" for fp, _ in sorted(keep)
        ]
    elif issue is not None:
        # Body and history from one GraphQL answer, so they describe the same moment.
        body, history = github.issue_body_history(repo, issue["number"])
        _requests(journal, body, history, report, maintainers)
        for fingerprint, approved_hash in sorted(ticked_boxes(body)):
            proposal = journal.proposal_by_fingerprint(fingerprint)
            if proposal is None or proposal.state not in PENDING:
                continue
            editor = who_ticked((fingerprint, approved_hash), body, history)
            if editor is None or editor.lower() not in maintainers:
                why = f"ticked by {editor or 'someone the edit history does not name'}, "
                why += "who is not in BOT_MAINTAINERS"
                report.refused.append(f"{fingerprint}: {why}")
                journal.add_event(proposal.id, "sync", "tick ignored", why)
                continue
            rendered = box_line(journal, proposal)
            if not ticked_as_rendered(body, (fingerprint, approved_hash), rendered):
                why = "the ticked line is not the one the bot rendered for it (its marker moved)"
                report.refused.append(f"{fingerprint}: {why}")
                journal.add_event(proposal.id, "sync", "tick ignored", why)
                continue
            signoff = _signoff_of(github, editor)
            if isinstance(signoff, str):
                report.refused.append(f"{fingerprint}: {signoff}")
                journal.add_event(proposal.id, "sync", "tick ignored", signoff)
                continue
            outcome = actions.approve(
                journal,
                proposal.id,
                editor,
                publish,
                approved_hash=approved_hash,
                read_every_line=True,  # the ticked line says so, in the maintainer's edit
                via="by ticking its line on the bot's dashboard issue, which says so",
                signoff=signoff,
            )
            if outcome.done:
                report.approved.append(fingerprint)
            else:
                report.refused.append(f"{fingerprint}: {outcome.message}")
        issue["body"] = body
    body = render_dashboard(journal, keep)
    if issue is None:
        created = github.create_issue(repo, DASHBOARD_TITLE, body)
        report.dashboard_issue = created.get("html_url")
    else:
        if issue.get("body") != body:
            github.edit_issue(repo, issue["number"], body=body)
        report.dashboard_issue = issue.get("html_url")
