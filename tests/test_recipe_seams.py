"""Generic code asks a recipe through its protocol, never by its name, its package or its kinds.

Everything verify, publish, the report, triage and grouping need of a fix class is a typed member
of :class:`bot.recipes.base.Recipe` (required checks, engine gate, smoke build, follow-ups, the
explanation, a contested claim, the report line, the group key, required edit kinds, the
write-up's replication and model-evaluation lines). So outside a fix class's own package
(``bot/recipes/<fix class>/``):

- no module imports a fix class's package (the registry, ``bot/recipes/__init__.py``, registers
  them, one line each, and is the one exception; it lists exactly the packages on disk);
- no file of ``bot/`` outside ``bot/recipes/``, and no template of templates/ (a fix class's own
  templates are in its package), names a registered recipe or one of its edit kinds, and none
  probes a recipe's members with ``getattr``.

Each rule is also run on a copy of ``bot/`` with one violation planted, which it must report.
"""

from __future__ import annotations

import ast
import inspect
import shutil
from pathlib import Path

from bot.recipes import PACKAGES, RECIPES, fixes
from bot.recipes.base import FixingRecipe, Recipe
from bot.recipes.evidence import Evidence

BOT = Path(__file__).parents[1] / "bot"
# The write-up's generic templates (checklist, contribution, ...) ask the recipe for its lines;
# a fix class's own are in its package (bot/recipes/<package>/templates/).
TEMPLATES = BOT.parent / "templates"


def fix_class_packages(bot: Path) -> set[str]:
    """The fix classes' packages on disk: every package directly under bot/recipes/."""
    recipes = bot / "recipes"
    return {p.name for p in recipes.iterdir() if (p / "__init__.py").is_file()}


def _in_fix_class(bot: Path, path: Path) -> bool:
    parts = path.relative_to(bot).parts
    return len(parts) > 2 and parts[0] == "recipes" and parts[1] in fix_class_packages(bot)


def _generic_files(bot: Path, templates: Path) -> list[Path]:
    """Every text file of the package outside bot/recipes/ (code, data), and every template."""
    files = []
    for path in sorted([*bot.rglob("*"), *templates.rglob("*")]):
        owned = bot / "recipes" in path.parents
        if not path.is_file() or owned or "__pycache__" in path.parts:
            continue
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        files.append(path)
    return files


def _imported_names(tree: ast.Module, module: str) -> list[tuple[int, str]]:
    """Every module an import anywhere in ``tree`` names (``from a import b`` names ``a.b``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[: -node.level]
                base = ".".join([*package, *([base] if base else [])])
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def recipe_package_imports(bot: Path) -> list[str]:
    """Each import of a fix class's package from outside it (the registry excepted)."""
    packages = fix_class_packages(bot)
    found = []
    for path in sorted(bot.rglob("*.py")):
        if _in_fix_class(bot, path) or path == bot / "recipes" / "__init__.py":
            continue
        module = ".".join(path.relative_to(bot.parent).with_suffix("").parts)
        for line, name in _imported_names(ast.parse(path.read_text(encoding="utf-8")), module):
            parts = name.split(".")
            if parts[:2] == ["bot", "recipes"] and len(parts) > 2 and parts[2] in packages:
                found.append(f"{path.relative_to(bot.parent)}:{line}: {name}")
    return found


def edit_kinds() -> set[str]:
    """Every edit kind a registered recipe publishes or requires."""
    kinds = {k for r in RECIPES for k in r.required_edit_kinds}
    return kinds | {k for r in RECIPES if fixes(r) for k in r.publish_rules}


def kinds_in_generic_files(bot: Path, templates: Path, kinds: set[str]) -> list[str]:
    """Each place a generic file names an edit kind: a string literal that is one (code), or
    one in quotes (templates, data)."""
    found = []
    for path in _generic_files(bot, templates):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".py":
            found += [
                f"{path.relative_to(bot.parent)}:{node.lineno}: {node.value}"
                for node in ast.walk(ast.parse(text))
                if isinstance(node, ast.Constant) and node.value in kinds
            ]
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for kind in sorted(kinds):
                if f'"{kind}"' in line or f"'{kind}'" in line:
                    found.append(f"{path.relative_to(bot.parent)}:{number}: {kind}")
    return found


