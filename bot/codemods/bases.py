"""Codemod: append a base class to a module-level class definition."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from bot.codemods.base import Case, CodemodRefused, parse, require_identifier
from bot.codemods.layout import insert_item


def append_base_class(source: str, class_name: str, base: str) -> str:
    """Return ``source`` with ``base`` as the last positional base of ``class class_name``.

    Unchanged if the class already lists a base of that name (``Base`` or ``mod.Base``).
    """
    require_identifier(class_name, "class name")
    require_identifier(base, "base class")
    tree = parse(source)
    matches = [
        index
        for index, statement in enumerate(tree.body)
        if isinstance(statement, cst.ClassDef) and statement.name.value == class_name
    ]
    if not matches:
        raise CodemodRefused(f"no module-level class {class_name} in this file")
    if len(matches) > 1:
        raise CodemodRefused(f"class {class_name} is defined {len(matches)} times in this file")
    index = matches[0]
    class_def = tree.body[index]
    assert isinstance(class_def, cst.ClassDef)
    if any(_base_name(arg) == base for arg in class_def.bases):
        return source
    if any(arg.star for arg in class_def.bases):
        raise CodemodRefused(f"class {class_name} takes *bases; cannot place a base after them")
    body = list(tree.body)
    body[index] = _with_base(class_def, base)
    return tree.with_changes(body=body).code


def _base_name(arg: cst.Arg) -> str | None:
    value = arg.value
    if isinstance(value, cst.Name):
        return value.value
    if isinstance(value, cst.Attribute):
        return value.attr.value
    return None


def _with_base(class_def: cst.ClassDef, base: str) -> cst.ClassDef:
    arguments = [*class_def.bases, *class_def.keywords]
    new_arg = cst.Arg(value=cst.Name(base))
    if not isinstance(class_def.lpar, cst.LeftParen):
        return class_def.with_changes(bases=[new_arg], lpar=cst.LeftParen(), rpar=cst.RightParen())
    assert isinstance(class_def.rpar, cst.RightParen)
    inserted = insert_item(
        arguments,
        len(class_def.bases),
        new_arg,
        class_def.lpar.whitespace_after,
        class_def.rpar.whitespace_before,
    )
    count = len(class_def.bases) + 1
    return class_def.with_changes(
        bases=inserted.items[:count],
        keywords=inserted.items[count:],
        lpar=class_def.lpar.with_changes(whitespace_after=inserted.opening),
        rpar=class_def.rpar.with_changes(whitespace_before=inserted.closing),
    )


def _append(class_name: str, base: str) -> Callable[[str], str]:
    return lambda source: append_base_class(source, class_name, base)


_SEED_BEFORE = """\
class Qwen3NextForCausalLM(
    nn.Module,
    HasInnerState,
    SupportsLoRA,
    SupportsPP,
    QwenNextMixtureOfExperts,
    IsHybrid,
):
    packed_modules_mapping = {}
"""

CASES: list[Case] = [
    Case(
        "seed: one base per line",
        _append("Qwen3NextForCausalLM", "SupportsEagle3"),
        _SEED_BEFORE,
        _SEED_BEFORE.replace("    IsHybrid,\n", "    IsHybrid,\n    SupportsEagle3,\n"),
    ),
    Case(
        "base already present: no change",
        _append("Qwen3NextForCausalLM", "IsHybrid"),
        _SEED_BEFORE,
    ),
    Case(
        "base present through a module attribute: no change",
        _append("A", "SupportsEagle3"),
        "class A(interfaces.SupportsEagle3):\n    pass\n",
    ),
    Case(
        "single line",
        _append("A", "SupportsEagle3"),
        "class A(nn.Module, SupportsPP):\n    x = 1\n",
        "class A(nn.Module, SupportsPP, SupportsEagle3):\n    x = 1\n",
    ),
    Case(
        "keyword stays last, single line",
        _append("A", "SupportsEagle3"),
        "class A(B, metaclass=M):\n    pass\n",
        "class A(B, SupportsEagle3, metaclass=M):\n    pass\n",
    ),
    Case(
        "keyword stays last, one per line",
        _append("A", "SupportsEagle3"),
        "class A(\n    B,\n    C,\n    metaclass=M,\n):\n    pass\n",
        "class A(\n    B,\n    C,\n    SupportsEagle3,\n    metaclass=M,\n):\n    pass\n",
    ),
    Case(
        "trailing comment on the last base stays on its line",
        _append("A", "SupportsEagle3"),
        "class A(\n    B,\n    C,  # keep\n):\n    pass\n",
        "class A(\n    B,\n    C,  # keep\n    SupportsEagle3,\n):\n    pass\n",
    ),
    Case(
        "bases on one line between split brackets stay on that line",
        _append("KimiVLForConditionalGeneration", "SupportsEagle3"),
        "class KimiVLForConditionalGeneration(\n    nn.Module, SupportsMultiModal, SupportsPP\n):\n"
        "    pass\n",
        "class KimiVLForConditionalGeneration(\n"
        "    nn.Module, SupportsMultiModal, SupportsPP, SupportsEagle3\n):\n    pass\n",
    ),
    Case(
        "no bases",
        _append("A", "SupportsEagle3"),
        "class A:\n    pass\n",
        "class A(SupportsEagle3):\n    pass\n",
    ),
    Case(
        "only the named class changes",
        _append("B", "SupportsEagle3"),
        "class A(X):\n    pass\n\n\nclass B(X):\n    pass\n",
        "class A(X):\n    pass\n\n\nclass B(X, SupportsEagle3):\n    pass\n",
    ),
    Case(
        "class not found: refuse",
        _append("Missing", "SupportsEagle3"),
        "class A(X):\n    pass\n",
        refuses="no module-level class Missing",
    ),
    Case(
        "nested class is not module level: refuse",
        _append("Inner", "SupportsEagle3"),
        "class A:\n    class Inner(X):\n        pass\n",
        refuses="no module-level class Inner",
    ),
    Case(
        "hostile class name: refuse",
        _append("A):\n    import os #", "SupportsEagle3"),
        "class A(X):\n    pass\n",
        refuses="not a Python identifier",
    ),
]
