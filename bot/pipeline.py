"""The flow, top to bottom: scan -> (triage) -> propose -> verify -> publish.

Each stage takes plain values and returns plain values; the plan directory is the handoff
between the unprivileged half (scan, triage, edit, test) and the privileged half (publish).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from importlib.resources import as_file, files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.plan import (
    NOTHING_TO_FIX,
    READY,
    Plan,
    PlanContents,
    check_plan_target,
    read_plan_dir,
    write_plan_dir,
)
from bot.scan.findings import ScanResult
from bot.scan.findings import scan as scan_tree

if TYPE_CHECKING:
    from bot.duplicate_search import DuplicateSearch, Keywords
    from bot.journal.store import Journal
    from bot.publish.attestation import Attester
    from bot.publish.pr import PublishResult
    from bot.recipes import Finding
    from bot.recipes.grouping import FindingGroup as FindingGroup
    from bot.scan.priority import Ranked
    from bot.triage.search import Candidate
    from bot.triage_outcome import TriagedIssue
    from bot.verification import Verification
    from bot.verify.dispatch import ActionsClient
    from bot.verify.run import VerifyOptions


def _journal() -> Journal:
    from bot.journal.store import Journal

    return Journal()


def scan(root: Path, *, use_cache: bool = True, record: bool = False) -> ScanResult:
    """The first stage (:func:`bot.scan.findings.scan`); ``record`` also keeps the findings in the
    journal, under the tree's HEAD commit and release."""
    from bot.tree.version import tree_version

    result = scan_tree(root, use_cache=use_cache)
    if record:
        _journal().record_findings(
            [f.to_json() for f in result.findings],
            result.root,
            _head_or_none(result.root) or "",
            tree_version(result.root),
        )
    return result


def _head_or_none(root: Path) -> str | None:
    """The checkout's HEAD commit, or None for a plain directory (findings are still worth
    keeping). One ``git rev-parse`` instead of GitPython: importing it costs more than the
    whole warm scan's index load."""
    if not os.path.lexists(root / ".git"):
        return None  # git's answer would not be root (a plain folder, or one inside a checkout)
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--show-toplevel", "HEAD"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split("\n")
    if done.returncode != 0 or len(lines) < 2 or Path(lines[0]).resolve() != root.resolve():
        return None  # not a checkout, or a directory inside another one
    return lines[1].strip() or None


def prioritise(findings: tuple[Finding, ...] | list[Finding]) -> list[Ranked]:
    """The findings in priority order, each with its demand signal (bot/scan/priority.py)."""
    from bot.drafts import load_catalogue
    from bot.recipes import RECIPES, fixes
    from bot.scan.priority import rank

    fixable = frozenset(r.name for r in RECIPES if fixes(r))
    return rank(list(findings), _journal().triaged_issues(), load_catalogue(), fixable)


# -- propose ---------------------------------------------------------------------------------


def propose(
    repo: Path,
    out: Path,
    *,
    issue: dict[str, Any] | None = None,
    class_name: str | None = None,
    upstream: str | None = None,
    record: bool = False,
    dedupe: bool = True,
) -> Plan:
    """Scan ``repo``, pick the finding the issue (or ``class_name``) is about, write the plan.

    The plan records the upstream it is for (default: ``BOT_UPSTREAM``); publish refuses it
    anywhere else. ``record`` also keeps the plan in the journal, for review on the dashboard.
    With ``dedupe``, AGENTS.md's duplicate-work search runs (no token needed; recorded as not
    run when GitHub is unreachable) and a class another open or merged PR covers is not
    proposed.
    """
    from bot.config import github_settings
    from bot.drafts import load_catalogue
    from bot.github.issues import own_logins
    from bot.propose.proposal import proposal_for
    from bot.triage.issue import triage_issue

    upstream = upstream or github_settings().upstream  # BOT_UPSTREAM: what publish will target
    check_plan_target(out)
    repo = Path(repo).resolve()
    result = scan(repo)
    catalogue = load_catalogue()
    triage = None
    if issue is not None:  # read against the scan just made, not a second one of the path
        mine = own_logins(issue)  # the bot's own comments are not the reporter's
        triage = triage_issue(issue, repo, catalogue, scan=result.context, own_logins=mine)
    proposal = proposal_for(
        repo,
        result,
        triage=triage,
        issue=issue,
        class_name=class_name,
        upstream=upstream,
        catalogue=catalogue,
    )
    if proposal.plan.status == READY:
        proposal = with_duplicate_search(repo, proposal, dedupe=dedupe)
    _write_plan(out, proposal.plan, proposal.patch, proposal.pr_markdown, repo)
    if record and issue is not None and triage is not None:
        _record_triage(issue, triage.architecture)
    if record and proposal.plan.status != NOTHING_TO_FIX:
        _journal().record_proposal(out)
    return proposal.plan


