"""The fix classes the bot knows. A new recipe is one package here (``<fix class>/recipe.py``,
beside its cases, publish rules, codemods and templates) plus its one line in ``PACKAGES``
(tests/test_recipe_seams.py compares the list with the packages on disk)."""

import importlib

from bot.recipes.base import (
    Declined,
    Finding,
    FixingRecipe,
    FixPlan,
    PlanContext,
    Recipe,
    ScanContext,
    fixes,
)

# The fix classes' packages under bot/recipes/, one line each, in the order `bot scan` runs
# them; each package's ``recipe`` module defines its ``RECIPE``.
PACKAGES: tuple[str, ...] = (
    "eagle3_interface",
    "eagle3_wrapper",
    "eagle3_enable",
    "eagle3_broken_claim",
    "core_drafter_loader",
    "core_eagle3_forwarding",
)
RECIPES: tuple[Recipe, ...] = tuple(
    importlib.import_module(f"{__name__}.{package}.recipe").RECIPE for package in PACKAGES
)


def recipe_named(name: str) -> Recipe | None:
    return next((r for r in RECIPES if r.name == name), None)


def fixer_named(name: str) -> FixingRecipe | None:
    """The recipe called ``name`` if it plans fixes (one with only ``detect`` is reported only)."""
    recipe = recipe_named(name)
    return recipe if recipe is not None and fixes(recipe) else None


__all__ = [
    "PACKAGES",
    "RECIPES",
    "Declined",
    "Finding",
    "FixPlan",
    "FixingRecipe",
    "PlanContext",
    "Recipe",
    "ScanContext",
    "fixer_named",
    "fixes",
    "recipe_named",
]
