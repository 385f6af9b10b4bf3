"""A finding's evidence is its recipe's frozen record (bot/recipes/evidence.py): what a scan
writes reads back as the same record and the same bytes, and a malformed record is refused in
one line that names the field, wherever plan.json's finding is read."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from typing import Any

import pytest

from bot.errors import BotError
from bot.recipes import RECIPES
from bot.recipes.base import Finding
from bot.recipes.evidence import Evidence
from bot.scan.findings import scan
from bot.tree.fetch import release_tree
from bot.verify.checks import fixed_together


@functools.cache
def _findings() -> tuple[Finding, ...]:
    return tuple(scan(release_tree("0.34.0")).findings)


def _first(recipe: str) -> dict[str, Any]:
    found = next(f for f in _findings() if f.recipe == recipe)
    return copy.deepcopy(found.to_json())


def test_every_recipe_reads_its_findings_as_its_own_record() -> None:
    for recipe in RECIPES:
        assert issubclass(recipe.evidence_type, Evidence)
        assert recipe.evidence_type is not Evidence, recipe.name
    assert {type(f.evidence).__name__ for f in _findings()} == {
        "InterfaceEvidence",
        "WrapperEvidence",
        "EnableEvidence",
        "BrokenClaimEvidence",
        "LoaderEvidence",
        "ForwardingEvidence",
    }


def test_what_a_scan_writes_reads_back_as_the_same_record_and_bytes() -> None:
    for finding in _findings():
        text = json.dumps(finding.to_json())
        read = Finding.from_json(json.loads(text))
        assert read == finding, finding.class_name
        assert json.dumps(read.to_json()) == text


def _set(ev: dict[str, Any]) -> None:
    ev["shared"] = {"decoder": "D", "targets": ["A", "B"], "paths": ["a.py"], "lead": "A"}


# case: (recipe of the real finding, how its JSON is broken, the words of the refusal)
MALFORMED: dict[str, tuple[str, Callable[[dict[str, Any]], object], str]] = {
    "a nested field missing": (
        "eagle3-interface",
        lambda f: f["evidence"]["decoder"].pop("assigned_at"),
        "finding.evidence.decoder lacks `assigned_at`",
    ),
    "a mistyped line": (
        "eagle3-enable",
        lambda f: f["evidence"]["decoder"].update(line="719"),
        "finding.evidence.decoder.line must be int",
    ),
    "an unknown field": (
        "eagle3-wrapper",
        lambda f: f["evidence"].update(injected="x"),
        "finding.evidence has unknown fields: injected",
    ),
    "a list item of the wrong type": (
        "eagle3-wrapper",
        lambda f: f["evidence"]["covers"].append(7),
        "finding.evidence.covers[1] must be str",
    ),
    "a set whose targets and paths differ in length": (
        "eagle3-enable",
        lambda f: _set(f["evidence"]),
        "finding.evidence.shared: `targets` and `paths` differ in length",
    ),
    "another recipe's record": (
        "eagle3-interface",
        lambda f: f.update(evidence=_first("eagle3-wrapper")["evidence"]),
        "finding.evidence has unknown fields: covers, forward",
    ),
    "a boolean line": (
        "eagle3-enable",
        lambda f: f.update(line=True),
        "finding: `line` must be int",
    ),
    "an unknown recipe": ("eagle3-interface", lambda f: f.update(recipe="rm -rf"), "names no"),
    "evidence not an object": (
        "eagle3-broken-claim",
        lambda f: f.update(evidence=["declared"]),
        "finding.evidence must be an object",
    ),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_record_is_refused_in_one_line_naming_the_field(case: str) -> None:
    recipe, change, words = MALFORMED[case]
    data = _first(recipe)
    change(data)
    with pytest.raises(BotError) as refused:
        Finding.from_json(data)
    assert words in str(refused.value)
    assert "\n" not in str(refused.value)


def test_verify_reads_a_plans_set_through_the_record() -> None:
    """The re-scan's "fixed together" keys come from the typed set: a well-formed set gives
    every member, a malformed one is refused instead of silently checking nothing."""
    finding = next(
        f for f in _findings() if f.recipe == "eagle3-enable" and f.evidence.fixed_with()
    )
    shared = finding.evidence.fixed_with()
    keys = fixed_together(finding.to_json())
    assert [(k["class"], k["path"]) for k in keys] == shared.members()
    assert len(keys) >= 2
    data = finding.to_json()
    data["evidence"]["shared"]["paths"] = data["evidence"]["shared"]["paths"][:1]
    with pytest.raises(BotError, match="differ in length"):
        fixed_together(data)
