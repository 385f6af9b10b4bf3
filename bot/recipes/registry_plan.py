"""The ``tests/models/registry.py`` entry that puts a fixed model under vLLM's GPU test.

Upstream's shape (PR #45319): a test-only key in ``_SPECULATIVE_DECODING_EXAMPLE_MODELS``, the
draft's target as the first argument, ``speculative_model=`` the draft, then the fields of the
sibling entry of the same method, then the transformers bounds of the target's own entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.drafts import DraftCatalogue, DraftEntry
from bot.tree.known_models import (
    TEST_REGISTRY_PATH,
    ExampleEntry,
    KnownModels,
    load_known_models,
)

REGISTRY_FILE = TEST_REGISTRY_PATH
DICT_NAME = "_SPECULATIVE_DECODING_EXAMPLE_MODELS"
_SECTION_FOR_METHOD = {"dflash": "DFlash", "eagle3": "Eagle", "dspark": "DSpark"}
_KEY_PREFIX = {"dflash": "DFlash", "eagle3": "Eagle3", "dspark": "DSpark"}
_ARCH_SUFFIX = re.compile(r"(ForCausalLM|ForConditionalGeneration|LMHeadModel|Model)$")
# Sibling fields that describe the sibling's own checkpoint rather than how the test runs.
_NOT_COPIED = frozenset(
    {
        "speculative_model",
        "tokenizer",
        "trust_remote_code",
        "is_available_online",
        "min_transformers_version",
        "max_transformers_version",
        "transformers_version_reason",
        "extras",
        "hf_overrides",
        "revision",
        "speculative_tokenizer",
    }
)
_FROM_TARGET = ("trust_remote_code", "min_transformers_version", "max_transformers_version")
_GPU_TEST = "tests/models/test_initialization.py::test_can_initialize_large_subset[{key}]"


@dataclass(frozen=True)
class RegistryEntryPlan:
    key: str
    section: str
    args: list[Any]
    kwargs: list[tuple[str, Any]]
    draft: DraftEntry
    sibling: str | None
    why: str

    @property
    def gpu_test(self) -> str:
        return gpu_test_for(self.key)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": REGISTRY_FILE,
            "dict": DICT_NAME,
            "key": self.key,
            "section": self.section,
            "args": self.args,
            "kwargs": [[k, v] for k, v in self.kwargs],
            "draft": self.draft.to_dict(),
            "sibling": self.sibling,
            "why": self.why,
            "gpu_test": self.gpu_test,
        }


def gpu_test_for(key: str) -> str:
    """The GPU test node id for the registry entry ``key``."""
    return _GPU_TEST.format(key=key)


# The methods the engine check runs, and a checkpoint name it takes (``owner/name``).
ENGINE_METHODS = ("eagle3", "dflash")
CHECKPOINT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def method_of_key(key: str) -> str | None:
    """The draft method a registry key this module makes names (``Eagle3...DraftModel``)."""
    found = [m for m, prefix in _KEY_PREFIX.items() if key.startswith(prefix)]
    return max(found, key=lambda m: len(_KEY_PREFIX[m])) if found else None


def engine_checkpoints(target: object, method: object, draft: object) -> str:
    """``"<target> <method>=<draft>"``, what the GPU runner's engine check runs (the input
    ``gpu-verify.yml`` gets and its run title shows), or "" when these are not such a triple."""
    if method not in ENGINE_METHODS or not all(
        isinstance(x, str) and CHECKPOINT.match(x) for x in (target, draft)
    ):
        return ""
    return f"{target} {method}={draft}"


def plan_registry_entry(
    tree: Path, arch: str, catalogue: DraftCatalogue, preferred_draft: str | None = None
) -> tuple[RegistryEntryPlan | None, str]:
    """The entry for ``arch``, or None and the reason there is none.

    Only reviewed catalogue facts count: a Hub model card never picks the draft or its target.
    """
    catalogue = catalogue.reviewed()
    choice = catalogue.choose(arch)
    draft = choice.draft
    if preferred_draft:
        named = catalogue.find(preferred_draft)
        if named is not None and named.target_arch == arch and named.available:
            draft = named
    if draft is None:
        return None, f"no registry entry: {choice.reason}"
    return registry_entry_for(load_known_models(tree), arch, draft, catalogue)


def registry_entry_for(
    known: KnownModels, arch: str, draft: DraftEntry, catalogue: DraftCatalogue
) -> tuple[RegistryEntryPlan | None, str]:
    """The entry for ``arch`` with ``draft``, every field from the tree's registry (``known``)
    or the draft's catalogue entry; ``catalogue`` holds the reviewed entries only (it picks
    the sibling). Publish calls it again on the base text to re-derive the entry it checks."""
    section = _SECTION_FOR_METHOD.get(draft.method)
    if section is None:
        return None, f"no registry entry: no test-registry section for {draft.method} drafts"
    in_section = [
        e for e in known.examples if e.category == "speculative_decoding" and e.section == section
    ]
    if not in_section:
        return None, f"no registry entry: the tree's test registry has no `# [{section}]` section"
    key = f"{_KEY_PREFIX[draft.method]}{_ARCH_SUFFIX.sub('', arch)}DraftModel"
    sibling = _sibling(in_section, draft.method, catalogue)
    target = draft.target_repo_id or _example_id(known, arch)
    if target is None:
        return None, f"no registry entry: no example checkpoint for {arch} in the tree"
    kwargs: list[tuple[str, Any]] = [("speculative_model", draft.repo_id)]
    if sibling is not None:
        kwargs += [(k, v) for k, v in sibling.kwargs.items() if k not in _NOT_COPIED]
    target_kwargs = known.entry_kwargs(arch)
    kwargs += [(k, target_kwargs[k]) for k in _FROM_TARGET if _is_literal(target_kwargs.get(k))]
    why = (
        f"{draft.method} draft {draft.repo_id} for {target} ({draft.source}); "
        f"fields after the draft follow {sibling.arch if sibling else 'no sibling'}; "
        f"transformers bounds from {arch}'s own entry"
    )
    return (
        RegistryEntryPlan(
            key=key,
            section=section,
            args=[target],
            kwargs=kwargs,
            draft=draft,
            sibling=sibling.arch if sibling else None,
            why=why,
        ),
        why,
    )


def _sibling(entries: list[ExampleEntry], method: str, catalogue: DraftCatalogue) -> ExampleEntry:
    def score(entry: ExampleEntry) -> tuple[bool, bool]:
        draft = catalogue.find(str(entry.kwargs.get("speculative_model", "")))
        same_method = draft is not None and draft.method == method
        published = entry.kwargs.get("is_available_online", True) is not False
        return (not same_method, not published)

    return min(entries, key=score)


def _example_id(known: KnownModels, arch: str) -> str | None:
    ids = known.hf_ids(arch)
    return ids[0] if ids else None


def _is_literal(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) and value is not None