def duplicate_search(
    upstream: str,
    keywords: list[Keywords],
    markers: list[str],
    repo: Path,
    base: str,
    *,
    dedupe: bool,
) -> DuplicateSearch:
    """AGENTS.md's duplicate-work search (:mod:`bot.publish.duplicates`); recorded as not run
    with ``dedupe`` off or when GitHub is unreachable (``bot publish`` runs it again before
    anything is pushed)."""
    from bot.config import github_settings
    from bot.duplicate_search import not_run
    from bot.errors import BotError
    from bot.github.client import GitHubClient, GitHubUnreachable
    from bot.publish.duplicates import run_search
    from bot.publish.tree_facts import rules_at

    if not dedupe:
        return not_run("--no-dedupe")
    commands = rules_at(repo, base).duplicate_checks
    try:
        return run_search(GitHubClient(github_settings()), upstream, keywords, markers, commands)
    except GitHubUnreachable as exc:
        return not_run(f"offline: {exc}")
    except BotError as exc:  # a plan is still worth writing; publish searches again
        return not_run(f"the search failed: {exc}")


def with_duplicate_search(repo: Path, proposal: PlanContents, *, dedupe: bool) -> PlanContents:
    """A ready single-class plan with its duplicate search recorded and quoted in pr.md; a
    class another open or merged PR covers becomes nothing to fix, naming that PR."""
    from bot.github.identity import fingerprint_marker
    from bot.publish.contribution import preview
    from bot.publish.duplicates import keywords_of

    plan = proposal.plan
    keywords = [keywords_of(m.class_name, m.finding.path, m.issues) for m in plan.members]
    markers = [
        fingerprint_marker(f) for f in {plan.fingerprint or "", *plan.member_fingerprints} if f
    ]
    search = duplicate_search(
        plan.upstream, keywords, markers, repo, plan.base_commit, dedupe=dedupe
    )
    covering = search.covering(str(plan.class_name))
    if covering is not None:
        nothing = Plan(
            status=NOTHING_TO_FIX,
            reason=(
                f"PR #{covering.number} ({covering.state}) already covers {plan.class_name}: "
                f"{covering.why}"
            ),
            class_name=plan.class_name,
            repo_path=plan.repo_path,
            base_commit=plan.base_commit,
            vllm_version=plan.vllm_version,
            upstream=plan.upstream,
            issue_number=plan.issue_number,
            issue_title=plan.issue_title,
            duplicate_search=search,
        )
        return PlanContents(nothing, "", "")
    plan = dataclasses.replace(plan, duplicate_search=search)
    markdown = preview(proposal.pr_markdown, plan, proposal.patch, repo)
    return PlanContents(plan, proposal.patch, markdown)


def refresh_duplicate_search(plan_dir: Path) -> Plan:
    """An existing plan's duplicate search run again and recorded, its pr.md re-rendered from
    the new record (what a reviewer then sees, and approves, is the current answer)."""
    from bot.github.identity import fingerprint_marker
    from bot.plan import read_plan_dir
    from bot.publish.contribution import preview
    from bot.publish.duplicates import keywords_of
    from bot.verify.scratch import resolve_repo

    planned = read_plan_dir(plan_dir)
    plan = planned.plan
    if plan.status != READY:
        return plan
    repo = resolve_repo(plan.repo_path, plan.vllm_version, plan.base_commit)
    keywords = [keywords_of(m.class_name, m.finding.path, m.issues) for m in plan.members]
    markers = [fingerprint_marker(f) for f in {plan.fingerprint or "", *plan.member_fingerprints}]
    search = duplicate_search(
        plan.upstream, keywords, [m for m in markers if m], repo, plan.base_commit, dedupe=True
    )
    plan = dataclasses.replace(plan, duplicate_search=search)
    markdown = preview(planned.pr_markdown, plan, planned.patch, repo)
    write_plan_dir(plan_dir, plan, planned.patch, markdown)
    return plan


