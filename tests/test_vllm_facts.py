"""Each fact about vLLM's tree, and the bot's branch pattern, is spelled in one module of bot/.

The paths and the interfaces module's dotted name (bot/tree/layout.py), the platform packages
(layout.PLATFORMS) and the bot's branch pattern (bot/github/identity.py) are read from their
home; any other module of bot/ that writes one of them in a string (docstrings, comments and
multi-line documents aside: they describe or quote) is named here. A copy drifts: the platform
set and the branch pattern had three and four copies before.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from bot.github.identity import BOT_BRANCH
from bot.tree import layout

BOT = Path(__file__).resolve().parents[1] / "bot"
LAYOUT = "tree/layout.py"
PATHS = {
    name: getattr(layout, name)
    for name in (
        "REGISTRY_PATH",
        "INTERFACES_PATH",
        "TEST_REGISTRY_PATH",
        "REGISTRY_TEST",
        "AGENTS_RULES",
        "SPEC_DECODE_TESTS",
        "LLM_TEST_PATH",
        "TEST_AREAS",
    )
}


def _docstrings(tree: ast.Module) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))]
    return {
        id(body[0].value)
        for body in (n.body for n in nodes)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    }


def strings(source: str) -> Iterator[tuple[int, str]]:
    """Every string constant of ``source`` (f-strings' literal parts too), docstrings aside."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value


def platform_sets(source: str) -> Iterator[int]:
    """Lines of a set, tuple or list literal naming two or more of the platform packages."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Set | ast.Tuple | ast.List):
            named = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if len(named & layout.PLATFORMS) >= 2:
                yield node.lineno


def _names(text: str, path: str) -> bool:
    """Whether ``text`` writes ``path``: anywhere in it, but tests/AGENTS.md only as itself
    (the rules' own name: case titles and messages may cite the document)."""
    return text == path if path == layout.AGENTS_RULES else path in text


def respelled(root: Path) -> list[str]:
    """``file:line: NAME`` for each fact written outside its home module under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        source = path.read_text()
        for line, text in strings(source):
            if rel != LAYOUT and "\n" not in text:  # a document's text (a case's file) is not ours
                found += [f"{rel}:{line}: {n}" for n, value in PATHS.items() if _names(text, value)]
            if rel != LAYOUT and text == layout.INTERFACES_MODULE:
                found.append(f"{rel}:{line}: INTERFACES_MODULE")
            if rel != "github/identity.py" and text == BOT_BRANCH.pattern:
                found.append(f"{rel}:{line}: BOT_BRANCH")
        if rel != LAYOUT:
            found += [f"{rel}:{line}: PLATFORMS" for line in platform_sets(source)]
    return found


def test_each_vllm_fact_is_spelled_in_one_module() -> None:
    assert respelled(BOT) == []


def test_a_fact_written_again_is_named(tmp_path: Path) -> None:
    """The check finds each kind of copy: a path inside a message, the platform set, the
    branch pattern; a docstring may still say the path."""
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "layout.py").write_text((BOT / LAYOUT).read_text())
    (tmp_path / "copy.py").write_text(
        f'"""Reads {layout.TEST_AREAS}/*.yaml (a docstring may say so)."""\n'
        "import re\n"
        f'WHERE = f"no step of {layout.TEST_AREAS}/ runs {{name}}"\n'
        'KINDS = frozenset({"nvidia", "amd"})\n'
        f"MODULE = {layout.INTERFACES_MODULE!r}\n"
        f"BRANCH = re.compile(r{BOT_BRANCH.pattern!r})\n"
    )
    assert sorted(respelled(tmp_path)) == [
        "copy.py:3: TEST_AREAS",
        "copy.py:4: PLATFORMS",
        "copy.py:5: INTERFACES_MODULE",
        "copy.py:6: BOT_BRANCH",
    ]


def test_the_platform_of_a_path_or_a_module() -> None:
    assert layout.platform_of(Path("vllm/models/kimi/amd/linear.py").parts) == "amd"
    module = "vllm.models.kimi.amd.linear"
    assert layout.platform_of(module.split(".")) == "amd"
    assert layout.platform_of(Path("vllm/models/kimi/common/linear.py").parts) is None
    assert layout.platform_of(Path("vllm/model_executor/models/llama.py").parts) is None
    assert layout.platform_of(Path("vllm/models/kimi/amd").parts) is None  # the package itself
