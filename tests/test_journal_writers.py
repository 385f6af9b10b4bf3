"""The journal is written in ``bot.pipeline`` only (issue 22): one place maps what a stage
returned to what the journal records.

Read from bot/'s own source with ``ast``: a method of ``Journal`` writes when its body runs an
``INSERT``, ``UPDATE`` or ``DELETE`` (or calls a method that does); a module that imports the
store and calls one of those methods by name is a writer. The exceptions are named, each with
the one reason it may write.
"""

from __future__ import annotations

import ast
from pathlib import Path

import bot

BOT = Path(bot.__file__).parent
STORE = "bot.journal.store"
# Module -> the writes it may make itself, and why.
ALLOWED: dict[str, frozenset[str] | None] = {
    STORE: None,  # the journal itself
    "bot.pipeline": None,  # the flow: every stage's result reaches the journal here
    # Rebuilding the journal from GitHub's markers is what `bot sync` is for; so is recording
    # a maintainer's request ticked on the dashboard issue, where sync reads the tick.
    "bot.journal.sync": frozenset({"import_published", "record_pr", "add_event", "record_request"}),
    # A maintainer's claim on a proposal (approve, reject, re-verify) is the review itself,
    # made atomically where it is asked for; what publishing returned is pipeline's to record.
    "bot.dashboard.actions": frozenset({"claim", "add_event"}),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(BOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _journal_class(tree: ast.Module) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Journal")


def journal_writes(store_source: str) -> frozenset[str]:
    """The public methods of ``Journal`` that write, directly or through another method."""
    methods = {
        n.name: n
        for n in _journal_class(ast.parse(store_source)).body
        if isinstance(n, ast.FunctionDef)
    }

    def sql_writes(method: ast.FunctionDef) -> bool:
        return any(
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and n.value.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
            for n in ast.walk(method)
        )

    def calls(method: ast.FunctionDef) -> set[str]:
        return {
            n.func.attr
            for n in ast.walk(method)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name)
            and n.func.value.id == "self"
        }

    writing = {name for name, method in methods.items() if sql_writes(method)}
    while True:
        more = {name for name, m in methods.items() if calls(m) & writing} - writing
        if not more:
            break
        writing |= more
    return frozenset(name for name in writing if not name.startswith("_"))


def _imports_store(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == STORE:
            return True
        from_bot = isinstance(node, ast.ImportFrom) and node.module == "bot.journal"
        if from_bot and any(alias.name == "store" for alias in node.names):
            return True
        if isinstance(node, ast.Import) and any(a.name == STORE for a in node.names):
            return True
    return False


def journal_writers() -> dict[str, set[str]]:
    """Each module of bot/ that writes the journal beyond what it is allowed: those methods."""
    writes = journal_writes((BOT / "journal" / "store.py").read_text(encoding="utf-8"))
    found: dict[str, set[str]] = {}
    for path in sorted(BOT.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if not _imports_store(tree):
            continue
        called = {
            n.func.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in writes
        }
        allowed = ALLOWED.get(module, frozenset())
        extra = set() if allowed is None else called - allowed
        if extra:
            found[module] = extra
    return found


def test_the_journal_write_methods_are_read_from_the_store() -> None:
    writes = journal_writes((BOT / "journal" / "store.py").read_text(encoding="utf-8"))
    assert {"record_findings", "record_proposal", "record_verification", "record_pr"} <= writes
    assert {"claim", "add_event", "import_published", "record_triaged_issue"} <= writes
    assert not {"proposals", "findings", "summary", "materialise"} & writes


def test_only_the_pipeline_writes_the_journal() -> None:
    assert journal_writers() == {}
