"""From a finding (and optionally a triaged issue) to a plan directory.

The edits happen in a scratch worktree at the tree's HEAD; the patch is what ``git diff`` says
there. Before a plan is written the patched tree is scanned again: the finding must be gone and
no new one may appear ("do no harm").
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bot import plan as plans
from bot.codemods.bases import append_base_class
from bot.codemods.imports import add_import_name
from bot.codemods.registry_entry import insert_registry_entry
from bot.codemods.regression_test import add_eagle3_regression_test
from bot.codemods.safety import (
    changed_lines_confined,
    check_round_trip,
    check_ruff_clean,
    class_header_span,
    format_touched,
    import_region_span,
    top_level_span,
)
from bot.drafts import DraftCatalogue, load_catalogue
from bot.errors import BotError
from bot.pipeline import ScanResult, scan
from bot.recipes import Finding
from bot.recipes.eagle3_interface import NAME as INTERFACE_RECIPE
from bot.registry_plan import DICT_NAME, REGISTRY_FILE, RegistryEntryPlan, plan_registry_entry
from bot.tree.index import MODEL_PACKAGES, ClassRef
from bot.tree.signatures import error_signatures
from bot.tree.version import tree_version
from bot.tree.worktree import diff_worktree, head_commit, scratch_worktree
from bot.triage import Triage
from bot.writeup import blob_url, pr_template_style, render_pr

INTERFACE = "SupportsEagle3"
ABSOLUTE_INTERFACES = "vllm.model_executor.models.interfaces"
# What proposing reads and edits: the model packages (scanned again after the edit), the
# package marker, and the tests it extends. Files at the top (ruff's settings) come along.
SCRATCH_PATHS = ("vllm/__init__.py", *MODEL_PACKAGES, "tests/models")
# Platform sub-packages of vllm/models/<name>/, one of which is chosen at import time.
PLATFORMS = frozenset({"nvidia", "amd", "xpu", "cpu", "tpu"})


def branch_name(recipe: str, class_name: str, variant: str | None) -> str:
    slug = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", class_name).lower()
    slug = re.sub(r"[^a-z0-9-]+", "-", slug).strip("-")
    return f"bot/{recipe}/{slug}" + (f"-{variant}" if variant else "")


def platform_variant(finding: Finding) -> str | None:
    """``amd`` for vllm/models/<pkg>/amd/..., the platform packages chosen at import time."""
    parts = Path(finding.path).parts
    if len(parts) > 4 and parts[:2] == ("vllm", "models") and parts[3] in PLATFORMS:
        return parts[3]
    return None


def propose_fix(
    repo: Path,
    base_commit: str,
    findings: list[Finding],
    arch: str,
    *,
    catalogue: DraftCatalogue | None = None,
    preferred_draft: str | None = None,
) -> tuple[str, list[dict[str, Any]], RegistryEntryPlan | None, str, list[str]]:
    """Apply the recipe's edits for ``findings`` (one class, maybe several platform variants).

    Returns the patch, the edits made, the registry entry, why (not) an entry, and the CPU tests.
    """
    catalogue = catalogue or load_catalogue()
    edits: list[dict[str, Any]] = []
    with scratch_worktree(repo, base_commit, SCRATCH_PATHS) as tree:
        for finding in findings:
            edits.append(_declare_interface(tree, finding))
        entry, entry_why = plan_registry_entry(tree, arch, catalogue, preferred_draft)
        if entry is not None:
            edit = _add_registry_entry(tree, entry)
            if edit:
                edits.append(edit)
        test_edit, cpu_tests = _add_regression_test(tree, findings[0], arch)
        if test_edit:
            edits.append(test_edit)
        patch = diff_worktree(tree, [edit["path"] for edit in edits])
        _check_fixed(tree, findings)
    return patch, edits, entry, entry_why, cpu_tests


def _declare_interface(tree: Path, finding: Finding) -> dict[str, Any]:
    path = tree / finding.path
    before = path.read_text(encoding="utf-8")
    check_round_trip(before, finding.path)
    module = _interfaces_module(before, finding.path)
    after = add_import_name(before, module, INTERFACE)
    after = append_base_class(after, finding.class_name, INTERFACE)
    allowed = [import_region_span(before), class_header_span(before, finding.class_name)]
    changed_lines_confined(before, after, allowed)
    _write_formatted(tree, finding.path, before, after)
    return {
        "path": finding.path,
        "kind": "declare-interface",
        "description": f"import {INTERFACE} and add it as the last base of {finding.class_name}",
    }


def _add_registry_entry(tree: Path, entry: RegistryEntryPlan) -> dict[str, Any] | None:
    path = tree / REGISTRY_FILE
    before = path.read_text(encoding="utf-8")
    check_round_trip(before, REGISTRY_FILE)
    after = insert_registry_entry(
        before,
        dict_name=DICT_NAME,
        key=entry.key,
        args=entry.args,
        kwargs=entry.kwargs,
        section=entry.section,
    )
    if after == before:
        return None
    changed_lines_confined(before, after, [top_level_span(before, DICT_NAME)])
    _write_formatted(tree, REGISTRY_FILE, before, after)
    return {
        "path": REGISTRY_FILE,
        "kind": "registry-entry",
        "description": f"add {entry.key} to {DICT_NAME} (# [{entry.section}])",
    }


def _add_regression_test(
    tree: Path, finding: Finding, arch: str
) -> tuple[dict[str, Any] | None, list[str]]:
    edit = add_eagle3_regression_test(
        tree,
        class_name=finding.class_name,
        class_module=finding.module,
        archs=[arch],
        platform_variant=platform_variant(finding) is not None,
    )
    if edit.after == edit.before:
        return None, edit.node_ids
    check_round_trip(edit.before, edit.path)
    _write_formatted(tree, edit.path, edit.before, edit.after)
    description = f"assert supports_eagle3({finding.class_name}) on the CPU"
    return {"path": edit.path, "kind": "regression-test", "description": description}, edit.node_ids


def _write_formatted(tree: Path, relpath: str, before: str, after: str) -> None:
    """Format only the lines we touched with the tree's own ruff settings, check, write."""
    after = format_touched(before, after, tree, relpath)
    check_ruff_clean(before, after, tree, relpath)
    (tree / relpath).write_text(after, encoding="utf-8")


