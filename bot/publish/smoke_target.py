"""Which class the smoke check builds for a plan, read from the plan's declaring edit.

Its own module so that ``bot publish`` (which names the smoke target a GPU run must have used)
reads it without the module that runs the harness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.plan import Plan

if TYPE_CHECKING:
    from bot.recipes.base import SmokeBuild


@dataclass(frozen=True)
class SmokeTarget:
    module: str  # e.g. vllm.model_executor.models.glm4
    class_name: str

    def __str__(self) -> str:
        return f"{self.module}:{self.class_name}"


def module_of(path: str) -> str | None:
    """The module a file under ``vllm/`` is imported as (its package for an ``__init__.py``),
    or None for any other path or one that is no importable module name."""
    if not (path.startswith("vllm/") and path.endswith(".py")):
        return None
    module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    return module if all(part.isidentifier() for part in module.split(".")) else None


def _smoke_build(plan: Plan) -> SmokeBuild | None:
    """How the plan's recipe has its target smoke-built (the edit kinds that declare the
    interface on the plan's class, which ``bot publish`` checks on the base text before it
    counts a GPU run), or None."""
    from bot.recipes import recipe_named  # the recipes import the tree scanner: only when used

    recipe = recipe_named(plan.recipe) if isinstance(plan.recipe, str) else None
    return recipe.smoke if recipe is not None else None


def target_of(plan: Plan) -> SmokeTarget | str:
    """The class the smoke check builds, or why there is none: the plan's class in the file its
    recipe's declaring edit changes. Never the finding's path, which nothing checks (a plan
    naming another, already working module there would have the check pass on that one)."""
    if plan.recipe is None and plan.members:
        return f"the smoke check builds one class, and this plan is a group of {len(plan.members)}"
    build = _smoke_build(plan)
    if build is None:
        return f"the {plan.recipe} recipe has no smoke check"
    class_name = plan.class_name
    if not (isinstance(class_name, str) and class_name.isidentifier()):
        return "the plan names no class"
    kinds = {edit.kind for edit in plan.edits}
    shared = build.set_declaring
    declaring = {shared} if shared is not None and shared in kinds else build.declaring
    paths = {edit.path for edit in plan.edits if edit.kind in declaring}
    where = paths.pop() if len(paths) == 1 else None
    if not (isinstance(where, str) and where.startswith("vllm/") and where.endswith(".py")):
        return "the plan's edits do not declare the interface in one model file"
    module = where.removesuffix(".py").replace("/", ".")
    if not all(part.isidentifier() for part in module.split(".")):
        return f"{where} is not an importable module path"
    return SmokeTarget(module, class_name)


def set_targets_of(plan: Plan) -> list[SmokeTarget]:
    """The other targets a plan for a set sharing a decoder declares the interface on (each is
    smoke-checked like the plan's class): the set's members from the plan's finding, kept only
    where one of the plan's set edits changes that member's file."""
    primary = target_of(plan)
    build = _smoke_build(plan)
    if not isinstance(primary, SmokeTarget) or build is None:
        return []
    edited = {edit.path for edit in plan.edits if edit.kind in build.set_kinds}
    shared = plan.finding.evidence.fixed_with() if plan.finding else None
    targets = []
    for name, path in shared.members() if shared else ():
        if name == primary.class_name or path not in edited or not name.isidentifier():
            continue
        module = path.removesuffix(".py").replace("/", ".")
        if path.endswith(".py") and all(part.isidentifier() for part in module.split(".")):
            targets.append(SmokeTarget(module, name))
    return targets
