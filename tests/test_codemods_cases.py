"""Runs every codemod's own cases, each twice: the second run must change nothing.

The cases are found by walking the packages a codemod may live in (``bot/codemods/`` and each
fix class's package): a module's ``CASES``, a list of :class:`bot.codemods.base.Case`. No list
names them, so a codemod module cannot be left off; and every codemod a recipe's edit steps
through (``step(codemod, ...)`` anywhere in bot/) must come from a module whose cases run.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import bot
from bot.codemods import Case, CodemodRefused

BOT = Path(bot.__file__).parent
WALKED = ("bot.codemods", "bot.recipes")


def _modules(package: str) -> list[ModuleType]:
    root = importlib.import_module(package)
    found = [root]
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        found.append(importlib.import_module(info.name))
    return found


def codemod_cases(packages: tuple[str, ...] = WALKED) -> dict[str, list[Case]]:
    """Module name -> its cases, for every walked module whose ``CASES`` are codemod cases
    (a fix class's ``cases.py`` holds recipe cases, another type, and is not one)."""
    found = {}
    for package in packages:
        for module in _modules(package):
            cases = getattr(module, "CASES", None)
            if (
                isinstance(cases, list | tuple)
                and cases
                and all(isinstance(c, Case) for c in cases)
            ):
                found[module.__name__] = list(cases)
    return found


_CASES = [(module, case) for module, cases in codemod_cases().items() for case in cases]


@pytest.mark.parametrize(
    "case", [case for _, case in _CASES], ids=[f"{module}: {case.name}" for module, case in _CASES]
)
def test_case(case: Case) -> None:
    if case.refuses is not None:
        with pytest.raises(CodemodRefused) as refused:
            case.apply(case.before)
        assert case.refuses in str(refused.value)
        assert "\n" not in str(refused.value)
        return
    expected = case.before if case.after is None else case.after
    first = case.apply(case.before)
    assert first == expected
    assert case.apply(first) == first


def test_every_codemod_has_a_no_change_case_and_a_change_case() -> None:
    found = codemod_cases()
    assert {"bot.codemods.imports", "bot.codemods.bases", "bot.codemods.registry_entry"} <= set(
        found
    )
    for module, cases in found.items():
        assert any(c.after is None and c.refuses is None for c in cases), module
        assert any(c.after is not None for c in cases), module


def stepped_codemods(root: Path) -> dict[str, set[str]]:
    """For each ``step(name, ...)`` in the package at ``root``: the module ``name`` is imported
    from -> the names, resolved through the file's ``from module import name`` lines (a
    codemod defined in the same file is that file's module)."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        origin = {
            alias.asname or alias.name: node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
            for alias in node.names
        }
        here = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "step"
                and node.args
                and isinstance(node.args[0], ast.Name)
            ):
                name = node.args[0].id
                found.setdefault(origin.get(name, here), set()).add(name)
    return found


def test_every_codemod_a_recipe_steps_through_has_its_cases_run() -> None:
    stepped = stepped_codemods(BOT)
    assert {"bot.codemods.imports", "bot.codemods.bases"} <= set(stepped)
    missing = sorted(set(stepped) - set(codemod_cases()))
    assert missing == []


def test_a_codemod_module_without_cases_is_found(tmp_path: Path) -> None:
    """A new codemod, stepped through by a recipe, whose module has no ``CASES``: named."""
    copy = tmp_path / "bot"
    (copy / "recipes" / "toy").mkdir(parents=True)
    (copy / "recipes" / "toy" / "recipe.py").write_text(
        "from bot.codemods.toy_codemod import add_toy\n"
        "from bot.recipes.base import step\n\n"
        "STEP = step(add_toy, name='x')\n"
    )
    stepped = stepped_codemods(copy)
    assert stepped == {"bot.codemods.toy_codemod": {"add_toy"}}
    assert sorted(set(stepped) - set(codemod_cases())) == ["bot.codemods.toy_codemod"]