def _interfaces_module(source: str, path: str) -> str:
    """How this file imports from interfaces: an existing import wins, else the file's style."""
    if "from .interfaces import" in source:
        return ".interfaces"
    if f"from {ABSOLUTE_INTERFACES} import" in source:
        return ABSOLUTE_INTERFACES
    in_models_package = path.startswith("vllm/model_executor/models/")
    return ".interfaces" if in_models_package and "\nfrom ." in source else ABSOLUTE_INTERFACES


def _check_fixed(tree: Path, findings: list[Finding]) -> None:
    after = scan(tree).findings
    fixed = {(f.class_name, f.path) for f in findings}
    still = [f for f in after if (f.class_name, f.path) in fixed and f.recipe == INTERFACE_RECIPE]
    if still:
        raise BotError(f"refused: {still[0].class_name} is still reported after the edit")


# -- the plan -------------------------------------------------------------------------------


def proposal_for(
    repo: Path,
    result: ScanResult,
    *,
    triage: Triage | None,
    issue: dict[str, Any] | None,
    class_name: str | None,
    upstream: str,
    catalogue: DraftCatalogue,
) -> tuple[plans.Plan, str, str]:
    base_commit = head_commit(repo)
    version = tree_version(repo)
    issue_number = _issue_number(issue)
    plan = plans.Plan(
        status=plans.NOTHING_TO_FIX,
        reason="",
        repo_path=str(repo),
        base_commit=base_commit,
        vllm_version=version,
        upstream=upstream,
        issue_number=issue_number,
        issue_title=_issue_title(issue),
        triage=triage.to_dict() if triage else None,
    )
    if triage is not None and not triage.confident:
        plan.status = plans.NEEDS_INFO
        plan.reason = (
            f"triage confidence {triage.confidence:.2f} is below the threshold; "
            "the bot does not guess"
        )
        plan.questions = list(triage.missing) or [
            "Which model architecture (config.json `architectures`) were you serving?"
        ]
        return plan, "", ""

    arch = triage.architecture if triage else None
    wanted = arch or class_name
    if not wanted:
        raise BotError("nothing to propose for: give --class NAME or an issue")
    interface = [f for f in result.findings if f.recipe == INTERFACE_RECIPE]
    findings = [f for f in interface if wanted in f.architectures or f.class_name == wanted]
    if not findings:
        plan.class_name = class_name or arch
        plan.reason = _why_nothing(result, wanted)
        return plan, "", ""
    findings = [f for f in findings if f.class_name == findings[0].class_name]
    arch = arch or findings[0].architectures[0]
    variant = platform_variant(findings[0]) if len(findings) == 1 else None
    patch, edits, entry, entry_why, cpu_tests = propose_fix(
        repo,
        base_commit,
        findings,
        arch,
        catalogue=catalogue,
        preferred_draft=triage.draft if triage else None,
    )
    finding = findings[0]
    plan.status = plans.READY
    plan.recipe = finding.recipe
    plan.class_name = finding.class_name
    plan.finding = finding.to_json()
    plan.edits = edits
    plan.registry_entry = entry.to_json() if entry else None
    plan.tests = {"gpu": [entry.gpu_test] if entry else [], "cpu": cpu_tests}
    plan.branch = branch_name(finding.recipe, finding.class_name, variant)
    plan.fingerprint = (
        f"{finding.recipe}:{finding.class_name}"
        + (f"@{variant}" if variant else "")
        + f":{base_commit[:12]}"
    )
    plan.reason = finding.summary if entry else f"{finding.summary}; {entry_why}"
    context = _writeup_context(repo, plan, findings, entry, entry_why, variant, upstream, version)
    pr_markdown = render_pr(context, pr_template_style(repo))
    plan.title = plans.split_pr_markdown(pr_markdown)[0]
    return plan, patch, pr_markdown


