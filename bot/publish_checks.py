"""What the privileged half re-derives instead of trusting the plan artifact.

``bot publish`` holds the write token; the plan directory was written by a job that ran
upstream code. So before anything is pushed: every field that reaches git or GitHub is
validated (identifiers, single-line commit text without trailers or @mentions, the configured
upstream), the patch is the one verification saw (its hash), and the commit's tree changes only
the files the plan's edits declare, only inside the spans the recipe may touch (the same span
rules as ``bot propose``, from :mod:`bot.codemods.safety`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

from bot.codemods.base import CodemodRefused
from bot.codemods.regression_test import (
    INTERFACES_MODULE,
    REGISTRY_TEST_FUNCTION,
    advertises_test_name,
)
from bot.codemods.safety import (
    LineRange,
    changed_lines_confined,
    class_header_span,
    import_region_span,
    top_level_span,
)
from bot.config import GitHubSettings
from bot.content_hash import patch_hash, review_hash
from bot.errors import BotError
from bot.plan import READY, PlanDir
from bot.registry_plan import DICT_NAME as REGISTRY_DICT
from bot.registry_plan import REGISTRY_FILE

INTERFACE = "SupportsEagle3"

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
_RECIPE = re.compile(r"^[a-z0-9][a-z0-9-]{0,49}$")
_FINGERPRINT = re.compile(r"^[A-Za-z0-9_.:@-]{1,200}$")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")
# A line git (or GitHub) would read as a trailer: "Token: value" / "Token #value".
_TRAILER_LIKE = re.compile(r"^\s*[A-Za-z0-9][A-Za-z0-9-]*\s*(:|\s#)")
_TRAILER_WORD = re.compile(r"(?i)[a-z0-9]-by\s*:|co-authored|signed-off|change-id\s*:")
_MODEL_FILE = re.compile(r"^vllm/(?:model_executor/models|models)/(?:[A-Za-z0-9_]+/)*\w+\.py$")
_TEST_FILE = re.compile(r"^tests/models/(?:[A-Za-z0-9_]+/)*\w+\.py$")
# pr.md's body outside code: no @mention, no trailer, no closing keyword for another issue.
_FENCED = re.compile(r"(?ms)^[ ]{0,3}(`{3,}|~{3,}).*?^[ ]{0,3}\1[`~]*[ \t]*$")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_QUESTION_MENTION = re.compile(r"(?<![\w.+-])@[A-Za-z0-9]")
_MENTION = re.compile(r"(?<![\w`/.+-])@[A-Za-z0-9]")
_CLOSES = re.compile(
    r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b[\s:]*((?:[\w.-]+/[\w.-]+)?#\d+)"
)


# --- fields ---------------------------------------------------------------------------------


def commit_text(value: object, field: str, limit: int = 300) -> str:
    """``value`` if it may go into a commit message as one line of prose, else a BotError."""
    if not isinstance(value, str) or not value.strip():
        raise BotError(f"the plan's {field} is empty or not text")
    text = value.strip()
    problem = None
    if len(text) > limit:
        problem = f"longer than {limit} characters"
    elif not text.isprintable():  # newlines, control and bidi-override characters
        problem = "not a single line of printable text"
    elif "@" in text:
        problem = "an @mention"
    elif _TRAILER_LIKE.match(text) or _TRAILER_WORD.search(text):
        problem = "trailer-looking text"
    if problem:
        raise BotError(f"the plan's {field} holds {problem}; refusing to publish it")
    return text


def identifier(value: object, field: str) -> str:
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise BotError(f"the plan's {field} is not a Python identifier")
    return value


def check_plan_fields(planned: PlanDir, settings: GitHubSettings) -> None:
    """Every plan field publish uses, validated; the upstream is the configured one."""
    plan = planned.plan
    if not _REPO.match(settings.upstream):
        raise BotError(f"BOT_UPSTREAM {settings.upstream!r} is not owner/name")
    if plan.upstream != settings.upstream:
        raise BotError(
            f"the plan was made for {plan.upstream!r}, not the configured upstream "
            f"{settings.upstream!r} (BOT_UPSTREAM); refusing to publish it"
        )
    if plan.issue_number is not None and (
        isinstance(plan.issue_number, bool) or not 0 < plan.issue_number < 10**9
    ):
        raise BotError("the plan's issue_number is not a positive issue number")
    if plan.class_name is not None:
        identifier(plan.class_name, "class_name")
    # Questions are posted with backticks escaped, so an @ anywhere would ping someone.
    if any(_QUESTION_MENTION.search(str(q)) for q in plan.questions or []):
        raise BotError("a question in the plan holds an @mention; refusing to post it")
    if plan.status != READY:
        return
    if not isinstance(plan.recipe, str) or not _RECIPE.match(plan.recipe):
        raise BotError("the plan's recipe is not a recipe name")
    identifier(plan.class_name, "class_name")
    if not isinstance(plan.fingerprint, str) or not _FINGERPRINT.match(plan.fingerprint):
        raise BotError("the plan's fingerprint is not a bot fingerprint")
    pull_request_title(planned)
    commit_text(plan.reason, "reason")
    check_pr_body(planned)


def check_pr_body(planned: PlanDir) -> None:
    """pr.md's body becomes the PR's description (and, on a squash merge, part of the
    commit): outside code it may not ping anyone, carry a trailer, or close another issue."""
    prose = _CODE_SPAN.sub("", _FENCED.sub("", planned.pr_body))
    problem = None
    if _MENTION.search(prose):
        problem = "an @mention"
    elif any(_TRAILER_WORD.search(line) for line in prose.splitlines()):
        problem = "trailer-looking text"
    else:
        allowed = f"#{planned.plan.issue_number}" if planned.plan.issue_number else None
        closes = [ref for ref in _CLOSES.findall(prose) if ref != allowed]
        if closes:
            problem = f"a closing keyword for {closes[0][:60]}"
    if problem:
        raise BotError(f"pr.md's body holds {problem} outside code; refusing to publish it")


def pull_request_title(planned: PlanDir) -> str:
    """The one title of the PR and the commit: pr.md's first line, the plan's title if it has
    one (they must agree), validated as commit text."""
    plan_title, pr_title = planned.plan.title, planned.pr_title.strip()
    title = commit_text(plan_title if plan_title is not None else pr_title, "title", limit=120)
    if pr_title and title != pr_title:
        raise BotError("pr.md's title is not the plan's title; re-run `bot propose`")
    return title


def check_hashes(planned: PlanDir, approved_hash: str | None) -> None:
    """The patch is the one verification checked; with ``approved_hash``, the bytes a
    maintainer reviewed (patch.diff and pr.md)."""
    verification = planned.plan.verification
    verified = verification.get("patch_hash") if isinstance(verification, dict) else None
    if not verified:
        raise BotError("the plan has not been verified: run `bot verify PLAN_DIR` first")
    if verified != patch_hash(planned.patch):
        raise BotError("patch.diff is not the patch that was verified; run `bot verify` again")
    if approved_hash is not None and approved_hash != review_hash(
        planned.patch, planned.pr_markdown
    ):
        raise BotError("the plan is not what the maintainer approved; review it again")


def commit_message(planned: PlanDir, git_name: str, git_email: str) -> str:
    """The commit message, only from validated fields: title, reason, issue number, DCO."""
    plan = planned.plan
    title = pull_request_title(planned)
    reason = commit_text(plan.reason, "reason")
    name = commit_text(git_name, "commit author name (BOT_GIT_NAME)", limit=100)
    if not re.fullmatch(r"[A-Za-z0-9._+-]+@[A-Za-z0-9.-]+", git_email):
        raise BotError("BOT_GIT_EMAIL is not an e-mail address")
    lines = [title, "", reason, ""]
    if plan.issue_number:
        lines += [f"Fixes #{int(plan.issue_number)}", ""]
    lines.append(f"Signed-off-by: {name} <{git_email}>")
    return "\n".join(lines) + "\n"


# --- confinement ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FileChange:
    """One path the commit's tree changes, as git sees it (base tree -> new tree)."""

    path: str
    status: str  # git diff-tree's letter: M, A, D, R, T, ...
    old_mode: str
    new_mode: str
    before: bytes
    after: bytes


