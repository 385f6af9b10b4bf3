"""Building blocks for a recipe's publish-time rules (what ``bot publish`` re-checks).

``bot publish`` holds the write token and trusts nothing in the plan artifact: for each file the
commit changes, it calls the rule the plan's recipe registers for that edit kind
(``recipe.publish_rules[kind]``) with the base text and the patched text. A rule re-resolves
the recipe's own spans on the base text and checks the change's meaning (which names are
imported, which statements change, which code is added), or re-applies the recipe's own
codemods on the base text and requires the patched file to be the result; it raises
:class:`~bot.codemods.base.CodemodRefused` to refuse. The helpers here compare Python source by
its AST, so formatting does not matter and anything else does.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable, Iterable, Sequence

from bot.codemods.base import CodemodRefused
from bot.codemods.safety import LineRange, changed_lines_confined
from bot.codemods.spans import Span, resolve

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
MODEL_FILE = re.compile(r"^vllm/(?:model_executor/models|models)/(?:[A-Za-z0-9_]+/)*\w+\.py$")
TEST_FILE = re.compile(r"^tests/models/(?:[A-Za-z0-9_]+/)*\w+\.py$")


def confined(
    before: str, after: str, spans: Sequence[Span], extra: Sequence[LineRange] = ()
) -> None:
    """The changed lines lie inside ``spans`` resolved on the base text (as propose does)."""
    changed_lines_confined(before, after, [*resolve(tuple(spans), before), *extra])


def require_written_file(after: str, expected: str, what: str) -> None:
    """A new file's text is ``expected`` (the recipe's own), compared by its AST."""
    if dump(ast.parse(after)) != dump(ast.parse(expected)):
        raise CodemodRefused(f"the {what} is not the one the recipe writes")


def require_recipe_edit(after: str, expected: str) -> None:
    """The patched file is ``expected`` (the recipe's own codemods re-applied on the base text),
    by AST; a refusal names the first top-level statement that differs and shows the line."""
    got, wanted = ast.parse(after).body, ast.parse(expected).body
    for index in range(max(len(got), len(wanted))):
        new = got[index] if index < len(got) else None
        old = wanted[index] if index < len(wanted) else None
        if new is None or old is None or dump(new) != dump(old):
            break
    else:
        return
    node = new if new is not None else old
    assert node is not None
    apart = _first_line_apart(old, new)
    if isinstance(node, ast.Import | ast.ImportFrom):
        raise CodemodRefused(f"the change to the imports is not the edit the recipe makes: {apart}")
    named = sorted(names(node))
    if not named:
        raise CodemodRefused(f"the patch changes a statement outside the declared edit: {apart}")
    raise CodemodRefused(f"the change to {named[0]} is not the edit the recipe makes: {apart}")


def _first_line_apart(wanted: ast.stmt | None, got: ast.stmt | None) -> str:
    expected = [line for line in ast.unparse(wanted).splitlines() if line] if wanted else []
    patched = [line for line in ast.unparse(got).splitlines() if line] if got else []
    matcher = difflib.SequenceMatcher(a=expected, b=patched, autojunk=False)
    apart = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    if not apart:  # the same text, a different tree (a type comment): nothing short to show
        return "the two differ in what Python parses, not in their text"
    _, i1, i2, j1, j2 = apart[0]
    shown = [f"expected {_quoted(expected[i1:i2])}", f"the patch has {_quoted(patched[j1:j2])}"]
    return ", ".join(shown)


def _quoted(lines: list[str]) -> str:
    if not lines:
        return "nothing"
    line = lines[0].strip()
    return f"`{line[:60]}`" + (" ..." if len(lines) > 1 or len(line) > 60 else "")


def dump(node: object) -> str:
    """An AST (or a list of them) as text without positions: equal exactly when the code is."""
    if isinstance(node, list):
        return "[" + ",".join(dump(n) for n in node) + "]"
    assert isinstance(node, ast.AST)
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def module_class(source: str, name: str) -> ast.ClassDef:
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise CodemodRefused(f"no module-level class {name}")


def functions(source: str) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}


def imported(source: str) -> set[tuple[str, str, str | None]]:
    found = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            found |= {(module, a.name, a.asname) for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {("", a.name, a.asname) for a in node.names}
    return found


def only_new_imports(before: str, after: str, allowed: dict[str, Callable[[str], bool]]) -> None:
    """The patch adds only ``allowed`` names (each from a module its predicate accepts)."""
    old, new = imported(before), imported(after)
    if old - new:
        raise CodemodRefused("the patch removes an import")
    for module, name, alias in sorted(new - old, key=str):
        from_ok = allowed.get(name)
        if alias is not None or from_ok is None or not from_ok(module):
            raise CodemodRefused(f"the patch imports {name} from {module or 'a module'}")


def require_bound(source: str, used: Iterable[str]) -> None:
    """Each name in ``used`` (a base or a helper the patch adds) is bound at module level:
    imported, or defined there. A declaration without its import fails at import time."""
    tree = ast.parse(source)
    bound = {alias or name.split(".")[0] for _, name, alias in imported(source)}
    bound |= {name for node in tree.body for name in names(node)}
    for name in used:
        if name not in bound:
            raise CodemodRefused(f"the patch uses {name}, which is not imported")


StatementKind = type[ast.stmt] | tuple[type[ast.stmt], ...]


def same_other_statements(before: str, after: str, allowed: dict[str, StatementKind]) -> None:
    """Every top-level statement other than imports and the ``allowed`` definitions (each of
    its own kind, at most once) is unchanged: an assignment, or a second, shadowed definition
    under an allowed name would run code at import."""

    def others(source: str) -> tuple[list[str], list[str]]:
        kept, defined = [], []
        for node in ast.parse(source).body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                continue
            found = names(node)
            name = next(iter(found)) if len(found) == 1 else None
            if name in allowed and isinstance(node, allowed[name]):
                defined.append(name)
                continue
            kept.append(dump(node))
        return kept, defined

    old, _ = others(before)
    new, defined = others(after)
    if old != new or len(defined) != len(set(defined)):
        raise CodemodRefused("the patch changes a statement outside the declared edit")


def names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def statement_gaps(source: str) -> list[LineRange]:
    """The blank stretch after each top-level statement: where a new function goes.

    A range may be empty (start > end); ``changed_lines_confined`` then allows only an
    insertion right after the statement.
    """
    body = ast.parse(source).body
    total = len(source.splitlines())
    gaps = []
    for index, node in enumerate(body):
        end = node.end_lineno or node.lineno
        following = body[index + 1] if index + 1 < len(body) else None
        if following is None:
            next_start = total + 1
        else:
            decorators = getattr(following, "decorator_list", [])
            next_start = min([following.lineno, *(d.lineno for d in decorators)])
        gaps.append((end + 1, next_start - 1))
    return gaps
