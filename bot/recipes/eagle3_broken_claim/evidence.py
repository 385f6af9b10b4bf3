"""What an eagle3-broken-claim finding rests on: where the class gets ``SupportsEagle3``, the
interface default that would fail, the path from the class to the decoder that default
reaches, the forward that breaks the claim and, where the bot knows one, the eagle3-enable
plan that repairs it (or every blocker of one)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.jsonio import JsonRecord, optional
from bot.recipes.evidence import At, Bound, Evidence, Located


@dataclass(frozen=True)
class Declared(Located):
    """The class that lists SupportsEagle3 among its bases (or sets ``supports_eagle3``)."""

    inherited: bool
    flag: bool | None = optional()


@dataclass(frozen=True)
class Reached(Located):
    """The decoder the interface's defaults reach, as ``self.<path>``."""

    reached_as: str
    assigned_at: At | None = optional()


@dataclass(frozen=True)
class ClaimTrace(JsonRecord):
    """From the interface default to the decoder, and the forward that was judged."""

    interface: Located
    decoder: Reached
    language_model: Bound | None = optional()
    decoder_forward: Located | None = optional()
    forward: Located | None = optional()


@dataclass(frozen=True)
class ClaimFix(JsonRecord):
    """The eagle3-enable targets whose plan repairs the claim, or why none can."""

    ready: tuple[str, ...] | None = optional()
    refused: str | None = optional()


@dataclass(frozen=True)
class BrokenClaimEvidence(Evidence):
    declared: Declared
    broken: str
    why: str
    interface: Located
    decoder: Reached
    language_model: Bound | None = optional()
    decoder_forward: Located | None = optional()
    forward: Located | None = optional()
    fix: ClaimFix | None = optional()