def _planted_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "bot"
    shutil.copytree(BOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def unregistered(bot: Path, packages: tuple[str, ...]) -> list[str]:
    """The fix-class packages on disk the registry does not list, and those it lists that are
    not on disk."""
    on_disk = fix_class_packages(bot)
    return sorted(on_disk.symmetric_difference(packages))


def test_the_registry_lists_exactly_the_fix_class_packages_on_disk(tmp_path: Path) -> None:
    assert unregistered(BOT, PACKAGES) == []
    assert [type(r).__module__ for r in RECIPES] == [f"bot.recipes.{p}.recipe" for p in PACKAGES]
    copy = tmp_path / "bot"
    shutil.copytree(BOT / "recipes", copy / "recipes", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "recipes" / "stray").mkdir()
    (copy / "recipes" / "stray" / "__init__.py").write_text('"""Never registered."""\n')
    assert unregistered(copy, PACKAGES) == ["stray"]
    assert unregistered(BOT, (*PACKAGES, "gone")) == ["gone"]


def test_no_generic_module_imports_a_fix_classs_package() -> None:
    assert {"eagle3_interface", "eagle3_enable"} <= fix_class_packages(BOT)
    assert recipe_package_imports(BOT) == []


def test_an_import_of_a_fix_classs_package_is_found(tmp_path: Path) -> None:
    """Planted in a generic module (lazily, inside a function) and in a shared recipe module."""
    copy = _planted_copy(tmp_path)
    planted = {
        copy / "publish" / "pr.py": "from bot.recipes.eagle3_interface.publish import x",
        copy / "recipes" / "grouping.py": "from .eagle3_enable import recipe",
        copy / "triage" / "tree.py": "import bot.recipes.eagle3_broken_claim.recipe",
    }
    for path, line in planted.items():
        path.write_text(path.read_text() + f"\n\ndef _planted() -> None:\n    {line}\n")
    found = recipe_package_imports(copy)
    assert len(found) == 3, found
    assert any(f.startswith("bot/recipes/grouping.py:") and "eagle3_enable" in f for f in found)


def test_no_generic_file_names_a_recipe_or_an_edit_kind() -> None:
    names = {recipe.name for recipe in RECIPES}
    kinds = edit_kinds()
    assert len(names) >= 4 and {"registry-entry", "declare-interface"} <= kinds
    files = _generic_files(BOT, TEMPLATES)
    assert BOT / "scan" / "report.py" in files and BOT / "publish" / "evidence.py" in files
    assert TEMPLATES / "sections" / "checklist.j2" in files
    recipes_named = [
        f"{path.relative_to(BOT.parent)}:{number}: {name}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for name in names
        if name in line
    ]
    assert recipes_named == []
    assert kinds_in_generic_files(BOT, TEMPLATES, kinds) == []


def test_an_edit_kind_named_in_a_generic_module_is_found(tmp_path: Path) -> None:
    copy = _planted_copy(tmp_path)
    target = copy / "publish" / "pr.py"
    target.write_text(target.read_text() + '\n\nPLANTED = {"kind": "registry-entry"}\n')
    assert kinds_in_generic_files(copy, TEMPLATES, edit_kinds()) == [
        f"bot/publish/pr.py:{len(target.read_text().splitlines())}: registry-entry"
    ]


def _protocol_members() -> set[str]:
    names: set[str] = set()
    for protocol in (Recipe, FixingRecipe):
        names |= set(protocol.__annotations__)
        names |= {n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")}
    return names


def test_no_generic_module_probes_a_recipe_with_getattr() -> None:
    members = _protocol_members()
    assert {"required_checks", "smoke", "explain", "publish_rules", "group_key"} <= members
    probes = []
    for path in _generic_files(BOT, TEMPLATES):
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


def protocol_breaks(recipe: object) -> list[str]:
    """How ``recipe`` fails the protocol generic code reads it through: not derived from it (so
    a member it leaves out is missing), a protocol method overridden with other parameters, or
    a protocol attribute of another type."""
    cls = type(recipe)
    if Recipe not in cls.__mro__:
        return [f"{cls.__name__} does not derive from Recipe"]
    found = []
    for name, member in vars(Recipe).items():
        mine = getattr(cls, name, None)
        if name.startswith("_") or not inspect.isfunction(member) or mine is member:
            continue
        wanted = list(inspect.signature(member).parameters)
        if not inspect.isfunction(mine) or list(inspect.signature(mine).parameters) != wanted:
            found.append(f"{cls.__name__}.{name} does not take {', '.join(wanted)}")
    kinds = {"name": str, "description": str, "engine_gated": bool, "replication": str}
    kinds |= {"required_checks": tuple, "required_edit_kinds": tuple}
    for name, kind in kinds.items():
        if not isinstance(getattr(recipe, name), kind):
            found.append(f"{cls.__name__}.{name} is not a {kind.__name__}")
    evidence = recipe.evidence_type  # type: ignore[attr-defined]
    if not (isinstance(evidence, type) and issubclass(evidence, Evidence)):
        found.append(f"{cls.__name__}.evidence_type is not an Evidence record")
    return found


def test_every_registered_recipe_keeps_the_protocol() -> None:
    """A recipe class derives from the protocol and overrides its members as declared, so
    generic code may call each member of any recipe."""
    for recipe in RECIPES:
        assert protocol_breaks(recipe) == [], recipe.name


def test_a_recipe_that_breaks_the_protocol_is_found() -> None:
    class DuckTyped:
        name, description = "duck", "not derived"

    class WrongExplain(Recipe):
        name, description = "wrong", "explain without its context"

        def explain(self, wanted: str) -> str | None:  # type: ignore[override]
            return None

    class WrongChecks(Recipe):
        name, description = "checks", "a string where a tuple belongs"
        required_checks = "smoke"  # type: ignore[assignment]

    assert protocol_breaks(DuckTyped()) == ["DuckTyped does not derive from Recipe"]
    assert protocol_breaks(WrongExplain()) == [
        "WrongExplain.explain does not take self, wanted, ctx"
    ]
    assert protocol_breaks(WrongChecks()) == ["WrongChecks.required_checks is not a tuple"]
