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

from bot.plan import NOTHING_TO_FIX, Plan, check_plan_target, read_plan_dir, write_plan_dir
from bot.scan.findings import ScanResult
from bot.scan.findings import scan as scan_tree

if TYPE_CHECKING:
    from bot.journal.store import Journal, TriagedIssue
    from bot.publish.pr import PublishResult
    from bot.recipes import Finding
    from bot.recipes.grouping import FindingGroup
    from bot.scan.priority import Ranked
    from bot.triage.search import Candidate
    from bot.verify.verification import Verification


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
) -> Plan:
    """Scan ``repo``, pick the finding the issue (or ``class_name``) is about, write the plan.

    The plan records the upstream it is for (default: ``BOT_UPSTREAM``); publish refuses it
    anywhere else. ``record`` also keeps the plan in the journal, for review on the dashboard.
    """
    from bot.config import github_settings
    from bot.drafts import load_catalogue
    from bot.propose.proposal import proposal_for
    from bot.triage.issue import triage_issue

    upstream = upstream or github_settings().upstream  # BOT_UPSTREAM: what publish will target
    check_plan_target(out)
    repo = Path(repo).resolve()
    result = scan(repo)
    catalogue = load_catalogue()
    triage = None
    if issue is not None:  # read against the scan just made, not a second one of the path
        triage = triage_issue(issue, repo, catalogue, scan=result.context)
    proposal = proposal_for(
        repo,
        result,
        triage=triage,
        issue=issue,
        class_name=class_name,
        upstream=upstream,
        catalogue=catalogue,
    )
    _write_plan(out, proposal.plan, proposal.patch, proposal.pr_markdown)
    if record and issue is not None and triage is not None:
        _record_triage(issue, triage.architecture)
    if record and proposal.plan.status != NOTHING_TO_FIX:
        _journal().record_proposal(out)
    return proposal.plan


def _write_plan(out: Path, plan: Plan, patch: str, pr_markdown: str) -> None:
    """Write the plan directory. Re-planned unchanged (the same fix, patch and base commit as
    the plan already there), it keeps the verification recorded for that patch, so a rerun of
    `bot propose` neither forgets a result nor changes what the PR says."""
    from bot.content_hash import patch_hash
    from bot.errors import BotError
    from bot.verify.render import render_results, replace_results_section

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
        pr_markdown = replace_results_section(pr_markdown, render_results(recorded))
    write_plan_dir(out, plan, patch, pr_markdown)


def _record_triage(issue: dict[str, Any], architecture: str | None) -> TriagedIssue | None:
    """The issue's triage, as demand for the findings of ``architecture`` (bot/scan/priority.py)."""
    from bot.journal.store import TriagedIssue

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
    published = {}
    if dedupe:
        from bot.github.client import GitHubClient
        from bot.publish.published import published_classes

        published = published_classes(GitHubClient(settings), upstream)
    issues = {item.finding.class_name: [i.number for i in item.demand.issues] for item in ranked}
    result = scan(repo)
    made = group_proposal(
        repo,
        result,
        found[0],
        upstream=upstream,
        catalogue=load_catalogue(),
        issues=issues,
        published=published,
    )
    proposal = made.proposal
    _write_plan(out, proposal.plan, proposal.patch, proposal.pr_markdown)
    if record and proposal.plan.status != NOTHING_TO_FIX:
        _journal().record_proposal(out)
    return proposal.plan, [item.line() for item in made.left_out]


def publish(
    plan_dir: Path, *, reviewer: str | None, expected_issue: int | None = None
) -> PublishResult:
    """Open or update the plan's PR, then note what GitHub now has in the journal.

    ``expected_issue``: the upstream issue the caller derived itself (from the labelled event);
    a plan naming another is refused.
    """
    from bot.publish.pr import publish_plan

    result = publish_plan(plan_dir, reviewer=reviewer, expected_issue=expected_issue)
    journal = _journal()
    record_published(journal, journal.record_proposal(plan_dir), result, reviewer or "bot")
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


def record_verification(plan_dir: Path, plan: Plan, patch: str, verification: Verification) -> None:
    """A verification run (``bot verify`` records it here): the journal's copy follows the plan
    directory (plan.json and pr.md with the results), then the run moves the state of a
    proposal the journal already had."""
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
    from bot.verify import VerifyOptions, verify_plan

    runtime = not credentials_children_can_read()
    return verify_plan(plan_dir, VerifyOptions(gpu="skip", runtime=runtime))


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
