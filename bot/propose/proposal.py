"""From a finding (and optionally a triaged issue) to a plan directory, for any recipe.

The finding's recipe plans the fix (:class:`bot.recipes.FixPlan`); this module applies the
plan's edits in a scratch worktree at the tree's HEAD and runs the do-no-harm checks on every
one of them: libcst reproduces the file byte for byte before it is edited, the change stays in
the spans the recipe declared, the touched lines are formatted with the tree's own ruff settings
and must be ruff-clean, and the patched tree is scanned again (the findings the fix resolves are
gone, no new finding appears). The patch is what ``git diff`` says in the scratch worktree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from bot import plan as plans
from bot.codemods.base import CodemodRefused
from bot.codemods.safety import (
    changed_lines_confined,
    check_relpath,
    check_round_trip,
    check_ruff_clean,
    format_touched,
)
from bot.codemods.spans import resolve
from bot.drafts import DraftCatalogue
from bot.errors import BotError
from bot.github import identity
from bot.github.identity import branch_name
from bot.plan import PlanContents
from bot.publish.contribution import preview_facts, render_blocks
from bot.publish.writeup import render_pr
from bot.recipes import RECIPES, Declined, Finding, FixPlan, PlanContext, fixer_named
from bot.recipes.base import DeclaredEdit, FileEdit
from bot.scan import rescan
from bot.scan.findings import ScanResult, scan
from bot.tree.ci_steps import is_ci_step_file
from bot.tree.drafter_loader import loader_dirs
from bot.tree.index import MODEL_PACKAGES
from bot.tree.layout import AGENTS_RULES, SPEC_DECODE_TESTS, TEST_AREAS
from bot.tree.version import tree_version
from bot.tree.worktree import diff_worktree, head_commit, scratch_worktree
from bot.triage_outcome import ASK, SILENT, Triage

# What proposing reads and edits: the model packages (scanned again after the edit), the
# package marker, and the tests it extends. Files at the top (ruff's settings) come along.
SCRATCH_PATHS = (
    "vllm/__init__.py",
    *MODEL_PACKAGES,
    "tests/models",
    "tests/model_executor",
    # a tree with tests/AGENTS.md: the test through LLM, and the CI step that runs it
    AGENTS_RULES,
    SPEC_DECODE_TESTS,
    TEST_AREAS,
)


@dataclass(frozen=True)
class AppliedFix:
    """The patch and the edits that changed something (an edit that changed nothing is left
    out: the registry entry or the test may already be there)."""

    patch: str
    edits: tuple[FileEdit, ...]


def scratch_paths(repo: Path, fixes: Sequence[FixPlan]) -> tuple[str, ...]:
    """What a scratch checkout holds: the model packages and tests, the speculative-decoding
    loaders (a re-scan reads them: :mod:`bot.tree.drafter_loader`), and every file an edit
    touches (a core fix edits outside the model packages)."""
    edited = [e.path for fix in fixes for e in fix.edits if not e.creates and _inside(e.path)]
    return tuple(dict.fromkeys((*SCRATCH_PATHS, *loader_dirs(repo), *edited)))


def _inside(path: str) -> bool:
    """A relative path that stays in the tree; any other is left for the edit checks to refuse
    (git refuses to list it, with an error that is no refusal)."""
    parts = PurePosixPath(path).parts
    return bool(parts) and not PurePosixPath(path).is_absolute() and ".." not in parts


def apply_fix(repo: Path, base_commit: str, fix: FixPlan, scanned: Sequence[Finding]) -> AppliedFix:
    """Apply ``fix``'s edits at ``base_commit`` with every do-no-harm check; ``scanned`` is
    what the unpatched tree reported (the re-scan compares against it)."""
    with scratch_worktree(repo, base_commit, scratch_paths(repo, [fix])) as tree:
        applied = tuple(edit for edit in fix.edits if apply_edit(tree, edit))
        paths = list(dict.fromkeys(edit.path for edit in applied))
        patch = diff_worktree(tree, paths)
        check_rescan(scan(tree).findings, [fix], scanned)
    return AppliedFix(patch, applied)


def apply_edit(tree: Path, edit: FileEdit) -> bool:
    """Apply one file's codemods, checked; False when they change nothing."""
    if not is_ci_step_file(edit.path):  # (a CI step's YAML: a test's step gains a file)
        check_relpath(edit.path)
    path = tree / edit.path
    if edit.creates and not path.exists():
        return _create_file(tree, edit)
    # (a file to create that an earlier member of a group plan created is extended instead,
    # within the edit's spans)
    if not path.is_file():
        raise CodemodRefused(f"{edit.path} is not in the tree; not creating files")
    before = path.read_text(encoding="utf-8")
    if not edit.path.endswith(".py"):
        return _apply_text_edit(path, edit, before)
    check_round_trip(before, edit.path)
    after = edit.apply(before)
    if after == before:
        return False
    allowed = resolve(edit.confined_to, before)
    changed_lines_confined(before, after, allowed)
    after = format_touched(before, after, tree, edit.path)
    changed_lines_confined(before, after, allowed)  # formatting may not widen the edit either
    check_ruff_clean(before, after, tree, edit.path)
    path.write_text(after, encoding="utf-8")
    return True


