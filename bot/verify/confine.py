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
    if summary:
        first = summary.splitlines()[0].strip()
        return Check(NAME, False, f"the patch does more than edit existing files ({first})")
    before = {path: (tree / path).read_bytes() for path in files}
    failure = scratch.apply_patch(tree, patch_file)
    if failure:
        return Check(NAME, False, f"the patch does not apply: {failure}")
    try:
        after = {path: (tree / path).read_bytes() for path in files}
    finally:
        undone = scratch.apply_patch(tree, patch_file, reverse=True)
    if undone:
        raise BotError(f"could not take the patch back in the scratch tree: {undone}")
    changes = [FileChange(p, "M", "100644", "100644", before[p], after[p]) for p in files]
    try:
        check_confined(planned, changes)
    except BotError as exc:
        reason = str(exc).removesuffix("; refusing to publish")
        return Check(NAME, False, f"not what the plan's recipe makes: {reason}")
    return Check(NAME, True, f"{len(files)} files, each as recipe {planned.plan.recipe} makes it")
