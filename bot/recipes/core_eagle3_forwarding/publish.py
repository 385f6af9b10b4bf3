"""What ``bot publish`` re-checks for the edit kind of the ``core-eagle3-forwarding`` recipe.

Nothing is taken from the plan: the guard whose ``raise`` the defaults reuse is the one a scan
of the base commit finds (:func:`bot.recipes.wrapper_analysis.runtime_guard`), and the
recipe's codemod re-applied to the base text of the interfaces module must give the patched
file, by AST.
"""

from __future__ import annotations

from bot.codemods.base import CodemodRefused
from bot.recipes.base import Declined, PublishedEdit, PublishRule
from bot.recipes.core_eagle3_forwarding.recipe import EDIT, forwarding_edit
from bot.recipes.publish_rules import require_recipe_edit


def forwarding_defaults(edit: PublishedEdit) -> None:
    if edit.base is None:
        raise CodemodRefused("publish has no base tree to read the guard from")
    planned = forwarding_edit(edit.base.scan())
    if isinstance(planned, Declined):
        raise CodemodRefused(planned.reason)
    if planned.path != edit.path:
        raise CodemodRefused(f"the defaults are in {planned.path}, not {edit.path}")
    require_recipe_edit(edit.after, planned.apply(edit.before))


PUBLISH_RULES: dict[str, PublishRule] = {EDIT: forwarding_defaults}
