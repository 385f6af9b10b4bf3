"""Confinement: a commit changes exactly the files a plan's edits declare, each only as the
plan's recipe allows for that edit kind (``recipe.publish_rules``: the recipe's own spans
re-resolved on the base text, and what the change means; see :mod:`bot.recipes.publish_rules`).

``bot publish`` checks the tree it is about to commit (:mod:`bot.github.git` hands it the
changes as git sees them); ``bot verify`` checks the patch before any upstream code runs
(:mod:`bot.verify.confine`). Its own module, below both, so neither imports the other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from bot.codemods.base import CodemodRefused
from bot.errors import BotError
from bot.plan import Member, PlanDir
from bot.recipes.base import BaseTree, PublishedEdit, PublishRule

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")


def identifier(value: object, field: str) -> str:
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise BotError(f"the plan's {field} is not a Python identifier")
    return value


@dataclass(frozen=True)
class FileChange:
    """One path the commit's tree changes, as git sees it (base tree -> new tree)."""

    path: str
    status: str  # git diff-tree's letter: M, A, D, R, T, ...
    old_mode: str
    new_mode: str
    before: bytes
    after: bytes
    base: BaseTree | None = None  # the whole base tree, scanned only by a rule that needs it


def check_confined(planned: PlanDir, changes: list[FileChange]) -> None:
    """Refuse unless the tree changes exactly the declared files, each as the plan's recipe's
    rule for that edit kind allows (the recipe's spans and meaning, on the base file's text).
    A group plan is checked commit by commit (:func:`check_member_confined`), not here."""
    if planned.plan.is_group:
        raise BotError("a group plan is checked member by member; refusing it as one change")
    member = planned.plan.single_member()
    if member is None:
        raise BotError("the plan names no recipe, class or finding; refusing to publish it")
    check_member_confined(member, changes)


def check_member_confined(member: Member, changes: list[FileChange]) -> None:
    """One member's commit: exactly its declared files, each as its recipe's rule allows, on
    the text the commit starts from."""
    rules = _publish_rules(member.recipe)
    declared: dict[str, str] = {}
    for edit in member.edits:
        path, kind = edit.path, edit.kind
        if kind not in rules or path in declared:
            raise BotError(f"the plan declares an edit publish cannot check: {path!r} ({kind!r})")
        declared[path] = kind
    changed = {c.path for c in changes}
    extra = sorted(changed - set(declared))
    if extra:
        raise BotError(f"the patch changes {extra[0]}, which the plan's edits do not declare")
    missing = sorted(set(declared) - changed)
    if missing:
        raise BotError(f"the plan declares an edit of {missing[0]} the patch does not make")
    class_name = identifier(member.class_name, "class_name")
    finding = member.finding
    if finding.class_name != class_name:
        raise BotError("the plan's class_name is not its finding's class; refusing to publish")
    for change in changes:
        kind = declared[change.path]
        before, after = _texts(change, creates=getattr(rules[kind], "creates_file", False))
        edit = PublishedEdit(
            change.path,
            kind,
            before,
            after,
            class_name,
            finding,
            change.base,
            tuple(sorted(changed)),
        )
        try:
            rules[kind](edit)
        except (CodemodRefused, SyntaxError, ValueError) as exc:
            detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise BotError(f"{change.path}: {detail}; refusing to publish") from None
    for kind in _required_edit_kinds(member.recipe):
        # "a|b": either kind (the test a tree's own conventions ask for)
        if not set(kind.split("|")) & set(declared.values()):
            raise BotError(
                f"the plan has no {' or '.join(kind.split('|'))} edit, which recipe "
                f"{member.recipe} always makes; "
                "refusing to publish"
            )


def _publish_rules(recipe_name: object) -> Mapping[str, PublishRule]:
    """The plan's recipe's publish-time rules, by edit kind; an unknown recipe has none."""
    from bot.recipes import (  # the recipes import the tree scanner: only when used
        fixes,
        recipe_named,
    )

    recipe = recipe_named(recipe_name) if isinstance(recipe_name, str) else None
    rules = recipe.publish_rules if recipe is not None and fixes(recipe) else None
    if not isinstance(rules, Mapping) or not rules:
        raise BotError(f"publish has no checks for recipe {recipe_name!r}; refusing to publish")
    return rules


def _required_edit_kinds(recipe_name: str) -> tuple[str, ...]:
    """The edit kinds every plan of the recipe carries (e.g. a contributed test)."""
    from bot.recipes import recipe_named

    recipe = recipe_named(recipe_name)
    return recipe.required_edit_kinds if recipe is not None else ()


def _texts(change: FileChange, creates: bool = False) -> tuple[str, str]:
    """The file's text before and after; a new file only for an edit kind whose rule
    re-derives the whole file (``creates_file``)."""
    created = creates and change.status == "A" and change.new_mode == "100644"
    if created and not change.before:
        return "", _decoded(change, change.after)
    if change.status != "M" or change.old_mode != "100644" or change.new_mode != "100644":
        raise BotError(
            f"the patch adds, deletes, renames or changes the mode of {change.path}; "
            "the bot only edits existing files"
        )
    return _decoded(change, change.before), _decoded(change, change.after)


def _decoded(change: FileChange, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BotError(f"{change.path} is not UTF-8 text after the patch") from None
    if "\0" in text:
        raise BotError(f"{change.path} is binary; the bot only edits Python source")
    return text
