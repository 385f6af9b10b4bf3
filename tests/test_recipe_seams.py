"""Generic code asks a recipe through its protocol, never by its name.

Everything verify, publish, the report and grouping need of a fix class is a typed member of
:class:`bot.recipes.base.Recipe` (required checks, engine gate, smoke build, follow-ups, the
explanation, the report line, the group key, required edit kinds, the write-up's replication
and model-evaluation lines). So no file of ``bot/`` outside ``bot/recipes/``, and no template
outside ``templates/recipes/``, names a registered recipe, and none probes a recipe's members with
``getattr``: a new fix class is its own module plus one registration line.
"""

from __future__ import annotations

import ast
from pathlib import Path

from bot.recipes import RECIPES
from bot.recipes.base import FixingRecipe, Recipe

BOT = Path(__file__).parents[1] / "bot"
RECIPES_DIR = BOT / "recipes"
# The write-up's templates: a recipe's own live in templates/recipes/<name>/, the generic
# sections (checklist, contribution, ...) beside them ask the recipe for its lines.
TEMPLATES = BOT.parent / "templates"
OWN_TEMPLATES = TEMPLATES / "recipes"


def _generic_files() -> list[Path]:
    """Every text file of the package outside bot/recipes/ (code, data), and every template
    outside templates/recipes/."""
    files = []
    for path in sorted([*BOT.rglob("*"), *TEMPLATES.rglob("*")]):
        owned = RECIPES_DIR in path.parents or OWN_TEMPLATES in path.parents
        if not path.is_file() or owned or "__pycache__" in path.parts:
            continue
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        files.append(path)
    return files


def _protocol_members() -> set[str]:
    names: set[str] = set()
    for protocol in (Recipe, FixingRecipe):
        names |= set(protocol.__annotations__)
        names |= {n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")}
    return names


def test_no_generic_module_names_a_recipe() -> None:
    names = [recipe.name for recipe in RECIPES]
    assert len(names) >= 4
    files = _generic_files()
    assert BOT / "scan" / "report.py" in files and BOT / "verify" / "evidence.py" in files
    assert TEMPLATES / "sections" / "checklist.j2" in files
    found = [
        f"{path.relative_to(BOT.parent)}:{number}: {name}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for name in names
        if name in line
    ]
    assert found == []


def test_no_generic_module_probes_a_recipe_with_getattr() -> None:
    members = _protocol_members()
    assert {"required_checks", "smoke", "explain", "publish_rules", "group_key"} <= members
    probes = []
    for path in _generic_files():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and ast.unparse(node.func) in ("getattr", "hasattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in members
            ):
                probes.append(f"{path.relative_to(BOT.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert probes == []


def test_every_registered_recipe_declares_the_protocol() -> None:
    """A recipe class derives from the protocol, so generic code may read each member."""
    for recipe in RECIPES:
        assert Recipe in type(recipe).__mro__, recipe.name
        for member in _protocol_members() - {"plan", "publish_rules"}:
            assert hasattr(type(recipe), member), (recipe.name, member)
