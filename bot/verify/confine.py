"""Before any upstream code runs: the patch must be exactly what the plan's recipe makes.

``bot verify`` imports vLLM from the patched tree and runs its tests. The tree's base commit is
upstream's own code; the patch comes from the plan directory, which may have been copied from
elsewhere (an Actions artifact, a colleague). So the patch gets the check publish makes
(:func:`bot.publish_checks.check_confined`: only the declared files, each as its recipe's rule
allows on the base text) before a test or the smoke harness starts; a patch that fails it is
checked statically only (apply, rescan, compile, ruff) and nothing from it is executed.
"""

from __future__ import annotations

from pathlib import Path

from bot.errors import BotError
from bot.gitrepo import Repo
from bot.plan import PlanDir
from bot.publish_checks import FileChange, check_confined
from bot.verify import scratch
from bot.verify.checks import Check

NAME = "confined"


def confinement_check(planned: PlanDir, tree: Path, patch_file: Path, files: list[str]) -> Check:
    """Apply the patch to the unpatched ``tree``, compare each touched file, take it back."""
    with Repo(tree) as repo:
        summary = repo.git.apply("--summary", str(patch_file)).strip()
    created = _created_files(planned)
    others = [
        line.strip()
        for line in summary.splitlines()
        if line.strip().removeprefix("create mode 100644 ") not in created
    ]
    if others:
        return Check(NAME, False, f"the patch does more than edit existing files ({others[0]})")
    before = {path: _read(tree / path) for path in files}
    failure = scratch.apply_patch(tree, patch_file)
    if failure:
        return Check(NAME, False, f"the patch does not apply: {failure}")
    try:
        after = {path: (tree / path).read_bytes() for path in files}
    finally:
        undone = scratch.apply_patch(tree, patch_file, reverse=True)
    if undone:
        raise BotError(f"could not take the patch back in the scratch tree: {undone}")
    changes = [
        FileChange(p, "A", "000000", "100644", b"", after[p])
        if p in created and not (tree / p).exists()
        else FileChange(p, "M", "100644", "100644", before[p], after[p])
        for p in files
    ]
    try:
        check_confined(planned, changes)
    except BotError as exc:
        reason = str(exc).removesuffix("; refusing to publish")
        return Check(NAME, False, f"not what the plan's recipe makes: {reason}")
    return Check(NAME, True, f"{len(files)} files, each as recipe {planned.plan.recipe} makes it")


def _created_files(planned: PlanDir) -> set[str]:
    """The paths the plan declares new files at: its edits whose kind's publish rule
    re-derives a whole new file (the rule itself still checks the content)."""
    from bot.recipes import recipe_named

    recipe = recipe_named(planned.plan.recipe)
    rules = getattr(recipe, "publish_rules", None) or {}
    return {
        str(edit.get("path"))
        for edit in planned.plan.edits
        if getattr(rules.get(edit.get("kind")), "creates_file", False)
    }


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""
