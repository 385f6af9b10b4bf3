"""The publish half never imports propose, triage or verify's runners (issue 22's rule).

`bot publish` holds the write token, and what it can run is what it imports. The rule is read
from bot/'s own source with ``ast``: every import counts, at module level or inside a function
(a lazy import runs all the same), and importing ``a.b.c`` runs the packages ``a`` and ``a.b``
too. From every module of the ``bot/publish/`` package (and the package itself) no chain of
imports may reach the ``bot/propose/`` package or one of its modules, ``bot/pipeline.py``, the
``bot/triage/`` package or one of its modules, or one of verify's runners: a module under
``bot/verify/`` that starts processes (imports ``subprocess``, or the bot's sandboxed runner).
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import bot

BOT = Path(bot.__file__).parent
PROCESS_STARTERS = frozenset({"subprocess", "bot.subprocess_env", "bot.sandbox"})


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(module: str, is_package: bool, tree: ast.Module) -> set[str]:
    """Every module name an import statement anywhere in ``tree`` names (``from x import y``
    names ``x`` and ``x.y``, which is a module when such a file exists)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{node.module}" if node.module else package
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _lazy_exports(tree: ast.Module) -> dict[str, str]:
    """A package's ``_EXPORTS = {"name": "module"}``: what its ``__getattr__`` imports."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and [ast.unparse(t) for t in node.targets] == ["_EXPORTS"]
            and isinstance(node.value, ast.Dict)
        ):
            return {
                key.value: value.value
                for key, value in zip(node.value.keys, node.value.values, strict=True)
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant)
            }
    return {}


def import_graph(root: Path) -> dict[str, set[str]]:
    """For each module of the package at ``root``, the modules of the package (and the outside
    names) that importing it runs directly."""
    files = {_module_name(root, p): p for p in sorted(root.rglob("*.py"))}
    trees = {module: ast.parse(path.read_text()) for module, path in files.items()}
    lazy = {module: _lazy_exports(tree) for module, tree in trees.items()}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        named = _imported(module, path.name == "__init__.py", trees[module])
        # `from package import name`, where the package loads `name` on first use.
        named |= {
            lazy[parent][attr]
            for parent, _, attr in (n.rpartition(".") for n in named)
            if attr in lazy.get(parent, {})
        }
        runs: set[str] = set()
        for name in named:
            parts = name.split(".")
            for end in range(1, len(parts) + 1):  # a.b.c runs a, a.b and a.b.c
                prefix = ".".join(parts[:end])
                if prefix in files or end == len(parts):
                    runs.add(prefix)
        runs.discard(module)
        # A package's submodule runs the package's __init__ first.
        parent = module.rpartition(".")[0]
        if parent in files:
            runs.add(parent)
        graph[module] = runs
    return graph


def _in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def _forbidden(graph: dict[str, set[str]], package: str) -> set[str]:
    stages = {
        m
        for m in graph
        if _in_package(m, f"{package}.propose") or _in_package(m, f"{package}.triage")
    }
    runners = {
        m
        for m, runs in graph.items()
        if m.startswith(f"{package}.verify.") and runs & PROCESS_STARTERS
    }
    return {f"{package}.pipeline", *stages, *runners} & set(graph)


def violations(root: Path) -> list[str]:
    """Each import chain from a publish module to a forbidden one, shortest first."""
    graph = import_graph(root)
    package = root.name
    forbidden = _forbidden(graph, package)
    publish = sorted(
        m for m in graph if _in_package(m, f"{package}.publish") and m not in forbidden
    )
    found = []
    for start in publish:
        chain = {start: [start]}
        frontier = [start]
        while frontier:
            following = []
            for module in frontier:
                for imported in sorted(graph.get(module, ())):
                    if imported in graph and imported not in chain:
                        chain[imported] = [*chain[module], imported]
                        following.append(imported)
            frontier = following
        found += [" -> ".join(chain[m]) for m in sorted(forbidden) if m in chain]
    return sorted(set(found), key=len)


def test_the_rule_knows_what_it_forbids() -> None:
    """The forbidden set is read from the tree: the propose and triage packages with their
    modules, and the verify modules that run things (the runners of today's tree among them),
    never an empty set; the publish side is the whole package."""
    forbidden = _forbidden(import_graph(BOT), "bot")
    stages = {"bot.propose", "bot.propose.proposal", "bot.propose.group"}
    stages |= {"bot.triage", "bot.triage.issue", "bot.triage.search"}
    assert stages | {"bot.pipeline", "bot.verify.run", "bot.verify.smoke"} <= forbidden
    assert "bot.publish.evidence" not in forbidden  # the gate publish reads runs nothing
    publish = {m for m in import_graph(BOT) if _in_package(m, "bot.publish")}
    assert {"bot.publish", "bot.publish.pr", "bot.publish.checks", "bot.publish.lock"} <= publish


def test_publish_never_imports_propose_triage_or_verify_runners() -> None:
    assert violations(BOT) == []


def test_a_planted_lazy_import_is_a_violation(tmp_path: Path) -> None:
    """The check on a copy of bot/ with one import planted inside a function of a module
    publish reaches (the recipes' registry): the chain to it is reported."""
    copy = Path(shutil.copytree(BOT, tmp_path / "bot"))
    target = copy / "recipes" / "publish_rules.py"
    target.write_text(
        target.read_text() + "\n\ndef _planted() -> None:\n    from bot.verify.run import x\n"
    )
    found = violations(copy)
    assert found, "the planted import went unnoticed"
    assert all("bot.recipes.publish_rules -> bot.verify.run" in chain for chain in found), found


def test_a_name_the_verify_package_loads_lazily_is_an_import(tmp_path: Path) -> None:
    """``from bot.verify import verify_plan`` runs bot.verify.run on first use: it counts."""
    copy = Path(shutil.copytree(BOT, tmp_path / "bot"))
    target = copy / "publish" / "lock.py"
    target.write_text(target.read_text() + "\n\nfrom bot.verify import verify_plan\n")
    assert "bot.publish.lock -> bot.verify.run" in violations(copy)


def test_a_planted_import_of_a_propose_module_is_a_violation(tmp_path: Path) -> None:
    """``from bot.propose import group`` in a publish module runs the propose package and its
    group module: both are reported, from that module."""
    copy = Path(shutil.copytree(BOT, tmp_path / "bot"))
    target = copy / "publish" / "checks.py"
    target.write_text(target.read_text() + "\n\nfrom bot.propose import group\n")
    found = violations(copy)
    assert "bot.publish.checks -> bot.propose" in found
    assert "bot.publish.checks -> bot.propose.group" in found
