"""What ``bot publish`` re-checks for each edit kind of the ``eagle3-wrapper`` recipe.

The wrapper's own kinds declare ``SupportsEagle3`` on the finding's class (the wrapper, or the
family base the finding names, in its own file) and append the two protocol methods forwarding
to the language model, maybe behind the tree's clear-error guard. The rule re-resolves the
recipe's spans on the base text, re-applies the recipe's own codemods there (the import,
:mod:`bot.codemods.bases`, :mod:`bot.codemods.delegate_methods`) for the finding and guard a scan
of the base commit gives, and requires the patched file to be the result. The registry entry
and the regression tests are the interface recipe's edits; the contributed forwarding test is
re-derived whole from a scan of the base commit.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.codemods.base import CodemodRefused
from bot.codemods.spans import AfterClassBody, ClassBody, ClassHeader, Imports
from bot.recipes.base import Declined, Finding, PublishedEdit, PublishRule, ScanContext
from bot.recipes.eagle3_analysis import INTERFACE
from bot.recipes.eagle3_interface.publish import (
    declare_interface,
    from_interfaces,
    registry_entry,
    regression_test,
)
from bot.recipes.llm_test import CI_STEP_KIND, LLM_TEST_KIND, ci_step_dependency, declaration_rule
from bot.recipes.publish_rules import (
    MODEL_FILE,
    confined,
    only_new_imports,
    require_bound,
    require_recipe_edit,
    require_written_file,
)

SUPPORTS_EAGLE3_CHECK = "supports_eagle3"


def declare_and_delegate(edit: PublishedEdit) -> None:
    _declare_with_methods(edit, guarded=False)


def declare_and_guarded_delegate(edit: PublishedEdit) -> None:
    _declare_with_methods(edit, guarded=True)


def _declare_with_methods(edit: PublishedEdit, guarded: bool) -> None:
    """Exactly what the recipe's edit of the finding's file
    (:func:`bot.recipes.eagle3_wrapper.recipe.declaration_edit`) writes when re-applied on the base
    text, for the finding and the guard a scan of the base tree gives (never the plan's)."""
    from bot.recipes.eagle3_wrapper.recipe import declaration_edit

    path, before, after, class_name = edit.path, edit.before, edit.after, edit.class_name
    if not MODEL_FILE.match(path):
        raise CodemodRefused("not a model file; the interface is declared in model files only")
    if edit.base is None:
        raise CodemodRefused("publish has no base tree to derive the delegation from")
    scan = edit.base.scan()
    finding = _base_finding(edit, scan)
    if finding.path != path:
        raise CodemodRefused(f"{class_name} is not defined in this file, by the base's finding")
    # The AST comparison cannot see comments: the changed lines must lie in the recipe's spans.
    confined(
        before,
        after,
        [Imports(), ClassHeader(class_name), ClassBody(class_name), AfterClassBody(class_name)],
    )
    allowed = {INTERFACE: from_interfaces}
    if guarded:
        allowed[SUPPORTS_EAGLE3_CHECK] = from_interfaces
    only_new_imports(before, after, allowed)
    require_bound(after, allowed)
    planned = declaration_edit(scan, finding, before)
    if isinstance(planned, Declined):
        raise CodemodRefused(planned.reason)
    if planned.kind != edit.kind:
        raise CodemodRefused(f"the recipe makes a {planned.kind} edit of {path}, not {edit.kind}")
    require_recipe_edit(after, planned.apply(before))


def wrapper_forward_test(edit: PublishedEdit) -> None:
    """A new file, exactly the forwarding test the recipe writes for the class: every field
    (module, attribute, the guard's error, the platform skip) read from the base tree's own
    finding for the class and its files, never from the plan."""
    from bot.codemods.wrapper_forward_test import new_wrapper_test_file, wrapper_test_path
    from bot.recipes.eagle3_wrapper.recipe import wrapper_test_fields

    if edit.before:
        raise CodemodRefused("the forwarding test is a new file; this one existed")
    if edit.base is None:
        raise CodemodRefused("publish has no base tree to derive the forwarding test from")
    scan = edit.base.scan()
    fields = wrapper_test_fields(scan, _base_finding(edit, scan))
    if not isinstance(fields, dict):
        raise CodemodRefused(f"the recipe writes no forwarding test for {edit.class_name}")
    if edit.path != wrapper_test_path(fields["module"]):
        raise CodemodRefused("the forwarding test is not where the recipe puts it")
    require_written_file(edit.after, new_wrapper_test_file(**fields), "forwarding test")


wrapper_forward_test.creates_file = True  # type: ignore[attr-defined]


def _base_finding(edit: PublishedEdit, scan: ScanContext) -> Finding:
    """The recipe's finding for the plan's class at the base; the plan's finding only picks
    its file among same-named classes (platform variants)."""
    from bot.recipes.eagle3_wrapper.recipe import RECIPE

    path = edit.finding.get("path") if isinstance(edit.finding, Mapping) else None
    found = [
        f
        for f in RECIPE.detect(scan)
        if f.class_name == edit.class_name and (not isinstance(path, str) or f.path == path)
    ]
    if len(found) != 1:
        raise CodemodRefused(f"{edit.class_name} is not one eagle3-wrapper finding at the base")
    return found[0]


PUBLISH_RULES: dict[str, PublishRule] = {
    "wrapper-forward-test": wrapper_forward_test,
    "declare-interface": declare_interface,
    "declare-interface-and-delegate": declare_and_delegate,
    "declare-interface-and-guarded-delegate": declare_and_guarded_delegate,
    "registry-entry": registry_entry,
    "regression-test": regression_test,
    LLM_TEST_KIND: declaration_rule("eagle3-wrapper"),
    CI_STEP_KIND: ci_step_dependency,
}
