"""The registry-entry edit every recipe that puts a model under the GPU test makes, and its
publish-time twin: the entry the patch adds must be the one re-derived on the base text."""

from __future__ import annotations

import ast

from bot.codemods.base import CodemodRefused
from bot.codemods.registry_entry import insert_registry_entry
from bot.codemods.spans import TopLevel
from bot.drafts import DraftCatalogue, load_catalogue
from bot.recipes.base import FileEdit, Finding, PublishedEdit, step
from bot.recipes.publish_rules import confined, dump, same_other_statements
from bot.recipes.publish_rules import names as names_of
from bot.recipes.registry_plan import (
    DICT_NAME,
    REGISTRY_FILE,
    RegistryEntryPlan,
    registry_entry_for,
)
from bot.tree.known_models import KnownModels, parse_test_registry


def registry_entry_edit(entry: RegistryEntryPlan) -> FileEdit:
    """Insert ``entry`` into tests/models/registry.py, confined to the registry dict."""
    return FileEdit(
        path=REGISTRY_FILE,
        kind="registry-entry",
        description=f"add {entry.key} to {DICT_NAME} (# [{entry.section}])",
        steps=(
            step(
                insert_registry_entry,
                dict_name=DICT_NAME,
                key=entry.key,
                args=entry.args,
                kwargs=entry.kwargs,
                section=entry.section,
            ),
        ),
        confined_to=(TopLevel(DICT_NAME),),
    )


# --- publish: the entry is re-derived, never taken from the patch ---------------------------


def registry_entry(edit: PublishedEdit) -> None:
    """The publish rule of the ``registry-entry`` edit: one new entry in the registry dict,
    exactly the one :func:`check_derived_entry` derives on the base text."""
    if edit.path != REGISTRY_FILE:
        raise CodemodRefused(f"registry entries go into {REGISTRY_FILE} only")
    confined(edit.before, edit.after, [TopLevel(DICT_NAME)])
    same_other_statements(edit.before, edit.after, allowed={DICT_NAME: (ast.Assign, ast.AnnAssign)})
    key, call = only_one_new_entry(edit.before, edit.after)
    check_derived_entry(edit.before, edit.after, key, call, edit.finding, edit.class_name)


def check_derived_entry(
    before: str, after: str, key: str, call: ast.Call, finding: Finding, class_name: str
) -> None:
    """Refuse unless the entry ``key: call`` that the patch adds is exactly the one
    :func:`registry_entry_for` derives on the base text (the tree's sibling entries and the
    target's own entry) from a reviewed entry of the bot's own draft catalogue (never the plan's
    ``registry_entry``, never an unreviewed Hub card), inserted where the codemod puts it."""
    named = dict(_keywords(call)).get("speculative_model")
    draft_id = named[1] if isinstance(named, tuple) else None
    if not isinstance(draft_id, str):
        raise CodemodRefused("the new registry entry names no speculative_model draft")
    archs = {class_name, *finding.architectures}
    catalogue = load_catalogue()
    reviewed = catalogue.reviewed()
    drafts = [
        e
        for e in reviewed.entries
        if e.repo_id.lower() == draft_id.lower() and e.target_arch in archs and e.available
    ]
    if not drafts:
        raise CodemodRefused(_no_reviewed_draft(draft_id, catalogue, archs))
    known = KnownModels(examples=tuple(parse_test_registry(before)), doc_examples={})
    problems = []
    for draft in drafts:
        assert draft.target_arch is not None
        expected, why = registry_entry_for(known, draft.target_arch, draft, reviewed)
        problem = why if expected is None else _difference(key, call, expected)
        if problem is None and expected is not None:
            problem = _misplaced(before, after, expected)
        if problem is None:
            return
        problems.append(problem)
    raise CodemodRefused(problems[0])