def check_confined(planned: PlanDir, changes: list[FileChange]) -> None:
    """Refuse unless the tree changes exactly the declared files, each inside its spans."""
    plan = planned.plan
    declared: dict[str, str] = {}
    for edit in plan.edits:
        path, kind = edit.get("path"), edit.get("kind")
        if not isinstance(path, str) or kind not in _RULES or path in declared:
            raise BotError(f"the plan declares an edit publish cannot check: {path!r} ({kind!r})")
        declared[path] = kind
    changed = {c.path for c in changes}
    extra = sorted(changed - set(declared))
    if extra:
        raise BotError(f"the patch changes {extra[0]}, which the plan's edits do not declare")
    missing = sorted(set(declared) - changed)
    if missing:
        raise BotError(f"the plan declares an edit of {missing[0]} the patch does not make")
    class_name = identifier(plan.class_name, "class_name")
    for change in changes:
        before, after = _texts(change)
        try:
            _RULES[declared[change.path]](change.path, before, after, class_name)
        except (CodemodRefused, SyntaxError, ValueError) as exc:
            detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise BotError(f"{change.path}: {detail}; refusing to publish") from None


def _texts(change: FileChange) -> tuple[str, str]:
    if change.status != "M" or change.old_mode != "100644" or change.new_mode != "100644":
        raise BotError(
            f"the patch adds, deletes, renames or changes the mode of {change.path}; "
            "the bot only edits existing files"
        )
    try:
        before, after = change.before.decode("utf-8"), change.after.decode("utf-8")
    except UnicodeDecodeError:
        raise BotError(f"{change.path} is not UTF-8 text after the patch") from None
    if "\0" in before or "\0" in after:
        raise BotError(f"{change.path} is binary; the bot only edits Python source")
    return before, after