def _write_plan(out: Path, plan: Plan, patch: str, pr_markdown: str, repo: Path) -> None:
    """Write the plan directory. Re-planned unchanged (the same fix, patch and base commit as
    the plan already there), it keeps the verification recorded for that patch, so a rerun of
    `bot propose` neither forgets a result nor changes what the PR says."""
    from bot.content_hash import patch_hash
    from bot.errors import BotError
    from bot.publish.contribution import preview

    try:
        earlier = read_plan_dir(out) if (out / "plan.json").is_file() else None
    except BotError:
        earlier = None  # unreadable: written afresh
    recorded = earlier.plan.verification if earlier is not None else None
    if (
        earlier is not None
        and recorded is not None
        and recorded.patch_hash == patch_hash(patch)
        and earlier.patch == patch
        and (earlier.plan.fingerprint, earlier.plan.base_commit)
        == (plan.fingerprint, plan.base_commit)
    ):
        plan = dataclasses.replace(plan, verification=recorded)
        pr_markdown = preview(pr_markdown, plan, patch, repo)
    write_plan_dir(out, plan, patch, pr_markdown)


def _record_triage(issue: dict[str, Any], architecture: str | None) -> TriagedIssue | None:
    """The issue's triage, as demand for the findings of ``architecture`` (bot/scan/priority.py)."""
    from bot.triage_outcome import TriagedIssue

    number = issue.get("number")
    if not isinstance(number, int):
        return None
    state = issue.get("state") if issue.get("state") in ("open", "closed") else "unknown"
    entry = TriagedIssue(
        number=number,
        title=str(issue.get("title") or ""),
        url=str(issue.get("html_url") or ""),
        state=str(state),
        architecture=architecture,
    )
    _journal().record_triaged_issue(entry)
    return entry


def record_demand(found: list[tuple[Candidate, dict[str, Any]]], tree: Path) -> list[TriagedIssue]:
    """Each issue ``bot triage`` found, triaged, in the journal with the class it clearly
    names: the demand ``bot scan`` orders its findings by."""
    from bot.triage.search import demand

    recorded = [_record_triage(issue, architecture) for issue, architecture in demand(found, tree)]
    return [entry for entry in recorded if entry is not None]


def propose_top(
    repo: Path,
    ranked: list[Ranked],
    n: int,
    plans: Path,
    *,
    group_by: str = "shape",
    max_group_size: int | None = None,
    dedupe: bool = True,
) -> list[tuple[Ranked, Path, str]]:
    """Plans (never PRs) for the first ``n`` fixable findings, one per class, those sharing a
    fix shape in one group plan (``group_by``, :mod:`bot.recipes.grouping`); a group of one is the
    class's own plan. Publishing stays with a maintainer's approval. One plan that cannot be
    made does not stop the others: its line says why."""
    from bot.errors import BotError
    from bot.recipes.grouping import DEFAULT_MAX_GROUP_SIZE, group_findings
    from bot.scan.priority import top_fixable

    chosen = top_fixable(ranked, n)
    by_class = {item.finding.class_name: item for item in chosen}
    groups = group_findings(
        [item.finding for item in chosen],
        by=group_by,
        max_size=DEFAULT_MAX_GROUP_SIZE if max_group_size is None else max_group_size,
    )
    written = []
    for group in groups:
        first = by_class[group.findings[0].class_name]
        if len(group.findings) == 1:
            out = plans / _safe_name(f"class-{first.finding.class_name}")
            try:
                plan = propose(repo, out, class_name=first.finding.class_name, record=True)
                outcome = f"{plan.status}: {plan.reason}"
            except BotError as exc:
                outcome = f"not planned: {exc}"
        else:
            out = plans / _safe_name(f"group-{group.name}")
            try:
                plan, left_out = propose_group(
                    repo, out, group.name, ranked=ranked, groups=groups, dedupe=dedupe, record=True
                )
                outcome = f"{plan.status}: {plan.reason}" + "".join(
                    f"; left out {line}" for line in left_out
                )
            except BotError as exc:
                outcome = f"not planned: {exc}"
        written.append((first, out, outcome))
    return written