def _apply_text_edit(path: Path, edit: FileEdit, before: str) -> bool:
    """A file that is not Python (a CI step's YAML): the codemods may only insert lines."""
    after = edit.apply(before)
    if after == before:
        return False
    lines = len(before.splitlines())
    changed_lines_confined(before, after, [(n + 1, n) for n in range(lines + 1)])
    path.write_text(after, encoding="utf-8")
    return True


def _create_file(tree: Path, edit: FileEdit) -> bool:
    """A new file: it must not exist, its directory must; formatted and ruff-clean."""
    path = tree / edit.path
    if path.exists() or not path.parent.is_dir():
        raise CodemodRefused(f"{edit.path}: not creating it (it exists, or its directory does not)")
    after = edit.apply("")
    if not after:
        return False
    after = format_touched("", after, tree, edit.path)
    check_ruff_clean("", after, tree, edit.path)
    path.write_text(after, encoding="utf-8")
    return True


def check_rescan(
    after: Sequence[Finding], fixes: Sequence[FixPlan], before: Sequence[Finding]
) -> None:
    """Refuse unless every finding the fixes resolve is gone and no new finding appeared
    (:func:`bot.scan.rescan.compare`, the comparison verify records too)."""
    resolves = [f.key for fix in fixes for f in fix.resolves]
    found = rescan.compare((f.key for f in before), after, resolves)
    edit, makes = ("edit", "makes") if len(fixes) == 1 else ("edits", "make")
    if found.still:
        raise BotError(f"refused: {found.still[0][1]} is still reported after the {edit}")
    if found.new:
        new = found.new[0]
        raise BotError(
            f"refused: the {edit} {makes} {new.recipe} report {new.class_name} "
            f"({new.path}), which the unpatched tree did not"
        )


# -- the plan -------------------------------------------------------------------------------


def writeup_context(
    fix: FixPlan, fingerprint: str, edits: Sequence[DeclaredEdit], issue_number: int | None
) -> dict[str, Any]:
    """What one fix's write-up templates read: the recipe's own values and the generic ones."""
    finding, entry = fix.finding, fix.registry.entry
    return {
        **fix.writeup.context,
        "cls": finding.class_name,
        "variant": fix.variant,
        "archs": list(finding.architectures),
        "issue_number": issue_number,
        "recipe": fix.recipe,
        "fingerprint": fingerprint,
        "edits": [edit.to_json() for edit in edits],
        "entry": entry.to_json() if entry else None,
        "entry_why": fix.registry.why_none,
        "gpu_tests": list(fix.tests.gpu),
        "cpu_tests": list(fix.tests.cpu),
    }


def proposal_for(
    repo: Path,
    result: ScanResult,
    *,
    triage: Triage | None,
    issue: dict[str, Any] | None,
    class_name: str | None,
    upstream: str,
    catalogue: DraftCatalogue,
) -> PlanContents:
    base_commit = head_commit(repo)
    version = tree_version(repo)
    issue_number = _issue_number(issue)
    common: dict[str, Any] = {
        "repo_path": str(repo),
        "base_commit": base_commit,
        "vllm_version": version,
        "upstream": upstream,
        "issue_number": issue_number,
        "issue_title": _issue_title(issue),
        "triage": triage,
    }
    if triage is not None and triage.outcome == SILENT:
        # Not ours (or closed): a record of the triage, nothing that would be posted.
        return _nothing(common, triage.architecture, _silent_reason(triage))
    if triage is not None and (triage.outcome == ASK or not triage.confident):
        reason = (
            f"triage confidence {triage.confidence:.2f} is below the threshold; "
            "the bot does not guess"
        )
        questions = list(triage.missing) or [
            "Which model architecture (config.json `architectures`) were you serving?"
        ]
        return PlanContents(
            plans.Plan(status=plans.NEEDS_INFO, reason=reason, questions=questions, **common),
            "",
            "",
        )

    arch = triage.architecture if triage else None
    wanted = arch or class_name
    if not wanted:
        raise BotError("nothing to propose for: give --class NAME or an issue")
    matches = [f for f in result.findings if wanted in f.architectures or f.class_name == wanted]
    fixable = sorted(
        (f for f in matches if fixer_named(f.recipe) is not None),
        key=lambda f: [r.name for r in RECIPES].index(f.recipe),
    )
    if not fixable:
        reason = _why_nothing(result, matches, wanted)
        if matches:  # reported, but no recipe patches it: a person has to look
            plan = plans.Plan(
                status=plans.NEEDS_HUMAN, reason=reason, class_name=matches[0].class_name, **common
            )
            return PlanContents(plan, "", "")
        return _nothing(common, class_name or arch, reason)
    finding = fixable[0]
    group = tuple(
        f for f in fixable if f.recipe == finding.recipe and f.class_name == finding.class_name
    )
    recipe = fixer_named(finding.recipe)
    assert recipe is not None
    ctx = PlanContext(
        scan=result.context,
        group=group,
        findings=tuple(result.findings),
        arch=arch or next(iter(finding.architectures), ""),
        catalogue=catalogue,
        preferred_draft=triage.draft if triage else None,
        upstream=upstream,
        version=version,
        base_commit=base_commit,
    )
    fix = recipe.plan(finding, ctx)
    if isinstance(fix, Declined):
        # A real gap the recipe refuses to patch: a person has to look, it is not "nothing".
        plan = plans.Plan(
            status=plans.NEEDS_HUMAN, reason=fix.reason, class_name=finding.class_name, **common
        )
        return PlanContents(plan, "", "")
    applied = apply_fix(repo, base_commit, fix, result.findings)
    return ready_plan(repo, common, fix, applied)


