"""Before any upstream code runs: the patch must be exactly what the plan's recipe makes.

``bot verify`` imports vLLM from the patched tree and runs its tests. The tree's base commit is
upstream's own code; the patch comes from the plan directory, which may have been copied from
elsewhere (an Actions artifact, a colleague). So the patch gets the check publish makes
(:func:`bot.confinement.check_confined`: only the declared files, each as its recipe's rule
allows on the base text) before a test or the smoke harness starts; a patch that fails it is
checked statically only (apply, rescan, compile, ruff) and nothing from it is executed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bot.base_tree import CheckedOutTree
from bot.confinement import FileChange, check_confined, check_member_confined
from bot.errors import BotError
from bot.gitrepo import Repo
from bot.plan import Member, PlanDir
from bot.recipes.base import DeclaredEdit
from bot.verify import scratch
from bot.verify.checks import Check

NAME = "confined"


def confinement_check(planned: PlanDir, tree: Path, patch_file: Path, files: list[str]) -> Check:
    """Apply the patch to the unpatched ``tree``, compare each touched file, take it back."""
    if planned.plan.is_group:
        return _group_confinement(planned, tree, patch_file, files)
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
    base = CheckedOutTree(tree)  # back at the base commit: what the recipe planned on
    changes = [
        FileChange(p, "A", "000000", "100644", b"", after[p], base)
        if p in created and not (tree / p).exists()
        else FileChange(p, "M", "100644", "100644", before[p], after[p], base)
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
    return _created_by(planned.plan.recipe, planned.plan.edits)


def _member_created(member: Member) -> set[str]:
    """A group member's paths whose edit kind creates a new file (see :func:`_created_files`)."""
    return _created_by(member.recipe, member.edits)


def _created_by(recipe_name: str | None, edits: Sequence[DeclaredEdit]) -> set[str]:
    from bot.recipes import fixes, recipe_named

    recipe = recipe_named(recipe_name) if recipe_name else None
    rules = recipe.publish_rules if recipe is not None and fixes(recipe) else {}
    return {edit.path for edit in edits if getattr(rules.get(edit.kind), "creates_file", False)}


def _created_modes(tree: Path, patch_file: Path) -> dict[str, str]:
    """The files ``patch_file`` creates, with their modes (``create mode 100644 path``)."""
    with Repo(tree) as repo:
        summary = repo.git.apply("--summary", str(patch_file))
    created = {}
    for line in summary.splitlines():
        words = line.strip().split(" ", 3)
        if len(words) == 4 and words[:2] == ["create", "mode"]:
            created[words[3]] = words[2]
    return created


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def _group_confinement(planned: PlanDir, tree: Path, patch_file: Path, files: list[str]) -> Check:
    """A group: each member's commit in turn, checked by its own recipe's rules on the text
    the commits before it left; together they must make exactly patch.diff's files."""
    members = planned.plan.members
    whole = {path: _read(tree / path) for path in files}
    failure = scratch.apply_patch(tree, patch_file)
    if failure:
        return Check(NAME, False, f"the patch does not apply: {failure}")
    patched = {path: _read(tree / path) for path in files}
    undone = scratch.apply_patch(tree, patch_file, reverse=True)
    if undone:
        raise BotError(f"could not take the patch back in the scratch tree: {undone}")
    applied: list[Path] = []
    problem = None
    base = CheckedOutTree(tree)
    if any(_member_created(member) for member in members):
        base.scan()  # at the base commit, as publish scans it, before any member is applied
    try:
        for index, member in enumerate(members):
            step = patch_file.with_name(f"member-{index}.diff")
            step.write_text(member.patch, encoding="utf-8")
            paths = scratch.touched_files(tree, step)
            before = {path: _read(tree / path) for path in paths}
            failure = scratch.apply_patch(tree, step)
            if failure:
                problem = f"{member.class_name}'s commit does not apply: {failure}"
                break
            applied.append(step)
            after = {path: _read(tree / path) for path in paths}
            created = _created_modes(tree, step)
            changes = [
                FileChange(p, "A", "000000", created[p], b"", after[p], base)
                if p in created and not before[p]
                else FileChange(p, "M", "100644", "100644", before[p], after[p], base)
                for p in paths
            ]
            try:
                check_member_confined(member, changes)
            except BotError as exc:
                reason = str(exc).removesuffix("; refusing to publish")
                problem = f"{member.class_name}: not what its recipe makes: {reason}"
                break
        else:
            final = {path: _read(tree / path) for path in files}
            if final != patched or set(files) != _all_touched(tree, applied):
                problem = "the members' commits do not add up to patch.diff"
    finally:
        for step in reversed(applied):
            undone = scratch.apply_patch(tree, step, reverse=True)
            if undone:
                raise BotError(f"could not take a member's commit back: {undone}")
    if {path: _read(tree / path) for path in files} != whole:
        raise BotError("the scratch tree is not back at the base after the confinement check")
    if problem:
        return Check(NAME, False, problem)
    return Check(NAME, True, f"{len(members)} commits, each as its member's recipe makes it")


def _all_touched(tree: Path, steps: list[Path]) -> set[str]:
    return {path for step in steps for path in scratch.touched_files(tree, step)}
