"""Runs every codemod's own cases, each twice: the second run must change nothing."""

from __future__ import annotations

import pytest

from bot.codemods import Case, CodemodRefused, all_cases
from bot.recipes import RECIPES
from bot.recipes.base import from_own_package


def _recipe_cases() -> list[tuple[str, Case]]:
    """The cases of the codemods a fix class keeps in its own package (``codemods.py``)."""
    found = []
    for recipe in RECIPES:
        cases = from_own_package(recipe, "codemods", "CASES")
        package = type(recipe).__module__.rsplit(".", 2)[-2]
        found += [(f"{package}.codemods", case) for case in cases or ()]
    return found


_CASES = all_cases() + _recipe_cases()


@pytest.mark.parametrize(
    "case", [case for _, case in _CASES], ids=[f"{module}: {case.name}" for module, case in _CASES]
)
def test_case(case: Case) -> None:
    if case.refuses is not None:
        with pytest.raises(CodemodRefused) as refused:
            case.apply(case.before)
        assert case.refuses in str(refused.value)
        assert "\n" not in str(refused.value)
        return
    expected = case.before if case.after is None else case.after
    first = case.apply(case.before)
    assert first == expected
    assert case.apply(first) == first


def test_every_codemod_has_a_no_change_case_and_a_change_case() -> None:
    modules = {module for module, _ in _CASES}
    assert modules == {
        "imports",
        "bases",
        "registry_entry",
        "regression_test",
        "delegate_methods",
        "aux_capture",
        "legacy_capture",
        "nested_capture",
        "aux_forward_test",
        "wrapper_forward_test",
        "llm_target_test",
        "ci_step_dependency",
        "core_drafter_loader.codemods",
        "core_eagle3_forwarding.codemods",
    }
    for module in modules:
        cases = [case for name, case in _CASES if name == module]
        assert any(c.after is None and c.refuses is None for c in cases), module
        assert any(c.after is not None for c in cases), module