def _issue_number(issue: dict[str, Any] | None) -> int | None:
    number = issue.get("number") if issue else None
    return number if isinstance(number, int) and number > 0 else None


def _issue_title(issue: dict[str, Any] | None) -> str | None:
    title = issue.get("title") if issue else None
    return title[:300] if isinstance(title, str) else None


def _why_nothing(result: ScanResult, wanted: str) -> str:
    ctx_findings = [
        f for f in result.findings if wanted in f.architectures or f.class_name == wanted
    ]
    if ctx_findings:
        f = ctx_findings[0]
        return (
            f"{f.class_name} is reported under {f.recipe}, which the bot does not patch yet: "
            f"{f.summary}"
        )
    from bot.recipes.eagle3_analysis import declares_eagle3, locate

    ctx = result.context
    for entry in ctx.registry.entries:
        if wanted not in (entry.arch, entry.class_name):
            continue
        for ref in ctx.index.resolve(entry.module, entry.class_name):
            if isinstance(ref, ClassRef) and declares_eagle3(ctx.index, ref):
                where = locate(ctx.index, ref)
                return (
                    f"already fixed: {ref.name} declares SupportsEagle3 ({where.path}:{where.line})"
                )
        return (
            f"{entry.arch} is not an interface gap: its decoder lacks EagleModelMixin or does not "
            "collect aux hidden states, so declaring SupportsEagle3 alone would not work"
        )
    return f"{wanted} is not a model architecture this tree registers"


def _writeup_context(
    repo: Path,
    plan: plans.Plan,
    findings: list[Finding],
    entry: RegistryEntryPlan | None,
    entry_why: str,
    variant: str | None,
    upstream: str,
    version: str | None,
) -> dict[str, Any]:
    ref = f"v{version}" if version else plan.base_commit

    def url(path: str, line: int | None = None) -> str:
        return blob_url(upstream, ref, path, line)

    ev = findings[0].evidence
    decoder = ev["decoder"]
    crash_sites = [
        {"message": s.message_prefix, "path": s.path, "line": s.line, "url": url(s.path, s.line)}
        for s in error_signatures(repo)
    ]
    sibling = ev.get("sibling")
    return {
        "cls": plan.class_name,
        "variant": variant,
        "archs": list(findings[0].architectures),
        "files": sorted({f.path for f in findings}),
        "issue_number": plan.issue_number,
        "recipe": plan.recipe,
        "fingerprint": plan.fingerprint,
        "where": {**ev["class"], "url": url(ev["class"]["path"], ev["class"]["line"])},
        "decoder": {
            **decoder,
            "url": url(decoder["path"], decoder["line"]),
            "assigned_path": decoder["assigned_at"]["path"],
            "assigned_line": decoder["assigned_at"]["line"],
            "assigned_url": url(decoder["assigned_at"]["path"], decoder["assigned_at"]["line"]),
        },
        "mixin": {**ev["mixin"], "url": url(ev["mixin"]["path"], ev["mixin"]["line"])},
        "aux": {**ev["aux"], "url": url(ev["aux"]["path"], ev["aux"]["forward_line"])},
        "sibling": {**sibling, "url": url(sibling["path"], sibling["line"])} if sibling else None,
        "crash_sites": crash_sites,
        "edits": plan.edits,
        "entry": entry.to_json() if entry else None,
        "entry_why": entry_why,
        "gpu_tests": plan.tests["gpu"],
        "cpu_tests": plan.tests["cpu"],
    }