def _declare_interface(path: str, before: str, after: str, class_name: str) -> None:
    if not _MODEL_FILE.match(path):
        raise CodemodRefused("not a model file; the interface is declared in model files only")
    spans = [import_region_span(before), class_header_span(before, class_name)]
    changed_lines_confined(before, after, spans)
    _only_new_imports(before, after, {INTERFACE: _from_interfaces})
    old, new = _class(before, class_name), _class(after, class_name)
    same_class = (
        _dump(old.body) == _dump(new.body)
        and _dump(old.decorator_list) == _dump(new.decorator_list)
        and _dump(old.keywords) == _dump(new.keywords)
    )
    added = ast.Name(INTERFACE, ast.Load())
    if not same_class or _dump(new.bases) != _dump([*old.bases, added]):
        raise CodemodRefused(f"the change to {class_name} is more than adding {INTERFACE}")
    _same_other_statements(before, after, allowed={class_name: ast.ClassDef})


def _registry_entry(path: str, before: str, after: str, class_name: str) -> None:
    if path != REGISTRY_FILE:
        raise CodemodRefused(f"registry entries go into {REGISTRY_FILE} only")
    changed_lines_confined(before, after, [top_level_span(before, REGISTRY_DICT)])
    _same_other_statements(before, after, allowed={REGISTRY_DICT: (ast.Assign, ast.AnnAssign)})
    _only_one_new_literal_entry(before, after)


def _regression_test(path: str, before: str, after: str, class_name: str) -> None:
    if not _TEST_FILE.match(path):
        raise CodemodRefused("regression tests go under tests/models only")
    names = {advertises_test_name(class_name), REGISTRY_TEST_FUNCTION}
    spans = [import_region_span(before), *_statement_gaps(before)]
    module = ast.parse(before)
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            spans.append(top_level_span(before, node.name))
    changed_lines_confined(before, after, spans)
    _only_new_imports(before, after, {"supports_eagle3": _from_interfaces, class_name: _from_vllm})
    _same_other_statements(before, after, allowed=dict.fromkeys(names, ast.FunctionDef))
    old_functions = _functions(before)
    for name, function in _functions(after).items():
        if name in names and _dump(function) != _dump(old_functions.get(name, [])):
            _check_test_function(function, old_functions.get(name), class_name)


def _functions(source: str) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}


def _check_test_function(
    function: ast.FunctionDef, existing: ast.FunctionDef | None, class_name: str
) -> None:
    """A new or extended regression test is exactly what the codemod writes: the same body
    as before (or the codemod's), parametrized over a plain list of architecture names."""
    if function.name == advertises_test_name(class_name):
        text = f"def {function.name}():\n    assert supports_eagle3({class_name})\n"
    else:
        listed = ", ".join(f'"{arch}"' for arch in _parametrized_archs(function))
        text = (
            f'@pytest.mark.parametrize("model_arch", [{listed}])\n'
            f"def {function.name}(model_arch):\n"
            "    model_cls = ModelRegistry._try_load_model_cls(model_arch)\n"
            "    assert model_cls is not None\n"
            "    assert supports_eagle3(model_cls)\n"
        )
    expected = ast.parse(text).body[0]
    assert isinstance(expected, ast.FunctionDef)
    if existing is not None:  # upstream's own test: keep its body, only the list may grow
        expected.body, expected.args = existing.body, existing.args
    if _dump(function) != _dump(expected):
        raise CodemodRefused(f"{function.name} is not the regression test the recipe writes")


def _parametrized_archs(function: ast.FunctionDef) -> list[str]:
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Call) and len(decorator.args) == 2:
            listed = decorator.args[1]
            names = [e.value for e in getattr(listed, "elts", []) if isinstance(e, ast.Constant)]
            if (
                isinstance(listed, ast.List)
                and len(names) == len(listed.elts)
                and all(isinstance(n, str) and _IDENTIFIER.match(n) for n in names)
            ):
                return names
    raise CodemodRefused(f"{function.name} is not parametrized over architecture names")


_RULES: dict[str, Callable[[str, str, str, str], None]] = {
    "declare-interface": _declare_interface,
    "registry-entry": _registry_entry,
    "regression-test": _regression_test,
}


