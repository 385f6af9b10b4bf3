"""The local checks on a patched scratch tree: each returns one :class:`Check`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from bot.plan import Plan
from bot.recipes.base import Finding, FindingRef
from bot.scan import rescan
from bot.scan.rescan import FindingKey
from bot.subprocess_env import minimal_env
from bot.verification import Check
from bot.verify.junit import TestRun


def resolved_by(plan: Plan) -> list[FindingKey]:
    """Every finding the plan resolves: each member's own and those its plan recorded (a plan
    written before plans recorded them: for a set of targets sharing a decoder, the set's)."""
    keys: list[FindingKey] = []
    for owner in plan.members if plan.is_group else [plan]:
        recorded = [r.key for r in owner.resolves]
        own = [owner.finding.key] if owner.finding else []
        keys += own + (recorded or [r.key for r in fixed_together(owner.finding)])
    return list(dict.fromkeys(keys))


def rescan_check(
    resolves: list[FindingKey], before: Iterable[FindingKey], after: Sequence[Finding]
) -> Check:
    """Everything the plan resolves is gone after the patch, and no finding appeared that
    wasn't there (:func:`bot.scan.rescan.compare`, the comparison propose refuses on)."""
    found = rescan.compare(before, after, resolves)
    problems = [
        f"{cls} ({recipe}) is not found on the unpatched tree" for recipe, cls, _ in found.unknown
    ]
    problems += [
        f"{cls} ({recipe}) is still found after the patch" for recipe, cls, _ in found.still
    ]
    if found.new:
        new = sorted(f.key for f in found.new)
        listed = ", ".join(f"{cls} in {path} ({recipe})" for recipe, cls, path in new[:5])
        problems.append(f"new findings after the patch: {listed}")
    if problems:
        return Check("rescan", False, "; ".join(problems))
    names = list(dict.fromkeys(cls for _, cls, _ in resolves))
    fixed = f"{', '.join(names)} no longer found; " if 0 < len(names) <= 3 else ""
    fixed = fixed or (f"{len(names)} classes no longer found; " if names else "")
    return Check("rescan", True, f"{fixed}{found.left} findings left, none new")


def fixed_together(finding: Finding | None) -> list[FindingRef]:
    """The findings a plan for a set of targets sharing a decoder must make disappear (every
    member's, the plan's own among them); empty for any other plan."""
    shared = finding.evidence.fixed_with() if finding else None
    if finding is None or shared is None:
        return []
    return [FindingRef(finding.recipe, n, p) for n, p in shared.members()]


def compile_check(tree: Path, files: list[str]) -> Check:
    python_files = [f for f in files if f.endswith(".py") and (tree / f).is_file()]
    for rel in python_files:
        try:
            compile((tree / rel).read_bytes(), rel, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            return Check("py_compile", False, f"{rel}: {exc.__class__.__name__}: {exc}")
    return Check("py_compile", True, f"{len(python_files)} file(s) compile")


def ruff_violations(tree: Path, files: list[str]) -> Counter[tuple[str, str]] | str:
    """(file, rule) counts under the tree's own ruff configuration, or an error message."""
    python_files = [f for f in files if f.endswith(".py") and (tree / f).is_file()]
    if not python_files:
        return Counter()
    command = [
        sys.executable,
        "-m",
        "ruff",
        "check",
        "--no-cache",
        "--exit-zero",
        "--output-format=json",
        "--",
        *python_files,
    ]
    result = subprocess.run(
        command, cwd=tree, env=minimal_env(), capture_output=True, text=True, check=False
    )
    try:
        items = json.loads(result.stdout or "null")
    except json.JSONDecodeError:
        items = None
    if result.returncode != 0 or not isinstance(items, list):
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return f"ruff could not check the files: {tail[:200]}"
    counts: Counter[tuple[str, str]] = Counter()
    for item in items:
        rel = os.path.relpath(item.get("filename", ""), tree)
        counts[(rel, str(item.get("code") or "syntax"))] += 1
    return counts


def ruff_check(
    before: Counter[tuple[str, str]] | str, after: Counter[tuple[str, str]] | str
) -> Check:
    """Ruff on the touched files: the patch adds no violation the file did not have."""
    if isinstance(after, str):
        return Check("ruff", False, after)
    if isinstance(before, str):
        before = Counter()
    added = after - before
    if added:
        listed = ", ".join(f"{rule} in {path}" for (path, rule) in sorted(added)[:5])
        return Check("ruff", False, f"new ruff violations: {listed}")
    return Check("ruff", True, "no new violations on the touched files")


def cpu_test_check(
    before: TestRun | None, after: TestRun | None, why_not: str = "", *, blocked: str = ""
) -> Check:
    """The plan's CPU tests fail on the unpatched tree and pass on the patched one.

    ``before`` ran with only the patch's tests applied, ``after`` with the whole patch. A test
    that already passes before the patch does not test the fix: that fails the check. ``blocked``
    says why the changed code cannot run in this environment at all (a module that does not
    import): a failure after the patch then proves nothing either way, so it is not checked.
    """
    if before is None or after is None:
        return Check("cpu-tests", None, f"not checked: {why_not}")
    log = f"before the patch:\n{before.log_excerpt}\n\nafter the patch:\n{after.log_excerpt}"
    said = f"before the patch: {before.conclusion}; after the patch: {after.conclusion}"
    # Each case before and after: a group's claims say which members the runs back.
    record: dict[str, object] = {"cases": {"before": before.cases, "after": after.cases}}
    if after.conclusion == "skipped":
        detail = f"not checked: {said} ({after.log_excerpt})"
        return Check("cpu-tests", None, detail, log, record)
    if before.conclusion == "success":
        detail = f"{said}: the test passes without the fix, so it does not test it"
        return Check("cpu-tests", False, detail, log, record)
    if before.passed > 0:  # in a group, one member's case failing must not vouch for the rest
        detail = (
            f"{said}: {before.passed} of {before.tests} tests pass without the fix, "
            "so they do not test it"
        )
        return Check("cpu-tests", False, detail, log, record)
    failed_before = f"{before.failures + before.errors} of {before.tests} failed before"
    if after.conclusion != "success" and blocked:
        counts = f"{after.passed} of {after.tests} passed after; {failed_before}"
        record["blocked"] = blocked
        detail = f"not checked: {said} ({counts}): {blocked}"
        return Check("cpu-tests", None, detail, log, record)
    if after.conclusion != "success":
        return Check("cpu-tests", False, f"{said}: the patch does not make it pass", log, record)
    detail = f"{said} ({after.log_excerpt}; {failed_before})"
    return Check("cpu-tests", True, detail, log, record)
