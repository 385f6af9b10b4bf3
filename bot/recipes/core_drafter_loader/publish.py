"""What ``bot publish`` re-checks for the edit kinds of the ``core-drafter-loader`` recipe.

Nothing is taken from the plan: the loader lines, and the names the loaders give the language
model and its decoder, come from a scan of the base commit (:mod:`bot.tree.drafter_loader`);
the recipe's own codemods re-applied to the base text must give the patched file, by AST (so
ruff's formatting does not matter and anything else does). A file the base tree's loaders do
not touch is refused, and so is a helper file other than ``models/utils.py``.
"""

from __future__ import annotations

from bot.codemods.base import CodemodRefused
from bot.recipes.base import FileEdit, PublishedEdit, PublishRule
from bot.recipes.core_drafter_loader.codemods import HELPER_PATH, add_input_embedding_helper
from bot.recipes.core_drafter_loader.recipe import HELPER_EDIT, LOADER_EDIT, loader_edits
from bot.recipes.publish_rules import require_recipe_edit
from bot.tree.drafter_loader import loader_sites


def drafter_loader(edit: PublishedEdit) -> None:
    if edit.base is None:
        raise CodemodRefused("publish has no base tree to read the loaders from")
    planned: list[FileEdit] = [
        e for e in loader_edits(loader_sites(edit.base.scan().root)) if e.path == edit.path
    ]
    if not planned:
        raise CodemodRefused(f"{edit.path} holds no loader line the base tree's loaders refuse")
    require_recipe_edit(edit.after, planned[0].apply(edit.before))


def input_embedding_helper(edit: PublishedEdit) -> None:
    if edit.path != HELPER_PATH:
        raise CodemodRefused(f"the helper goes in {HELPER_PATH}, not {edit.path}")
    require_recipe_edit(edit.after, add_input_embedding_helper(edit.before))


PUBLISH_RULES: dict[str, PublishRule] = {
    LOADER_EDIT: drafter_loader,
    HELPER_EDIT: input_embedding_helper,
}