def _statement_gaps(source: str) -> list[LineRange]:
    """The blank stretch after each top-level statement: where a new test function goes.

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


def _dump(node: object) -> str:
    if isinstance(node, list):
        return "[" + ",".join(_dump(n) for n in node) + "]"
    assert isinstance(node, ast.AST)
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def _class(source: str, name: str) -> ast.ClassDef:
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise CodemodRefused(f"no module-level class {name}")


def _imported(source: str) -> set[tuple[str, str, str | None]]:
    found = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            found |= {(module, a.name, a.asname) for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {("", a.name, a.asname) for a in node.names}
    return found


def _from_interfaces(module: str) -> bool:
    return module in (".interfaces", INTERFACES_MODULE)


def _from_vllm(module: str) -> bool:
    return module.startswith("vllm.")


def _only_new_imports(before: str, after: str, allowed: dict[str, Callable[[str], bool]]) -> None:
    """The patch adds only ``allowed`` names (each from a module its predicate accepts)."""
    old, new = _imported(before), _imported(after)
    if old - new:
        raise CodemodRefused("the patch removes an import")
    for module, name, alias in sorted(new - old, key=str):
        from_ok = allowed.get(name)
        if alias is not None or from_ok is None or not from_ok(module):
            raise CodemodRefused(f"the patch imports {name} from {module or 'a module'}")


def _same_other_statements(
    before: str, after: str, allowed: dict[str, type[ast.stmt] | tuple[type[ast.stmt], ...]]
) -> None:
    """Every top-level statement other than imports and the ``allowed`` definitions (each
    of its own kind, at most once) is unchanged: an assignment or a second, shadowed
    definition under an allowed name would run code at import."""

    def others(source: str) -> tuple[list[str], list[str]]:
        kept, defined = [], []
        for node in ast.parse(source).body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = _names(node)
            name = next(iter(names)) if len(names) == 1 else None
            if name in allowed and isinstance(node, allowed[name]):
                defined.append(name)
                continue
            kept.append(_dump(node))
        return kept, defined

    old, _ = others(before)
    new, defined = others(after)
    if old != new or len(defined) != len(set(defined)):
        raise CodemodRefused("the patch changes a statement outside the declared edit")


def _only_one_new_literal_entry(before: str, after: str) -> None:
    """The registry dict gains exactly one ``"Key": Callee(literal, ..., name=literal)``
    entry, with the callee of its existing entries; every existing entry is unchanged, and
    ``trust_remote_code`` is on only if upstream's own entry for the same checkpoint has it."""
    old, new = _registry_entries(before), _registry_entries(after)
    added = [key for key in new if key not in old]
    if len(new) != len(old) + 1 or len(added) != 1:
        raise CodemodRefused("the registry edit is not exactly one new registry entry")
    if any(new[key] != value for key, value in old.items()):
        raise CodemodRefused("the registry edit changes an existing registry entry")
    value = _registry_values(after)[added[0]]
    callees = {_dump(v.func) for v in _registry_values(before).values() if isinstance(v, ast.Call)}
    if not isinstance(value, ast.Call) or _dump(value.func) not in callees:
        raise CodemodRefused("the new registry entry is not a call like its siblings")
    arguments = [*value.args, *(k.value for k in value.keywords)]
    names = [k.arg for k in value.keywords]
    if None in names or len(names) != len(set(names)) or not all(map(_literal, arguments)):
        raise CodemodRefused("the new registry entry has an argument that is not a literal")
    if _trusts_remote_code(value) and not any(
        _trusts_remote_code(call) and _first_arg(call) == _first_arg(value) is not None
        for call in ast.walk(ast.parse(before))
        if isinstance(call, ast.Call)
    ):
        raise CodemodRefused(
            "the new registry entry sets trust_remote_code, which upstream's own entry for "
            "its checkpoint does not"
        )


def _registry_values(source: str) -> dict[str, ast.expr]:
    for node in ast.parse(source).body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if REGISTRY_DICT in _names(node) and isinstance(value, ast.Dict):
            keys = [k.value if isinstance(k, ast.Constant) else None for k in value.keys]
            if not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
                raise CodemodRefused(f"{REGISTRY_DICT} has a key that is not a plain string")
            return dict(zip(keys, value.values, strict=True))  # type: ignore[arg-type]
    raise CodemodRefused(f"no module-level dict literal {REGISTRY_DICT}")


def _registry_entries(source: str) -> dict[str, str]:
    return {key: _dump(value) for key, value in _registry_values(source).items()}


def _literal(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and not isinstance(node.value, bytes)


def _trusts_remote_code(call: ast.Call) -> bool:
    return any(
        k.arg == "trust_remote_code"
        and not (isinstance(k.value, ast.Constant) and k.value.value is False)
        for k in call.keywords
    )


def _first_arg(call: ast.Call) -> object:
    first = call.args[0] if call.args else None
    return first.value if isinstance(first, ast.Constant) else None


def _names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()
