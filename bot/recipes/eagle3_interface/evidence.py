"""What an eagle3-interface finding rests on: the decoder the target builds, the mixin that
decoder inherits, where its forward collects the aux hidden states, and the nearest class
that already declares ``SupportsEagle3`` over the same kind of decoder (the pattern to copy)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.jsonio import JsonRecord
from bot.recipes.evidence import Bound, Evidence, Located


@dataclass(frozen=True)
class Mixin(Located):
    chain: tuple[str, ...]  # the decoder's bases down to the one taking EagleModelMixin


@dataclass(frozen=True)
class AuxCollected(JsonRecord):
    path: str
    forward_line: int
    helper_lines: tuple[int, ...]
    layer_check_lines: tuple[int, ...]


@dataclass(frozen=True)
class Sibling(Located):
    decoder: str
    kinship: str


@dataclass(frozen=True)
class InterfaceEvidence(Evidence):
    decoder: Bound
    mixin: Mixin
    aux: AuxCollected
    sibling: Sibling | None
