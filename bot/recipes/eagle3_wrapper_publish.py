"""What ``bot publish`` re-checks for each edit kind of the ``eagle3-wrapper`` recipe.

The wrapper's own kinds declare ``SupportsEagle3`` on the finding's class (the wrapper, or the
family base the finding names, in its own file) and append the two protocol methods forwarding
to the language model, maybe behind the tree's clear-error guard. The rule re-resolves the
recipe's spans on the base text and then requires the class to gain exactly the interface and
exactly the methods :mod:`bot.codemods.delegate_methods` writes for the attribute the finding
names. The registry entry and the regression tests are the interface recipe's edits; the
contributed forwarding test is re-derived whole from a scan of the base commit.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from bot.codemods.base import CodemodRefused
from bot.codemods.delegate_methods import PROTOCOL_METHODS, delegating_method
from bot.codemods.spans import AfterClassBody, ClassBody, ClassHeader, Imports
from bot.recipes.base import Finding, PublishedEdit, PublishRule, ScanContext
from bot.recipes.eagle3_analysis import INTERFACE
from bot.recipes.eagle3_interface_publish import (
    declare_interface,
    from_interfaces,
    registry_entry,
    regression_test,
)
from bot.recipes.publish_rules import (
    IDENTIFIER,
    MODEL_FILE,
    class_gains,
    confined,
    dump,
    module_class,
    only_new_imports,
    require_bound,
    require_written_file,
    same_other_statements,
)

SUPPORTS_EAGLE3_CHECK = "supports_eagle3"
# What a guard may raise: the tree's guards raise a plain error with a message.
_GUARD_ERRORS = frozenset({"RuntimeError", "ValueError", "TypeError", "NotImplementedError"})


def declare_and_delegate(edit: PublishedEdit) -> None:
    _declare_with_methods(edit, guarded=False)


def declare_and_guarded_delegate(edit: PublishedEdit) -> None:
    _declare_with_methods(edit, guarded=True)


def _declare_with_methods(edit: PublishedEdit, guarded: bool) -> None:
    path, before, after, class_name = edit.path, edit.before, edit.after, edit.class_name
    if not MODEL_FILE.match(path):
        raise CodemodRefused("not a model file; the interface is declared in model files only")
    if edit.finding.get("path") != path:
        raise CodemodRefused(f"{class_name} is not defined in this file, by the plan's finding")
    attribute = _language_model_attribute(edit.finding)
    confined(
        before,
        after,
        [Imports(), ClassHeader(class_name), ClassBody(class_name), AfterClassBody(class_name)],
    )
    allowed = {INTERFACE: from_interfaces}
    if guarded:
        allowed[SUPPORTS_EAGLE3_CHECK] = from_interfaces
    only_new_imports(before, after, allowed)
    same_other_statements(before, after, allowed={class_name: ast.ClassDef})
    old = module_class(before, class_name)
    added = class_gains(old, module_class(after, class_name), INTERFACE)
    new_guard = guarded and any(
        isinstance(s, ast.FunctionDef) and s.name not in PROTOCOL_METHODS for s in added
    )
    require_bound(after, [INTERFACE, *([SUPPORTS_EAGLE3_CHECK] if new_guard else [])])
    expected = _expected_methods(old, added, attribute, guarded)
    if dump(added) != dump(expected):
        raise CodemodRefused(
            f"the methods added to {class_name} are not the delegation the recipe writes"
        )


def _language_model_attribute(finding: Mapping[str, Any]) -> str:
    """``x`` of the finding's ``self.x`` language model, validated as an identifier."""
    evidence = finding.get("evidence")
    model = evidence.get("language_model") if isinstance(evidence, dict) else None
    attribute = model.get("attribute") if isinstance(model, dict) else None
    name = attribute.removeprefix("self.") if isinstance(attribute, str) else ""
    if not IDENTIFIER.match(name):
        raise CodemodRefused("the plan's finding names no language model attribute")
    return name


