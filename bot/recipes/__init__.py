"""The fix classes the bot knows. A new recipe is one package here (``<fix class>/recipe.py``,
beside its cases and publish rules) plus one line below."""

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
from bot.recipes.core_drafter_loader import recipe as core_drafter_loader
from bot.recipes.core_eagle3_forwarding import recipe as core_eagle3_forwarding
from bot.recipes.eagle3_broken_claim import recipe as eagle3_broken_claim
from bot.recipes.eagle3_enable import recipe as eagle3_enable
from bot.recipes.eagle3_interface import recipe as eagle3_interface
from bot.recipes.eagle3_wrapper import recipe as eagle3_wrapper

RECIPES: tuple[Recipe, ...] = (
    eagle3_interface.RECIPE,
    eagle3_wrapper.RECIPE,
    eagle3_enable.RECIPE,
    eagle3_broken_claim.RECIPE,
    core_drafter_loader.RECIPE,
    core_eagle3_forwarding.RECIPE,
)


def recipe_named(name: str) -> Recipe | None:
    return next((r for r in RECIPES if r.name == name), None)


def fixer_named(name: str) -> FixingRecipe | None:
    """The recipe called ``name`` if it plans fixes (one with only ``detect`` is reported only)."""
    recipe = recipe_named(name)
    return recipe if recipe is not None and fixes(recipe) else None


__all__ = [
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
