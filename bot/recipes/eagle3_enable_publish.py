"""What ``bot publish`` re-checks for the edit kinds of the ``eagle3-enable`` recipe.

The decoder's change is re-derived, not trusted: on the base text, the mixin appended to the
decoder's bases and :func:`bot.codemods.aux_capture.add_aux_capture` applied (with a residual
of ``None`` or of the finding's name, counted from ``self.start_layer`` or from ``0``, a loop
over every layer sliced to this stage's or not) must give the patched class exactly, by AST (so
ruff's formatting does not matter and anything else does). Imports: only the mixin (and the
interface, when the target is in the same file).
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Mapping
from typing import Any

from bot.codemods.aux_capture import add_aux_capture
from bot.codemods.aux_forward_test import RESIDUAL_KINDS, aux_test_path, new_aux_test_file
from bot.codemods.base import CodemodRefused
from bot.codemods.bases import append_base_class
from bot.codemods.spans import ClassBody, ClassHeader, Imports, Span
from bot.recipes.base import PublishedEdit, PublishRule
from bot.recipes.eagle3_interface_publish import (
    INTERFACE,
    declare_interface,
    from_interfaces,
    registry_entry,
    regression_test,
)
from bot.recipes.publish_rules import (
    IDENTIFIER,
    MODEL_FILE,
    confined,
    dump,
    module_class,
    only_new_imports,
    same_other_statements,
)

MIXIN = "EagleModelMixin"


def enable_decoder(edit: PublishedEdit) -> None:
    _enable(edit, declares=False)


def enable_decoder_and_declare(edit: PublishedEdit) -> None:
    _enable(edit, declares=True)


def _enable(edit: PublishedEdit, declares: bool) -> None:
    path, before, after, class_name = edit.path, edit.before, edit.after, edit.class_name
    if not MODEL_FILE.match(path):
        raise CodemodRefused("not a model file; decoders are edited in model files only")
    decoder = _decoder_name(edit.finding)
    module_class(before, decoder)  # the finding's decoder must be a class of the base file
    spans: list[Span] = [Imports(), ClassHeader(decoder), ClassBody(decoder)]
    allowed_imports = {MIXIN: from_interfaces}
    allowed_classes: dict[str, type[ast.stmt]] = {decoder: ast.ClassDef}
    if declares:
        spans.append(ClassHeader(class_name))
        allowed_imports[INTERFACE] = from_interfaces
        allowed_classes[class_name] = ast.ClassDef
    confined(before, after, spans)
    only_new_imports(before, after, allowed_imports)
    same_other_statements(before, after, allowed=allowed_classes)
    _check_decoder(before, after, decoder, _residual_names(edit.finding))
    if declares:
        old, new = module_class(before, class_name), module_class(after, class_name)
        gained = ast.Name(INTERFACE, ast.Load())
        same = (
            dump(old.body) == dump(new.body)
            and dump(old.decorator_list) == dump(new.decorator_list)
            and dump(old.keywords) == dump(new.keywords)
        )
        if not same or dump(new.bases) != dump([*old.bases, gained]):
            raise CodemodRefused(f"the change to {class_name} is more than adding {INTERFACE}")
    else:
        for name in {class_name} - {decoder}:
            try:
                old = module_class(before, name)
            except CodemodRefused:
                continue  # the target lives in another file (declare-interface checks it)
            if dump(old) != dump(module_class(after, name)):
                raise CodemodRefused(f"the patch changes {name} in the decoder's file")


def _decoder_name(finding: Mapping[str, Any]) -> str:
    evidence = finding.get("evidence") if isinstance(finding, Mapping) else None
    decoder = (evidence or {}).get("decoder") if isinstance(evidence, Mapping) else None
    name = decoder.get("name") if isinstance(decoder, Mapping) else None
    if not (isinstance(name, str) and IDENTIFIER.match(name)):
        raise CodemodRefused("the plan's finding names no decoder class")
    return name


def _residual_names(finding: Mapping[str, Any]) -> list[str | None]:
    shape = (finding.get("evidence") or {}).get("shape") or {}
    name = shape.get("residual_name") if isinstance(shape, Mapping) else None
    return [None] + ([name] if isinstance(name, str) and IDENTIFIER.match(name) else [])


def _check_decoder(before: str, after: str, decoder: str, residuals: list[str | None]) -> None:
    """The patched decoder class is exactly what the recipe's codemods write on the base."""
    patched = dump(module_class(after, decoder))
    with_mixin = append_base_class(before, decoder, MIXIN)
    for residual in residuals:
        for absolute, stage_slice in itertools.product((True, False), (False, True)):
            try:
                expected = add_aux_capture(with_mixin, decoder, residual, absolute, stage_slice)
            except CodemodRefused:
                continue
            if dump(module_class(expected, decoder)) == patched:
                return
    raise CodemodRefused(
        f"the change to {decoder} is not the mixin and the aux capture the recipe writes"
    )


def aux_forward_test(edit: PublishedEdit) -> None:
    """A new file, exactly the test :func:`create_aux_forward_test` writes for the finding
    (its module, decoder, target and residual semantics); only the final norm's attribute
    name is read from the file, and it must be an identifier."""
    if edit.before:
        raise CodemodRefused("the forward test is a new file; this one existed")
    finding = edit.finding
    module = finding.get("module")
    if not isinstance(module, str) or edit.path != aux_test_path(module):
        raise CodemodRefused("the forward test is not where the recipe puts it")
    shape = (finding.get("evidence") or {}).get("shape") or {}
    residual = shape.get("residual") if isinstance(shape, Mapping) else None
    if residual not in RESIDUAL_KINDS:
        raise CodemodRefused("the plan's finding names no residual semantics the test knows")
    expected = new_aux_test_file(
        module=module,
        decoder=_decoder_name(finding),
        target=edit.class_name,
        residual=str(residual),
        norm=_assigned_norm(edit.after),
        scalars=_set_to_one(edit.after),
        config_scalars=_config_set_to_one(edit.after),
    )
    if dump(ast.parse(edit.after)) != dump(ast.parse(expected)):
        raise CodemodRefused("the forward test is not the one the recipe writes")


aux_forward_test.creates_file = True  # type: ignore[attr-defined]


def _set_to_one(text: str) -> tuple[str, ...]:
    """``x`` for each ``model.x = 1.0`` (the generator re-checks each is an identifier)."""
    return tuple(
        node.targets[0].attr
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Attribute)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, float)
        and node.value.value == 1.0
    )


def _config_set_to_one(text: str) -> tuple[str, ...]:
    """``x`` for each ``x=1.0`` in ``model.config = SimpleNamespace(...)``."""
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Attribute)
            and node.targets[0].attr == "config"
            and isinstance(node.value, ast.Call)
        ):
            return tuple(str(k.arg) for k in node.value.keywords)
    return ()


def _assigned_norm(text: str) -> str:
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Attribute)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "AddNorm"
            and IDENTIFIER.match(node.targets[0].attr)
        ):
            return node.targets[0].attr
    raise CodemodRefused("the forward test sets no final norm")


PUBLISH_RULES: dict[str, PublishRule] = {
    "aux-forward-test": aux_forward_test,
    "enable-decoder": enable_decoder,
    "enable-decoder-and-declare": enable_decoder_and_declare,
    "declare-interface": declare_interface,
    "registry-entry": registry_entry,
    "regression-test": regression_test,
}