def _expected_methods(
    old: ast.ClassDef, added: list[ast.stmt], attribute: str, guarded: bool
) -> list[ast.stmt]:
    """What ``add_delegating_methods`` appends to ``old``: each protocol method it lacks (and,
    guarded, the guard first when the class lacks it too)."""
    defined = {s.name for s in old.body if isinstance(s, ast.FunctionDef)}
    missing = [m for m in PROTOCOL_METHODS if m not in defined]
    if not missing:
        return []
    expected: list[ast.stmt] = []
    guard_name = None
    if guarded:
        first = added[0] if added else None
        if isinstance(first, ast.FunctionDef) and first.name not in PROTOCOL_METHODS:
            _check_guard(first, attribute)
            guard_name = first.name
            expected.append(first)
        else:
            guard_name = _called_guard(first)
            if guard_name not in defined:
                raise CodemodRefused(f"the guarded methods call {guard_name}, which is not there")
    for method in missing:
        expected += ast.parse(delegating_method(method, attribute, guard_name)).body
    return expected


def _called_guard(method: ast.stmt | None) -> str:
    """``g`` when ``method`` starts with ``self.g()`` (the guard the class already has)."""
    first = method.body[0] if isinstance(method, ast.FunctionDef) and method.body else None
    call = first.value if isinstance(first, ast.Expr) else None
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "self"
    ):
        return call.func.attr
    raise CodemodRefused("the methods added are not the delegation the recipe writes")


def _check_guard(guard: ast.FunctionDef, attribute: str) -> None:
    """The guard is the tree's shape and nothing more: ``def g(self) -> None:`` whose body is
    ``if not supports_eagle3(self.<attribute>): raise SomeError(<message>)``, the message
    built from text and ``type(...)`` names only."""
    expected_head = ast.parse(f"def {guard.name}(self) -> None:\n    pass\n").body[0]
    assert isinstance(expected_head, ast.FunctionDef)
    body = [s for s in guard.body if not _is_docstring(s)]
    check = ast.parse(f"not {SUPPORTS_EAGLE3_CHECK}(self.{attribute})", mode="eval").body
    ok = (
        not guard.decorator_list
        and dump(guard.args) == dump(expected_head.args)
        and dump(guard.returns) == dump(expected_head.returns)
        and len(body) == 1
        and isinstance(body[0], ast.If)
        and not body[0].orelse
        and dump(body[0].test) == dump(check)
        and len(body[0].body) == 1
        and _is_plain_raise(body[0].body[0], attribute)
    )
    if not ok:
        raise CodemodRefused(f"the guard {guard.name} is more than raising a clear error")


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def _is_plain_raise(statement: ast.stmt, attribute: str) -> bool:
    if not isinstance(statement, ast.Raise) or statement.cause is not None:
        return False
    error = statement.exc
    if not (
        isinstance(error, ast.Call)
        and isinstance(error.func, ast.Name)
        and error.func.id in _GUARD_ERRORS
        and not error.keywords
    ):
        return False
    owners = ("self", f"self.{attribute}")
    type_calls = {dump(ast.parse(f"type({owner})", mode="eval").body) for owner in owners}
    return all(
        _message_part(node, type_calls) for argument in error.args for node in ast.walk(argument)
    )


_MESSAGE_NODES = ast.Constant | ast.JoinedStr | ast.FormattedValue | ast.Attribute | ast.Load


def _message_part(node: ast.AST, type_calls: set[str]) -> bool:
    """Text, f-string parts and attribute reads of ``self`` or ``type(...)``: no other call."""
    if isinstance(node, ast.Call):
        return dump(node) in type_calls
    if isinstance(node, ast.Name):
        return node.id in ("self", "type")
    return isinstance(node, _MESSAGE_NODES)


def wrapper_forward_test(edit: PublishedEdit) -> None:
    """A new file, exactly the forwarding test the recipe writes for the class: every field
    (module, attribute, the guard's error, the platform skip) read from the base tree's own
    finding for the class and its files, never from the plan."""
    from bot.codemods.wrapper_forward_test import new_wrapper_test_file, wrapper_test_path
    from bot.recipes.eagle3_wrapper import wrapper_test_fields

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
    from bot.recipes.eagle3_wrapper import RECIPE

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
}
