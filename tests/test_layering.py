"""bot/'s layers: no package imports one that imports it back, and no module reaches into
another's private names.

Read from bot/'s own source with ``ast`` (every import counts, lazy ones and those under
``TYPE_CHECKING`` too). A node of the graph is a package directly under ``bot/`` (``bot.verify``)
or a top-level module (``bot.plan``); an import of any module inside a package is an edge to
that package. A value both sides of a cycle need moves down (``bot/verification.py``,
``bot/confinement.py``, ``bot/triage_outcome.py``, ``bot/gitrepo.py``), never up.

Each rule is also run on a copy of bot/ with one violation planted, which it must report.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import bot

BOT = Path(bot.__file__).parent


def _modules(root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(module: str, path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names taken from it) of every import in the module."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            found.append((node.lineno, base, [alias.name for alias in node.names]))
    return found


def _node(module: str, root: Path) -> str:
    """The graph node of ``module``: its package directly under bot/, or itself."""
    parts = module.split(".")
    if len(parts) > 1 and (root / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def package_graph(root: Path) -> dict[str, dict[str, str]]:
    """node -> {node it imports: one import that makes the edge, as ``path:line``}."""
    modules = _modules(root)
    name = root.name
    graph: dict[str, dict[str, str]] = {_node(m, root): {} for m in modules}
    for module, path in modules.items():
        for line, imported, names in _imports(module, path):
            targets = [imported, *(f"{imported}.{n}" for n in names)]
            for target in targets:
                if target.split(".")[0] != name or target not in modules:
                    continue
                here, there = _node(module, root), _node(target, root)
                if here != there:
                    where = f"{path.relative_to(root.parent)}:{line}"
                    graph[here].setdefault(there, where)
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The shortest cycle through each node on one that no earlier cycle passed through (the
    start repeated at the end)."""
    found: list[list[str]] = []
    covered: set[str] = set()
    for start in sorted(graph):
        if start in covered:
            continue
        paths = {start: [start]}
        frontier = [start]
        cycle = None
        while frontier and cycle is None:
            following = []
            for node in frontier:
                for nxt in sorted(graph.get(node, {})):
                    if nxt == start and cycle is None:
                        cycle = [*paths[node], start]
                    elif nxt not in paths:
                        paths[nxt] = [*paths[node], nxt]
                        following.append(nxt)
            frontier = following
        if cycle is not None:
            found.append(cycle)
            covered.update(cycle)
    return found


def private_imports(root: Path) -> list[str]:
    """Each ``from a.b import _name`` of a module's private name from another module of the
    package (the harness scripts, run as top-level modules, import each other by file name)."""
    found = []
    modules = _modules(root)
    for module, path in modules.items():
        for line, imported, names in _imports(module, path):
            ours = imported in modules or (path.parent / f"{imported}.py").is_file()
            if imported == module or not ours:
                continue
            for name in names:
                if name.startswith("_") and not name.startswith("__"):
                    found.append(f"{path.relative_to(root.parent)}:{line}: {imported}.{name}")
    return found


def _copy(tmp_path: Path) -> Path:
    return Path(
        shutil.copytree(BOT, tmp_path / "bot", ignore=shutil.ignore_patterns("__pycache__"))
    )


def test_no_package_imports_one_that_imports_it_back() -> None:
    graph = package_graph(BOT)
    assert {"bot.plan", "bot.verify", "bot.publish", "bot.recipes", "bot.journal"} <= set(graph)
    assert "bot.verification" in graph["bot.plan"] and "bot.plan" in graph["bot.verify"]
    described = [
        " -> ".join(f"{a} ({graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False))
        for cycle in cycles(graph)
    ]
    assert described == []


def test_a_planted_import_back_is_a_cycle(tmp_path: Path) -> None:
    """Verify imports the publish package (the results block, the evidence gate); publish
    importing the verify package (lazily) closes a cycle."""
    copy = _copy(tmp_path)
    lock = copy / "publish" / "lock.py"
    lock.write_text(lock.read_text() + "\n\ndef _p() -> None:\n    from bot.verify import run\n")
    found = cycles(package_graph(copy))
    assert ["bot.publish", "bot.verify", "bot.publish"] in found, found


def test_no_module_imports_anothers_private_name() -> None:
    assert private_imports(BOT) == []


def test_a_planted_private_import_is_found(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    target = copy / "publish" / "lock.py"
    target.write_text(target.read_text() + "\nfrom bot.github.git import _planted\n")
    line = len(target.read_text().splitlines())
    assert private_imports(copy) == [f"bot/publish/lock.py:{line}: bot.github.git._planted"]
