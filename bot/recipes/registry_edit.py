"""The registry-entry edit every recipe that puts a model under the GPU test makes."""

from __future__ import annotations

from bot.codemods.registry_entry import insert_registry_entry
from bot.codemods.spans import TopLevel
from bot.recipes.base import FileEdit, step
from bot.registry_plan import DICT_NAME, REGISTRY_FILE, RegistryEntryPlan


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
