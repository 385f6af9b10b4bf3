"""Codemod: add one name to a module-level ``from <module> import ...``."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from bot.codemods.base import Case, CodemodRefused, parse, require_dotted, require_identifier
from bot.codemods.layout import insert_item
from bot.codemods.ordering import insertion_index, module_sort_key
from bot.tree.layout import INTERFACES_MODULE


def add_import_name(source: str, module: str, name: str) -> str:
    """Return ``source`` with ``name`` imported from ``module`` (e.g. ``".interfaces"``).

    Joins an existing import of that module, in the place ruff's isort would choose, or adds a
    new ``from`` import next to its relatives. Unchanged if ``name`` is already imported there.
    """
    require_dotted(module, "module")
    require_identifier(name, "name")
    tree = parse(source)
    imports = _module_level_from_imports(tree)
    bound_elsewhere = [found for found, statement in imports if name in _bound_names(statement)]
    if any(found == module for found in bound_elsewhere):
        return source
    if bound_elsewhere:
        raise CodemodRefused(f"{name} is already imported from {bound_elsewhere[0]}")
    targets = [(index, stmt) for index, stmt in _indexed(tree, imports) if _module(stmt) == module]
    if not targets:
        return tree.with_changes(body=_with_new_import(tree, module, name)).code
    index, statement = targets[0]
    if isinstance(statement.names, cst.ImportStar):
        raise CodemodRefused(f"from {module} import * already imports everything")
    line = tree.body[index]
    assert isinstance(line, cst.SimpleStatementLine)
    new_body = list(tree.body)
    new_statement = _add_alias(statement, name)
    new_body[index] = line.with_changes(
        body=[new_statement if small is statement else small for small in line.body]
    )
    return tree.with_changes(body=new_body).code


def _module(statement: cst.ImportFrom) -> str:
    dots = "." * len(statement.relative)
    if statement.module is None:
        return dots
    return dots + cst.Module([]).code_for_node(statement.module)


def _module_level_from_imports(tree: cst.Module) -> list[tuple[str, cst.ImportFrom]]:
    found = []
    for line in tree.body:
        if isinstance(line, cst.SimpleStatementLine):
            for small in line.body:
                if isinstance(small, cst.ImportFrom):
                    found.append((_module(small), small))
    return found


def _indexed(
    tree: cst.Module, imports: list[tuple[str, cst.ImportFrom]]
) -> list[tuple[int, cst.ImportFrom]]:
    wanted = {id(statement) for _, statement in imports}
    return [
        (index, small)
        for index, line in enumerate(tree.body)
        if isinstance(line, cst.SimpleStatementLine)
        for small in line.body
        if id(small) in wanted and isinstance(small, cst.ImportFrom)
    ]


def _bound_names(statement: cst.ImportFrom) -> set[str]:
    if isinstance(statement.names, cst.ImportStar):
        return set()
    bound = set()
    for alias in statement.names:
        target = alias.asname.name if alias.asname else alias.name
        if isinstance(target, cst.Name):
            bound.add(target.value)
    return bound


def _alias_name(alias: cst.ImportAlias) -> str:
    return cst.Module([]).code_for_node(alias.name)


def _add_alias(statement: cst.ImportFrom, name: str) -> cst.ImportFrom:
    assert not isinstance(statement.names, cst.ImportStar)
    names = list(statement.names)
    index = insertion_index([_alias_name(alias) for alias in names], name)
    opening = statement.lpar.whitespace_after if statement.lpar else None
    closing = statement.rpar.whitespace_before if statement.rpar else None
    new_alias = cst.ImportAlias(name=cst.Name(name))
    inserted = insert_item(names, index, new_alias, opening, closing)
    changes: dict[str, object] = {"names": inserted.items}
    if statement.lpar and statement.rpar:
        changes["lpar"] = statement.lpar.with_changes(whitespace_after=inserted.opening)
        changes["rpar"] = statement.rpar.with_changes(whitespace_before=inserted.closing)
    return statement.with_changes(**changes)


def _is_import_line(line: cst.CSTNode) -> bool:
    return isinstance(line, cst.SimpleStatementLine) and any(
        isinstance(small, cst.Import | cst.ImportFrom) for small in line.body
    )


def _group(module: str) -> tuple[int, str]:
    """Which from-imports a new one sits among: same relative depth, or same top package."""
    dots = len(module) - len(module.lstrip("."))
    return (dots, "" if dots else module.split(".")[0])


def _new_import_position(tree: cst.Module, module: str) -> int:
    last_import, last_in_group = -1, -1
    for index, line in enumerate(tree.body):
        if not _is_import_line(line):
            continue
        last_import = index
        assert isinstance(line, cst.SimpleStatementLine)
        for small in line.body:
            if isinstance(small, cst.ImportFrom) and _group(_module(small)) == _group(module):
                if module_sort_key(module) < module_sort_key(_module(small)):
                    return index
                last_in_group = index
    if last_in_group >= 0:
        return last_in_group + 1
    return last_import + 1 if last_import >= 0 else _after_docstring(tree)


def _after_docstring(tree: cst.Module) -> int:
    first = tree.body[0] if tree.body else None
    if (
        isinstance(first, cst.SimpleStatementLine)
        and isinstance(first.body[0], cst.Expr)
        and isinstance(first.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    ):
        return 1
    return 0


def _with_new_import(tree: cst.Module, module: str, name: str) -> list[cst.BaseStatement]:
    statement = cst.parse_statement(f"from {module} import {name}\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    position = _new_import_position(tree, module)
    body = list(tree.body)
    following = body[position] if position < len(body) else None
    if following is not None and _is_import_line(following):
        leading = following.leading_lines
        if all(line.comment is None for line in leading):
            # Take the place of the import we sort before, blank lines included.
            statement = statement.with_changes(leading_lines=leading)
            body[position] = following.with_changes(leading_lines=[])
    elif following is not None and not any(_is_import_line(line) for line in body):
        # The first import of the file: code after it gets isort's blank lines.
        blank_lines = 2 if isinstance(following, cst.ClassDef | cst.FunctionDef) else 1
        leading = list(following.leading_lines)
        if not leading or leading[0].comment is not None:
            leading = [cst.EmptyLine()] * blank_lines + leading
        body[position] = following.with_changes(leading_lines=leading)
    body.insert(position, statement)
    return body


def _add(module: str, name: str) -> Callable[[str], str]:
    return lambda source: add_import_name(source, module, name)


_SEED_BEFORE = """\
from .interfaces import (
    EagleModelMixin,
    HasInnerState,
    IsHybrid,
    MixtureOfExperts,
    SupportsLoRA,
    SupportsPP,
)
from .utils import AutoWeightsLoader
"""

CASES: list[Case] = [
    Case(
        "seed: qwen3_next block, isort position",
        _add(".interfaces", "SupportsEagle3"),
        _SEED_BEFORE,
        _SEED_BEFORE.replace("    SupportsLoRA,\n", "    SupportsEagle3,\n    SupportsLoRA,\n"),
    ),
    Case(
        "already imported: no change",
        _add(".interfaces", "SupportsLoRA"),
        _SEED_BEFORE,
    ),
    Case(
        "single line, ordered by type: classes before functions",
        _add(".interfaces", "SupportsEagle3"),
        "from .interfaces import MAX, SupportsPP, supports_lora\n",
        "from .interfaces import MAX, SupportsEagle3, SupportsPP, supports_lora\n",
    ),
    Case(
        "single line, appended last",
        _add(".interfaces", "SupportsEagle3"),
        "from .interfaces import HasInnerState, IsHybrid\nx = 1\n",
        "from .interfaces import HasInnerState, IsHybrid, SupportsEagle3\nx = 1\n",
    ),
    Case(
        "unsorted block: appended at the end, trailing comment stays put",
        _add(".interfaces", "SupportsEagle3"),
        "from .interfaces import (\n    SupportsPP,\n    IsHybrid,  # noqa: F401\n)\n",
        "from .interfaces import (\n    SupportsPP,\n    IsHybrid,  # noqa: F401\n"
        "    SupportsEagle3,\n)\n",
    ),
    Case(
        "relative dots matter: ..interfaces is another module",
        _add(".interfaces", "SupportsEagle3"),
        "from ..interfaces import SupportsPP\nfrom .utils import f\n\nx = 1\n",
        "from ..interfaces import SupportsPP\nfrom .interfaces import SupportsEagle3\n"
        "from .utils import f\n\nx = 1\n",
    ),
    Case(
        "no import yet: after the last relative import",
        _add(".interfaces", "SupportsEagle3"),
        "import torch\n\nfrom .config import C\n\n\nclass A:\n    pass\n",
        "import torch\n\nfrom .config import C\nfrom .interfaces import SupportsEagle3\n\n\n"
        "class A:\n    pass\n",
    ),
    Case(
        "absolute module placed in module order among its package",
        _add(INTERFACES_MODULE, "supports_eagle3"),
        "import pytest\n\nfrom vllm.model_executor.models.adapters import a\n"
        "from vllm.model_executor.models.registry import ModelRegistry\n\nfrom .r import R\n",
        "import pytest\n\nfrom vllm.model_executor.models.adapters import a\n"
        "from vllm.model_executor.models.interfaces import supports_eagle3\n"
        "from vllm.model_executor.models.registry import ModelRegistry\n\nfrom .r import R\n",
    ),
    Case(
        "imports under TYPE_CHECKING are not module level",
        _add(".interfaces", "SupportsEagle3"),
        "if TYPE_CHECKING:\n    from .interfaces import SupportsPP\n",
        "from .interfaces import SupportsEagle3\n\nif TYPE_CHECKING:\n"
        "    from .interfaces import SupportsPP\n",
    ),
    Case(
        "name bound from another module: refuse",
        _add(".interfaces", "SupportsEagle3"),
        "from .other import SupportsEagle3\n",
        refuses="already imported from .other",
    ),
    Case(
        "star import: refuse",
        _add(".interfaces", "SupportsEagle3"),
        "from .interfaces import *\n",
        refuses="import *",
    ),
    Case(
        "mixed wrapped layout: refuse",
        _add(".interfaces", "SupportsEagle3"),
        "from .interfaces import (A, B,\n    C)\n",
        refuses="mixes",
    ),
]
