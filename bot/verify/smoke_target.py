"""Which class the smoke check builds for a plan, read from the plan's declaring edit.

Its own module so that ``bot publish`` (which names the smoke target a GPU run must have used)
reads it without the module that runs the harness.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.plan import Plan

# The recipes whose fix makes a class an EAGLE-3 target the harness can exercise.
_RECIPES = frozenset({"eagle3-interface", "eagle3-enable"})


@dataclass(frozen=True)
class SmokeTarget:
    module: str  # e.g. vllm.model_executor.models.glm4
    class_name: str

    def __str__(self) -> str:
        return f"{self.module}:{self.class_name}"


# The edit kinds that declare the interface on the plan's class, in the file that defines it
# (``bot publish`` checks exactly that on the base text before it counts a GPU run).
_DECLARING_KINDS = frozenset({"declare-interface", "enable-decoder-and-declare"})


def target_of(plan: Plan) -> SmokeTarget | str:
    """The class the smoke check builds, or why there is none: the plan's class in the file its
    recipe's declaring edit changes. Never the finding's path, which nothing checks (a plan
    naming another, already working module there would have the check pass on that one)."""
    if plan.recipe is None and plan.members:
        return f"the smoke check builds one class, and this plan is a group of {len(plan.members)}"
    if plan.recipe not in _RECIPES:
        return f"the {plan.recipe} recipe has no smoke check"
    class_name = plan.class_name
    if not (isinstance(class_name, str) and class_name.isidentifier()):
        return "the plan names no class"
    paths = {
        edit.get("path")
        for edit in plan.edits
        if isinstance(edit, dict) and edit.get("kind") in _DECLARING_KINDS
    }
    where = paths.pop() if len(paths) == 1 else None
    if not (isinstance(where, str) and where.startswith("vllm/") and where.endswith(".py")):
        return "the plan's edits do not declare the interface in one model file"
    module = where.removesuffix(".py").replace("/", ".")
    if not all(part.isidentifier() for part in module.split(".")):
        return f"{where} is not an importable module path"
    return SmokeTarget(module, class_name)
