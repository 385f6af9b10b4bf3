"""What a checkpoint an issue names says about itself: its ``config.json`` on the Hub.

A checkpoint's ``architectures`` is the class vLLM loads for it, whatever its name suggests (a
fine-tune named after one family, a text-only export of a multimodal model). A draft's config
names its target: the speculators format's ``verifier``; else the draft's model card names its
``base_model``, whose own config lists the target's class.

Everything read here is anyone's data: a class is taken only when the tree registers it as a
generation architecture (or as a draft), and names are shown only when they look like classes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bot.hub import Hub

MAX_CHECKPOINTS = 8  # repositories read per issue, served ones first
MAX_BASE_MODELS = 2  # a draft card's base models followed
_CLASS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,100}$")
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,95}$")
# Config keys and class-name words only drafts carry (EAGLE-3, DFlash, DSpark, speculators).
_DRAFT_KEYS = ("speculators_config", "dflash_config", "eagle_config", "draft_vocab_size")
_DRAFT_CLASS_WORDS = re.compile(r"(?i)eagle|dflash|dspark|speculator|medusa|mtp")


@dataclass(frozen=True)
class Checkpoint:
    """One repository's config, as triage reads it."""

    repo_id: str
    state: str  # bot.hub's READ / ABSENT / GATED / TOO_LARGE / UNREACHABLE
    source: str
    why: str = ""
    draft: bool = False
    archs: tuple[str, ...] = ()  # registered generation classes: the target's own, or a draft's
    unregistered: tuple[str, ...] = ()  # classes the config lists that the tree does not register
    via: str = ""  # for a draft: how its target was found

    @property
    def read(self) -> bool:
        return self.state == "read"


def repo_id_like(name: str) -> bool:
    return bool(_REPO_ID.match(name)) and ".." not in name and "--" not in name


def read_checkpoint(
    hub: Hub, repo_id: str, generation: frozenset[str], drafts: frozenset[str]
) -> Checkpoint:
    """``repo_id``'s config read through ``hub``: a target's classes, or a draft's target's."""
    found = hub.config(repo_id)
    if not found.read or found.config is None:
        return Checkpoint(repo_id, found.state, found.source, found.why)
    config = found.config
    listed = class_names(config.get("architectures"))
    if is_draft_config(config, listed, drafts):
        archs, via = _draft_targets(hub, repo_id, config, generation)
        return Checkpoint(repo_id, found.state, found.source, draft=True, archs=archs, via=via)
    return Checkpoint(
        repo_id,
        found.state,
        found.source,
        archs=tuple(a for a in listed if a in generation),
        unregistered=tuple(a for a in listed if a not in generation),
    )


def is_draft_config(
    config: dict[str, Any], listed: tuple[str, ...], drafts: frozenset[str]
) -> bool:
    if any(key in config for key in _DRAFT_KEYS):
        return True
    return any(a in drafts or _DRAFT_CLASS_WORDS.search(a) for a in listed)


def _draft_targets(
    hub: Hub, repo_id: str, config: dict[str, Any], generation: frozenset[str]
) -> tuple[tuple[str, ...], str]:
    verifier = (config.get("speculators_config") or {}).get("verifier") or {}
    if isinstance(verifier, dict):
        named = tuple(a for a in class_names(verifier.get("architectures")) if a in generation)
        if named:
            return named, "its speculators_config's verifier"
        target = verifier.get("name_or_path")
        if isinstance(target, str) and repo_id_like(target):
            archs = _target_archs(hub, target, generation)
            if archs:
                return archs, f"its verifier `{target}`"
    for base in hub.base_models(repo_id)[:MAX_BASE_MODELS]:
        if repo_id_like(base) and base != repo_id:
            archs = _target_archs(hub, base, generation)
            if archs:
                return archs, f"its model card's base model `{base}`"
    return (), ""


def _target_archs(hub: Hub, repo_id: str, generation: frozenset[str]) -> tuple[str, ...]:
    found = hub.config(repo_id)
    if not found.read or found.config is None:
        return ()
    return tuple(a for a in class_names(found.config.get("architectures")) if a in generation)


def class_names(value: object) -> tuple[str, ...]:
    """The class names a config's ``architectures`` lists (anything else in it is dropped)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    names = [v for v in value[:8] if isinstance(v, str) and _CLASS_NAME.match(v)]
    return tuple(dict.fromkeys(names))
