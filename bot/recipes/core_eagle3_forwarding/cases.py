"""The cases of recipe ``core-eagle3-forwarding`` and its publish rule (bot/recipes/cases.py).

The tree is eagle3-wrapper's: a wrapper whose language model comes from ``text_config`` at
run time (``RuntimeVL``) beside the tree's own guarded wrapper (``GuardVL``), on the skeleton's
``SupportsEagle3`` whose defaults unwrap ``get_language_model().model``. The plan rewrites the
defaults in the interfaces module with the guard's error; a tree whose defaults cannot be
rewritten (their default layers do not follow ``get_language_model()``) reports nothing.
"""

from __future__ import annotations

from bot.recipes.cases import INTERFACES, Invalid, Quiet, RecipeCases, Valid
from bot.recipes.eagle3_wrapper.cases import GUARDED, LEGACY_INTERFACES, runtime_tree

FORWARD_CALL = "            language_model.set_aux_hidden_state_layers(layers)"
ASKS = "        language_model = _eagle3_language_model(self)"

FORWARDING = Valid(
    "a wrapper whose language model is chosen at run time: the defaults forward, with the "
    "guard's error",
    runtime_tree(GUARDED),
    "SupportsEagle3",
    reports="1 wrappers need the tree's guard",
    adds=(
        ASKS,
        FORWARD_CALL,
        "def _eagle3_language_model(model: object) -> SupportsEagle3 | None:",
        '        f"support EAGLE-3, but {type(language_model).__name__} does not."',
    ),
)

CASES = RecipeCases(
    valid=(FORWARDING,),
    invalid=(
        Invalid(
            "a default that skips the guard: the clear error is never raised",
            FORWARDING,
            INTERFACES,
            ("    raise RuntimeError(", "    return None\n    raise RuntimeError("),
            refuses="the change to _eagle3_language_model is not the edit the recipe makes",
        ),
        Invalid(
            "the error reworded: not the tree's own guard's",
            FORWARDING,
            INTERFACES,
            ("support EAGLE-3, but {type(", "support EAGLE-3; {type("),
            refuses="the change to _eagle3_language_model is not the edit the recipe makes",
        ),
        Invalid(
            "a helper that forwards before trying today's unwrap (a language model's own "
            "override would run where the defaults work today)",
            FORWARDING,
            INTERFACES,
            (
                "    if language_model is model or isinstance(",
                "    if supports_eagle3(language_model):\n        return language_model\n"
                "    if language_model is model or isinstance(",
            ),
            refuses="the change to _eagle3_language_model is not the edit the recipe makes",
        ),
        Invalid(
            "a default that no longer asks the helper",
            FORWARDING,
            INTERFACES,
            (
                "        if language_model is not None:\n" + FORWARD_CALL + "\n",
                "        if False:\n" + FORWARD_CALL + "\n",
            ),
            refuses="the change to SupportsEagle3 is not the edit the recipe makes",
        ),
    ),
    quiet=(
        Quiet(
            "defaults the plan cannot rewrite: the wrappers keep the guard each",
            runtime_tree(GUARDED, LEGACY_INTERFACES),
            "SupportsEagle3",
        ),
    ),
)
