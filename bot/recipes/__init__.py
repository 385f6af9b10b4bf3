"""The fix classes the bot knows. A new recipe is one module here plus one line below."""

from bot.recipes import eagle3_interface, eagle3_wrapper
from bot.recipes.base import Finding, Recipe, ScanContext

RECIPES: tuple[Recipe, ...] = (
    eagle3_interface.RECIPE,
    eagle3_wrapper.RECIPE,
)


def recipe_named(name: str) -> Recipe | None:
    return next((r for r in RECIPES if r.name == name), None)


__all__ = ["RECIPES", "Finding", "Recipe", "ScanContext", "recipe_named"]