def find_groups(
    repo: Path, *, group_by: str = "shape", max_group_size: int | None = None
) -> tuple[list[Ranked], list[FindingGroup]]:
    """Every fixable finding of ``repo`` (one per class, by priority), grouped."""
    from bot.recipes.grouping import DEFAULT_MAX_GROUP_SIZE, group_findings
    from bot.scan.priority import top_fixable

    ranked = prioritise(scan(repo).findings)
    chosen = top_fixable(ranked, len(ranked))
    groups = group_findings(
        [item.finding for item in chosen],
        by=group_by,
        max_size=DEFAULT_MAX_GROUP_SIZE if max_group_size is None else max_group_size,
    )
    return ranked, groups


def propose_group(
    repo: Path,
    out: Path,
    name: str,
    *,
    ranked: list[Ranked],
    groups: list[FindingGroup],
    upstream: str | None = None,
    dedupe: bool = True,
    record: bool = False,
) -> tuple[Plan, list[str]]:
    """Write the plan of group ``name`` (one of ``groups``); returns it and what was left out.

    With ``dedupe``, a member whose class is already in any PR of the bot (open, merged or
    closed; read from GitHub by its marker, no token needed) is left out."""
    from bot.config import github_settings
    from bot.drafts import load_catalogue
    from bot.errors import BotError
    from bot.propose.group import group_proposal

    found = [g for g in groups if g.name == name]
    if not found:
        known = ", ".join(g.name for g in groups if len(g.findings) > 1) or "none"
        raise BotError(f"no group {name!r} in this tree; groups of several classes: {known}")
    settings = github_settings()
    upstream = upstream or settings.upstream
    check_plan_target(out)
    repo = Path(repo).resolve()
    issues = {item.finding.class_name: [i.number for i in item.demand.issues] for item in ranked}
    published, search = _group_lookups(repo, found[0], issues, upstream, dedupe=dedupe)
    covered = {}
    for finding in found[0].findings:
        pull = search.covering(finding.class_name)
        if pull is not None:
            covered[finding.class_name] = (
                f"covered by PR #{pull.number} ({pull.state}): {pull.title} ({pull.why})"
            )
    result = scan(repo)
    made = group_proposal(
        repo,
        result,
        found[0],
        upstream=upstream,
        catalogue=load_catalogue(),
        issues=issues,
        published=published,
        covered=covered,
    )
    proposal = made.proposal
    if proposal.plan.status == READY:
        from bot.publish.contribution import preview

        # Recorded as it concerns the members: what publish, searching for them, finds again.
        members = [m.class_name for m in proposal.plan.members]
        plan = dataclasses.replace(proposal.plan, duplicate_search=search.for_classes(members))
        markdown = preview(proposal.pr_markdown, plan, proposal.patch, repo)
        proposal = PlanContents(plan, proposal.patch, markdown)
    _write_plan(out, proposal.plan, proposal.patch, proposal.pr_markdown, repo)
    if record and proposal.plan.status != NOTHING_TO_FIX:
        _journal().record_proposal(out)
    return proposal.plan, [item.line() for item in made.left_out]


def _group_lookups(
    repo: Path, group: FindingGroup, issues: dict[str, list[int]], upstream: str, *, dedupe: bool
) -> tuple[dict[str, Any], DuplicateSearch]:
    """What GitHub says about a group before it is planned: the bot's own PRs naming a member
    (any state), and AGENTS.md's duplicate search over everyone's. Offline, both are recorded as
    not run and the plan is made anyway (``bot publish`` runs them before anything is pushed)."""
    from bot.config import github_settings
    from bot.duplicate_search import not_run
    from bot.github.client import GitHubClient, GitHubUnreachable
    from bot.github.identity import fingerprint_marker
    from bot.publish.duplicates import keywords_of
    from bot.publish.published import published_classes
    from bot.tree.worktree import head_commit

    keywords = [
        keywords_of(f.class_name, f.path, issues.get(f.class_name, ())) for f in group.findings
    ]
    if not dedupe:
        return {}, not_run("--no-dedupe")
    try:
        published = published_classes(GitHubClient(github_settings()), upstream)
    except GitHubUnreachable as exc:
        return {}, not_run(f"offline: {exc}")
    # The bot's own PRs are `published`'s to judge (the group's own open PR is refreshed).
    ours = sorted(
        {fingerprint_marker(p.plan_fingerprint) for p in published.values() if p.plan_fingerprint}
    )
    search = duplicate_search(upstream, keywords, ours, repo, head_commit(repo), dedupe=dedupe)
    return published, search


