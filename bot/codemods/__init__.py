"""Small, single-purpose libcst codemods over source text, each carrying its own cases."""

from __future__ import annotations

from bot.codemods import (
    aux_capture,
    aux_forward_test,
    bases,
    ci_step_dependency,
    delegate_methods,
    imports,
    legacy_capture,
    llm_target_test,
    nested_capture,
    registry_entry,
    regression_test,
    wrapper_forward_test,
)
from bot.codemods.base import Case, CodemodRefused
from bot.codemods.bases import append_base_class
from bot.codemods.diff import unified_diff
from bot.codemods.imports import add_import_name
from bot.codemods.registry_entry import insert_registry_entry
from bot.codemods.regression_test import RegressionTestEdit, add_eagle3_regression_test

__all__ = [
    "Case",
    "CodemodRefused",
    "RegressionTestEdit",
    "add_eagle3_regression_test",
    "add_import_name",
    "all_cases",
    "append_base_class",
    "insert_registry_entry",
    "unified_diff",
]

_MODULES_WITH_CASES = (
    imports,
    bases,
    registry_entry,
    regression_test,
    delegate_methods,
    aux_capture,
    legacy_capture,
    nested_capture,
    aux_forward_test,
    wrapper_forward_test,
    llm_target_test,
    ci_step_dependency,
)


def all_cases() -> list[tuple[str, Case]]:
    """Every codemod's cases, as ``(module name, case)``."""
    return [
        (module.__name__.rsplit(".", 1)[-1], case)
        for module in _MODULES_WITH_CASES
        for case in module.CASES
    ]