def _silent_reason(triage: Triage) -> str:
    fixed = [r for r in triage.reasons if r.startswith("not ours: already fixed")]
    if fixed:
        return fixed[0].removeprefix("not ours: ")
    why = [r for r in triage.reasons if r.startswith(("not ours", "the issue is closed"))]
    return f"triage: the issue is not the bot's to act on ({why[-1] if why else 'no reason'})"


def _nothing(common: dict[str, Any], class_name: str | None, reason: str) -> PlanContents:
    plan = plans.Plan(status=plans.NOTHING_TO_FIX, reason=reason, class_name=class_name, **common)
    return PlanContents(plan, "", "")


def ready_plan(
    repo: Path, common: dict[str, Any], fix: FixPlan, applied: AppliedFix
) -> PlanContents:
    finding, entry = fix.finding, fix.registry.entry
    fingerprint = identity.fingerprint(
        fix.recipe, finding.class_name, fix.variant, common["base_commit"]
    )
    edits = [edit.declared() for edit in applied.edits]
    context = writeup_context(fix, fingerprint, edits, common["issue_number"])
    plan = plans.Plan(
        status=plans.READY,
        reason=plan_reason(fix),
        recipe=fix.recipe,
        class_name=finding.class_name,
        variant=fix.variant,
        finding=finding,
        edits=edits,
        registry_entry=entry,
        tests=fix.tests,
        branch=branch_name(fix.recipe, finding.class_name, fix.variant),
        fingerprint=fingerprint,
        title=fix.commit_title,
        issue_comment=fix.issue_comment,
        resolves=[f.ref for f in fix.resolves],
        **common,
    )
    pr_markdown = render_markdown(
        repo, plan, applied.patch, fix.commit_title, context, fix.writeup.sections
    )
    plan.title = plans.split_pr_markdown(pr_markdown)[0]
    return PlanContents(plan, applied.patch, pr_markdown)


def render_markdown(
    repo: Path,
    plan: plans.Plan,
    patch: str,
    title: str,
    context: dict[str, Any],
    sections: dict[str, str],
) -> str:
    """pr.md in the tree's own PR template, its generic blocks rendered from the records there
    are yet (``bot verify`` and ``bot publish`` render them again from theirs)."""
    facts = preview_facts(plan, patch, repo)
    return render_pr(title, context, sections, facts.rules.template_style, render_blocks(facts))


def plan_reason(fix: FixPlan) -> str:
    """The commit body's paragraph: the finding's summary, and why there is no registry entry."""
    summary = fix.finding.summary
    return summary if fix.registry.entry else f"{summary}; {fix.registry.why_none}"


def _issue_number(issue: dict[str, Any] | None) -> int | None:
    number = issue.get("number") if issue else None
    return number if isinstance(number, int) and number > 0 else None


def _issue_title(issue: dict[str, Any] | None) -> str | None:
    title = issue.get("title") if issue else None
    return title[:300] if isinstance(title, str) else None


def _why_nothing(result: ScanResult, matches: list[Finding], wanted: str) -> str:
    if matches:
        f = matches[0]
        return (
            f"{f.class_name} is reported under {f.recipe}, which the bot does not patch yet: "
            f"{f.summary}"
        )
    for recipe in RECIPES:
        reason = recipe.explain(wanted, result.context)
        if reason:
            return str(reason)
    return f"{wanted} is not a model architecture this tree registers"
