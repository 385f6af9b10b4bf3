"""A group plan: several classes of one fix shape in one plan, one branch, one PR.

Each member is planned by its own recipe, exactly as a single-class plan would be, and applied in
one scratch worktree in turn with the same do-no-harm checks
(:func:`bot.propose.proposal._apply_edit`); later members see what earlier ones changed, so the
regression test is one parametrized test whose list grows, not one test per class. Each member's own
diff (against the tree the earlier members left) becomes its own commit on the branch; the members'
diffs add up to patch.diff.
A member is left out, with the reason said, when its class is already in a PR (any state; see
:mod:`bot.publish.published`) other than the group's own open PR, when that PR is open and does
not hold the class (it waits until the PR is merged or closed), when its recipe declines it, or
when its edit is refused. So the group planned again after the upstream moved holds the same
members, and publishing refreshes its PR. A group
that ends up with one member is a single-class plan, byte for byte what ``bot propose --class``
writes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot import plan as plans
from bot.drafts import DraftCatalogue
from bot.errors import BotError
from bot.github import identity
from bot.github.gitrepo import Repo
from bot.plan import PlanContents
from bot.propose.proposal import (
    _apply_edit,
    _ready,
    apply_fix,
    check_rescan,
    plan_reason,
    render_markdown,
    resolved_keys,
    scratch_paths,
    writeup_context,
)
from bot.publish.contrib_rules import ContributionRules
from bot.publish.published import PublishedPull
from bot.publish.tree_facts import rules_at
from bot.publish.writeup import (
    RECIPE_SECTIONS,
    render_group_parts,
    render_row,
    render_sections,
)
from bot.recipes import Declined, Finding, FixPlan, PlanContext, fixer_named
from bot.recipes.grouping import FindingGroup
from bot.scan.findings import ScanResult, scan
from bot.tree.version import tree_version
from bot.tree.worktree import diff_worktree, head_commit, scratch_worktree

GROUP_TEMPLATES = {slot: f"group/{slot}.j2" for slot in RECIPE_SECTIONS}
_DECLARE = "[Model][Spec Decode] Declare SupportsEagle3 on "


@dataclass(frozen=True)
class LeftOut:
    class_name: str
    reason: str

    def line(self) -> str:
        return f"{self.class_name}: {self.reason}"


@dataclass(frozen=True)
class GroupProposal:
    proposal: PlanContents
    left_out: tuple[LeftOut, ...]


@dataclass(frozen=True)
class _Applied:
    fix: FixPlan
    edits: tuple[dict[str, Any], ...]
    patch: str


def group_proposal(
    repo: Path,
    result: ScanResult,
    group: FindingGroup,
    *,
    upstream: str,
    catalogue: DraftCatalogue,
    issues: Mapping[str, Sequence[int]],
    published: Mapping[str, PublishedPull],
    covered: Mapping[str, str] | None = None,
) -> GroupProposal:
    """The plan for ``group``'s findings; ``issues`` maps a class to the triaged open issues
    asking for it, ``published`` the classes already in a PR of the bot
    (:func:`published_classes`), ``covered`` the classes another open or merged PR covers (by
    the duplicate search), each with the line that says which."""
    base_commit, version = head_commit(repo), tree_version(repo)
    common: dict[str, Any] = {
        "repo_path": str(repo),
        "base_commit": base_commit,
        "vllm_version": version,
        "upstream": upstream,
        "issue_number": None,
        "issue_title": None,
        "triage": None,
    }
    left_out: list[LeftOut] = []
    fixes: list[FixPlan] = []
    # The group's own PR, still open: its members are planned again (on this base, so that
    # publishing refreshes it), and a class it does not hold waits until it is merged or closed.
    own = next((p for p in published.values() if _open_pr_of(group.name, p)), None)
    for finding in group.findings:
        fix = _plan_member(result, finding, upstream, catalogue, version, base_commit)
        if isinstance(fix, LeftOut):
            left_out.append(fix)
            continue
        if finding.class_name in (covered or {}):
            left_out.append(LeftOut(finding.class_name, (covered or {})[finding.class_name]))
            continue
        key = identity.class_key(_fingerprint(fix, base_commit))
        earlier = published.get(key or "")
        if earlier is not None and earlier != own:
            why = f"already in PR #{earlier.number} ({earlier.describe()}); not proposed again"
            left_out.append(LeftOut(finding.class_name, why))
            continue
        if earlier is None and own is not None:
            why = f"the group's PR #{own.number} is open; proposed once it is merged or closed"
            left_out.append(LeftOut(finding.class_name, why))
            continue
        fixes.append(fix)
    member_issues = {id(fix): _issues_of(fix.finding, issues) for fix in fixes}
    if len(fixes) == 1:
        fix = fixes[0]
        numbers = member_issues[id(fix)]
        common["issue_number"] = numbers[0] if numbers else None
        applied = apply_fix(repo, base_commit, fix, result.findings)
        return GroupProposal(_ready(repo, common, fix, applied), tuple(left_out))
    limit = largest_tier_lines(rules_at(repo, base_commit))
    applied_members, refused, total = _apply_members(
        repo, base_commit, fixes, result.findings, limit
    )
    left_out += refused
    if len(applied_members) == 1:
        # One left: a single-class plan, as `bot propose --class` writes it.
        rest = FindingGroup(group.name, (applied_members[0].fix.finding,))
        again = group_proposal(
            repo, result, rest, upstream=upstream, catalogue=catalogue, issues=issues, published={}
        )
        return GroupProposal(again.proposal, tuple(left_out))
    if not applied_members:
        return GroupProposal(_nothing(common, group.name, left_out), tuple(left_out))
    members = [_member(a, base_commit, member_issues[id(a.fix)]) for a in applied_members]
    proposal = _group_plan(repo, common, group.name, applied_members, members, total, left_out)
    return GroupProposal(proposal, tuple(left_out))


def _open_pr_of(name: str, pull: PublishedPull) -> bool:
    return pull.state == "open" and identity.is_group_of(pull.plan_fingerprint or "", name)


def _plan_member(
    result: ScanResult,
    finding: Finding,
    upstream: str,
    catalogue: DraftCatalogue,
    version: str | None,
    base_commit: str,
) -> FixPlan | LeftOut:
    recipe = fixer_named(finding.recipe)
    if recipe is None:
        return LeftOut(finding.class_name, f"the bot does not patch {finding.recipe} findings")
    variants = tuple(
        f
        for f in result.findings
        if f.recipe == finding.recipe and f.class_name == finding.class_name
    )
    ctx = PlanContext(
        scan=result.context,
        group=variants or (finding,),
        findings=tuple(result.findings),
        arch=next(iter(finding.architectures), ""),
        catalogue=catalogue,
        preferred_draft=None,
        upstream=upstream,
        version=version,
        base_commit=base_commit,
    )
    try:
        fix = recipe.plan(finding, ctx)
    except BotError as exc:
        return LeftOut(finding.class_name, f"refused: {exc}")
    if isinstance(fix, Declined):
        return LeftOut(finding.class_name, fix.reason)
    return fix


def _fingerprint(fix: FixPlan, base_commit: str) -> str:
    return identity.fingerprint(fix.recipe, fix.finding.class_name, fix.variant, base_commit)


def _issues_of(finding: Finding, issues: Mapping[str, Sequence[int]]) -> list[int]:
    return sorted(set(issues.get(finding.class_name, ())))


def _apply_members(
    repo: Path,
    base_commit: str,
    fixes: Sequence[FixPlan],
    scanned: Sequence[Finding],
    limit: tuple[str, int] | None = None,
) -> tuple[list[_Applied], list[LeftOut], str]:
    """Apply each member in turn in one scratch tree; its diff is taken against the index,
    which holds what the members before it changed, and then staged. Also returns patch.diff
    (the worktree against the base: the members' diffs added up). With ``limit`` (the
    pr-checklist skill's largest tier a group may reach, and its line bound), a member that
    would take the lines added outside tests past it is left out for a later group."""
    applied: list[_Applied] = []
    refused: list[LeftOut] = []
    lines = 0
    with scratch_worktree(repo, base_commit, scratch_paths(repo, fixes)) as tree:
        for fix in fixes:
            saved = {e.path: _read(tree / e.path) for e in fix.edits}
            try:
                changed = tuple(edit for edit in fix.edits if _apply_edit(tree, edit))
            except BotError as exc:
                _restore(tree, saved)
                refused.append(LeftOut(fix.finding.class_name, f"refused: {exc}"))
                continue
            if not changed:
                refused.append(LeftOut(fix.finding.class_name, "its edits change nothing"))
                continue
            paths = list(dict.fromkeys(edit.path for edit in changed))
            added = lines_outside_tests(_diff(tree, paths))
            if limit is not None and applied and lines + added > limit[1]:
                _undo(tree, saved)
                refused.append(LeftOut(fix.finding.class_name, _over(limit, lines + added)))
                continue
            patch = _diff_and_stage(tree, paths)
            lines += added
            applied.append(_Applied(fix, tuple(e.to_json() for e in changed), patch))
        check_rescan(scan(tree).findings, [a.fix for a in applied], scanned)
        total = diff_worktree(
            tree, list(dict.fromkeys(e["path"] for a in applied for e in a.edits))
        )
    return applied, refused, total


def largest_tier_lines(rules: ContributionRules) -> tuple[str, int] | None:
    """The pr-checklist skill's tier a group may reach (the one below its highest: 0.34.0's
    Medium, 50-250 lines) and its upper bound; None when the tree states no tiers."""
    bounded = []
    for tier in rules.complexity_tiers[:-1]:
        numbers = [int(n) for n in re.findall(r"\d+", tier.bound)]
        if numbers:
            bounded.append((tier.name, numbers[-1] - (1 if tier.bound.startswith("<") else 0)))
    return bounded[-1] if bounded else None


def lines_outside_tests(patch: str) -> int:
    """Lines a patch adds outside tests and docs (the skill's rule of thumb)."""
    added, current = 0, ""
    for line in patch.splitlines():
        if line.startswith("+++ "):
            current = line[4:].removeprefix("b/")
        elif line.startswith("+") and not current.startswith(("tests/", "docs/")):
            added += 1
    return added


def _over(limit: tuple[str, int], lines: int) -> str:
    return (
        f"left for a later group: with it the group would add {lines} lines outside tests, past "
        f"the pr-checklist skill's {limit[0]} complexity tier (up to {limit[1]}); propose the "
        "group again once this PR is published"
    )


def _diff(tree: Path, paths: Sequence[str]) -> str:
    """The worktree's change to ``paths`` against the index (what this member adds)."""
    with Repo(tree) as scratch:
        new_files = scratch.git.ls_files("--others", "--exclude-standard", "--", *paths)
        if new_files:
            scratch.git.add("--intent-to-add", "--", *new_files.splitlines())
        return str(scratch.git.diff("--no-color", "--no-ext-diff", "--", *paths))


def _undo(tree: Path, saved: Mapping[str, str | None]) -> None:
    """A member's edits undone: changed files restored, files it created gone (index too)."""
    _restore(tree, saved)
    created = [rel for rel, text in saved.items() if text is None]
    if created:
        with Repo(tree) as scratch:
            scratch.git.rm("--cached", "-q", "--ignore-unmatch", "--", *created)
        for rel in created:
            (tree / rel).unlink(missing_ok=True)


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None


def _restore(tree: Path, saved: Mapping[str, str | None]) -> None:
    for rel, text in saved.items():
        if text is not None:
            (tree / rel).write_text(text, encoding="utf-8")


def _diff_and_stage(tree: Path, paths: Sequence[str]) -> str:
    with Repo(tree) as scratch:
        new_files = scratch.git.ls_files("--others", "--exclude-standard", "--", *paths)
        if new_files:  # a file a member's edit created: intent-to-add, so it diffs as new
            scratch.git.add("--intent-to-add", "--", *new_files.splitlines())
        text = scratch.git.diff(
            "--no-color", "--no-ext-diff", "--src-prefix=a/", "--dst-prefix=b/", "--", *paths
        )
        scratch.git.add("--", *paths)
    return text + "\n" if text else ""


def _member(applied: _Applied, base_commit: str, issues: list[int]) -> plans.Member:
    fix = applied.fix
    entry = fix.registry.entry
    return plans.Member(
        class_name=fix.finding.class_name,
        recipe=fix.recipe,
        fingerprint=_fingerprint(fix, base_commit),
        variant=fix.variant,
        finding=fix.finding.to_json(),
        registry_entry=entry.to_json() if entry else None,
        tests=fix.tests.to_json(),
        edits=list(applied.edits),
        issues=issues,
        title=fix.commit_title,
        reason=plan_reason(fix),
        issue_comment=fix.issue_comment,
        patch=applied.patch,
        resolves=resolved_keys(fix),
    )


def _group_plan(
    repo: Path,
    common: dict[str, Any],
    name: str,
    applied: Sequence[_Applied],
    members: Sequence[plans.Member],
    patch: str,
    left_out: Sequence[LeftOut],
) -> PlanContents:
    fingerprints = [m.fingerprint for m in members]
    fingerprint = identity.group_fingerprint(name, fingerprints, common["base_commit"])
    title = group_title(name, [m.title for m in members])
    issues = sorted({n for m in members for n in m.issues})
    rendered = []
    for a, member in zip(applied, members, strict=True):
        context = writeup_context(a.fix, member.fingerprint, list(a.edits), None)
        rendered.append(
            {
                **context,
                "cls": member.class_name,
                "recipe": member.recipe,
                "archs": list(a.fix.finding.architectures),
                "issues": member.issues,
                "sections": render_sections(context, a.fix.writeup.sections),
                "row": render_row(context, a.fix.writeup.sections),
            }
        )
    recipes = []
    for recipe in dict.fromkeys(m["recipe"] for m in rendered):
        of_recipe = [m for m in rendered if m["recipe"] == recipe]
        sections = next(a.fix.writeup.sections for a in applied if a.fix.recipe == recipe)
        recipes.append(render_group_parts(of_recipe, sections))
    gpu = [n for m in members for n in m.tests.get("gpu", [])]
    cpu = list(dict.fromkeys(n for m in members for n in m.tests.get("cpu", [])))
    engine = list(dict.fromkeys(n for m in members for n in m.tests.get("engine", [])))
    edits = [e for m in members for e in m.edits]
    context = {
        "group": name,
        "members": rendered,
        "recipes": recipes,
        "group_change": group_change(members),
        "left_out": [item.line() for item in left_out],
        "issues": issues,
        "issue_number": None,
        "recipe": ", ".join(dict.fromkeys(m.recipe for m in members)),
        "fingerprint": fingerprint,
        "member_fingerprints": fingerprints,
        "edits": edits,
        "entry": None,
        "entry_why": "none of the members has a registry entry for the GPU test",
        "gpu_tests": gpu,
        "cpu_tests": cpu,
    }
    plan = plans.Plan(
        status=plans.READY,
        reason=(f"{len(members)} model classes share one fix ({name}); each has its own commit"),
        edits=edits,
        tests={"gpu": gpu, "cpu": cpu, **({"engine": engine} if engine else {})},
        branch=identity.group_branch_name(name, fingerprints),
        fingerprint=fingerprint,
        title=title,
        group=name,
        members=list(members),
        **common,
    )
    pr_markdown = render_markdown(repo, plan, patch, title, context, GROUP_TEMPLATES)
    plan.title = plans.split_pr_markdown(pr_markdown)[0]
    return PlanContents(plan, patch, pr_markdown)


def group_change(members: Sequence[plans.Member]) -> list[str]:
    """The group's change in a few lines: the files every member touches once, and each
    member's own files described by the first member's edit (the others make the same edit on
    their own class)."""
    by_path: dict[str, list[dict[str, Any]]] = {}
    for member in members:
        for edit in member.edits:
            by_path.setdefault(str(edit["path"]), []).append(edit)
    shared = {p: e for p, e in by_path.items() if len(e) > 1}
    own = [e[0] for p, e in by_path.items() if len(e) == 1]
    lines = [f"{len(members)} commits, one per class."]
    for path, edits in shared.items():
        lines.append(
            f"`{path}`: {len(edits)} edits, one per class ({edits[0]['description']}, and the same "
            "for each)"
        )
    kinds = dict.fromkeys(str(e.get("kind")) for e in own)
    for kind in kinds:
        of_kind = [e for e in own if str(e.get("kind")) == kind]
        first = of_kind[0]
        lines.append(
            f"{len(of_kind)} file(s), each its class's own (linked in the table): "
            f"`{first['path']}`: {first['description']}, and likewise for the others"
            if len(of_kind) > 1
            else f"`{first['path']}`: {first['description']}"
        )
    return lines


def group_title(name: str, titles: Sequence[str]) -> str:
    if all(t.startswith(_DECLARE) for t in titles):
        return f"{_DECLARE}{len(titles)} model classes ({name})"
    return f"[Model][Spec Decode] EAGLE-3 support for {len(titles)} model classes ({name})"


def _nothing(common: dict[str, Any], name: str, left_out: Sequence[LeftOut]) -> PlanContents:
    listed = "; ".join(item.line() for item in left_out) or "no findings"
    plan = plans.Plan(
        status=plans.NOTHING_TO_FIX,
        reason=f"nothing left to propose in group {name}: {listed}",
        **common,
    )
    return PlanContents(plan, "", "")