def publish(
    plan_dir: Path,
    *,
    reviewer: str | None,
    expected_issue: int | None = None,
    attest: Attester | None = None,
) -> PublishResult:
    """Open or update the plan's PR, then note what GitHub now has in the journal.

    ``expected_issue``: the upstream issue the caller derived itself (from the labelled event);
    a plan naming another is refused. ``attest``: who read the diff and the body
    (:mod:`bot.publish.attestation`). A maintainer's request recorded in the journal (ticked on
    the dashboard issue, ``bot sync``) counts as demand.
    """
    from bot.publish.pr import publish_plan

    journal = _journal()
    proposal_id = journal.record_proposal(plan_dir)
    result = publish_plan(
        plan_dir,
        reviewer=reviewer,
        expected_issue=expected_issue,
        attest=attest,
        requested_by=journal.requested_by(proposal_id),
    )
    record_published(journal, proposal_id, result, reviewer or "bot")
    return result


def record_published(journal: Journal, proposal_id: int, result: PublishResult, actor: str) -> bool:
    """What publishing reached on GitHub, in the journal (the dashboard's approval records it
    here too): the PR, in the state :data:`bot.publish.pr.PR_STATE_AFTER` maps the outcome to, or
    the sticky comment alone; False when nothing reached GitHub."""
    if result.pr_state:
        journal.record_pr(
            proposal_id, result.pr_number, result.pr_url, result.pr_state, actor, result.comment_url
        )
    elif result.comment_url:
        journal.record_comment(proposal_id, result.comment_url, actor)
    else:
        return False
    return True


def verify(
    plan_dirs: list[Path], options: VerifyOptions | None = None, client: ActionsClient | None = None
) -> list[Verification]:
    """Verify each plan directory (:func:`bot.verify.run.verify_plans`: the results go into
    its plan.json and pr.md), then record each run in the journal."""
    from bot.plan import read_plan_dir
    from bot.verify.run import verify_plans

    verifications = verify_plans(plan_dirs, options, client)
    for plan_dir, verification in zip(plan_dirs, verifications, strict=True):
        verified = read_plan_dir(plan_dir)
        record_verification(plan_dir, verified.plan, verified.patch, verification)
    return verifications


def record_verification(plan_dir: Path, plan: Plan, patch: str, verification: Verification) -> None:
    """A verification run: the journal's copy follows the plan directory (plan.json and pr.md
    with the results), then the run moves the state of a proposal the journal already had."""
    from bot.journal.store import plan_fingerprint

    journal = _journal()
    existing = journal.proposal_by_fingerprint(plan_fingerprint(plan, patch))
    proposal_id = journal.record_proposal(plan_dir)
    if existing is not None:
        journal.record_verification(proposal_id, verification.to_json())


def verify_for_submission(plan_dir: Path) -> Verification:
    """``bot propose``'s own verification, before the submitter is asked: every check, or,
    beside a credential (which upstream code could read), only the checks that run nothing
    from the tree (the CPU tests and the smoke check are then recorded as not run)."""
    from bot.subprocess_env import credentials_children_can_read
    from bot.verify import VerifyOptions

    runtime = not credentials_children_can_read()
    return verify([plan_dir], VerifyOptions(gpu="skip", runtime=runtime))[0]


def default_plan_dir(issue: int | None, class_name: str | None) -> Path:
    from bot.config import home_dir

    name = f"issue-{issue}" if issue is not None else f"class-{class_name}"
    return home_dir() / "plans" / _safe_name(name)


def default_group_dir(name: str) -> Path:
    from bot.config import home_dir

    return home_dir() / "plans" / _safe_name(f"group-{name}")


def _safe_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def demo(out: Path, *, version: str = "0.23.0") -> tuple[Plan, str]:
    """The main job, offline: the bundled example issue against a cached vLLM release."""
    from bot.github.issues import read_issue_file
    from bot.tree.fetch import release_tree

    tree = release_tree(version)
    with as_file(files("bot") / "data" / "example_issue.json") as example:
        issue = read_issue_file(example)
    plan = propose(tree, out, issue=issue)
    return plan, (out / "patch.diff").read_text(encoding="utf-8")
