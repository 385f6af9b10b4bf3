"""Small, single-purpose libcst codemods over source text, each carrying its own cases (a
module's ``CASES``: tests/test_codemods_cases.py finds them by walking the packages)."""

from __future__ import annotations

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
    "append_base_class",
    "insert_registry_entry",
    "unified_diff",
]