def _no_reviewed_draft(draft_id: str, catalogue: DraftCatalogue, archs: set[str]) -> str:
    named = [e for e in catalogue.entries if e.repo_id.lower() == draft_id.lower()]
    shown_id = draft_id[:100]
    if not named:
        return f"the registry entry's draft {shown_id} is not in the bot's draft catalogue"
    if not any(e.reviewed for e in named):
        return (
            f"the registry entry's draft {shown_id} is an unreviewed catalogue entry "
            f"(`bot drafts accept {shown_id}` after checking it)"
        )
    return (
        f"the registry entry's draft {shown_id} is not a reviewed, published draft for "
        f"{' or '.join(sorted(archs))}"
    )


def _keywords(call: ast.Call) -> list[tuple[str | None, object]]:
    return [(k.arg, _value(k.value)) for k in call.keywords]


def _value(node: ast.expr) -> object:
    """A literal's value tagged with its type (so ``True`` is not ``1``); None for non-literals."""
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None
    return (type(value).__name__, value)


def _difference(key: str, call: ast.Call, expected: RegistryEntryPlan) -> str | None:
    """The first field of the added entry that is not the derived one, as a refusal."""
    if key != expected.key:
        return f"the registry entry's key {key[:80]} is not {expected.key}, derived from its draft"
    args = [_value(a) for a in call.args]
    if args != [_value_of(a) for a in expected.args]:
        shown = ", ".join(repr(a[1] if isinstance(a, tuple) else a)[:80] for a in args)
        return (
            f"the registry entry's target checkpoint ({shown}) is not {expected.args[0]!r}, "
            "the reviewed draft's target"
        )
    actual = _keywords(call)
    wanted = [(name, _value_of(value)) for name, value in expected.kwargs]
    wanted_names = dict(wanted)
    for name, value in actual:
        if name not in wanted_names:
            if name == "trust_remote_code":
                return (
                    "the registry entry sets trust_remote_code, which neither its sibling "
                    "entry nor its target's own entry has"
                )
            return (
                f"the registry entry's field {name} comes from neither the tree's sibling "
                "entries nor the reviewed draft catalogue"
            )
        if value != wanted_names[name]:
            return f"the registry entry's field {name} is not the value derived for it"
    missing = [name for name, _ in wanted if name not in dict(actual)]
    if missing:
        return f"the registry entry lacks {missing[0]}, which its derivation has"
    if actual != wanted:
        return "the registry entry's fields are not in the derived order"
    return None


def _value_of(value: object) -> object:
    return (type(value).__name__, value)


def _misplaced(before: str, after: str, expected: RegistryEntryPlan) -> str | None:
    """Where the codemod puts the derived entry (after its section's last entry)."""
    try:
        placed = insert_registry_entry(
            before,
            dict_name=DICT_NAME,
            key=expected.key,
            args=expected.args,
            kwargs=expected.kwargs,
            section=expected.section,
        )
    except CodemodRefused as exc:
        return str(exc)
    if dump(ast.parse(placed)) != dump(ast.parse(after)):
        return f"the registry entry is not where the recipe puts it (# [{expected.section}])"
    return None


def only_one_new_entry(before: str, after: str) -> tuple[str, ast.Call]:
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
    callees = {dump(v.func) for v in _registry_values(before).values() if isinstance(v, ast.Call)}
    if not isinstance(value, ast.Call) or dump(value.func) not in callees:
        raise CodemodRefused("the new registry entry is not a call like its siblings")
    arguments = [*value.args, *(k.value for k in value.keywords)]
    keywords = [k.arg for k in value.keywords]
    if None in keywords or len(keywords) != len(set(keywords)) or not all(map(_literal, arguments)):
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
    return added[0], value


def _registry_values(source: str) -> dict[str, ast.expr]:
    for node in ast.parse(source).body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if DICT_NAME in names_of(node) and isinstance(value, ast.Dict):
            keys = [k.value if isinstance(k, ast.Constant) else None for k in value.keys]
            if not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
                raise CodemodRefused(f"{DICT_NAME} has a key that is not a plain string")
            return dict(zip(keys, value.values, strict=True))  # type: ignore[arg-type]
    raise CodemodRefused(f"no module-level dict literal {DICT_NAME}")


def _registry_entries(source: str) -> dict[str, str]:
    return {key: dump(value) for key, value in _registry_values(source).items()}


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
