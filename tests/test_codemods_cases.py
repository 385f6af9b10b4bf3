"""Runs every codemod's own cases, each twice: the second run must change nothing."""

from __future__ import annotations

import pytest

from bot.codemods import Case, CodemodRefused, all_cases

_CASES = all_cases()


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
    }
    for module in modules:
        cases = [case for name, case in _CASES if name == module]
        assert any(c.after is None and c.refuses is None for c in cases), module
        assert any(c.after is not None for c in cases), module
