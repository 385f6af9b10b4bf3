"""A target ``eagle3-enable`` may fix: its decoder, the decoder's shape or why it is refused,
and what else the plan must say (shared decoders, loaders, a forward test)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.recipes.eagle3_enable.analysis import DecoderShape, Refusal
from bot.recipes.evidence import BuildsOn
from bot.tree.drafter_loader import LoaderSite
from bot.tree.index import ClassRef
from bot.tree.model_registry import RegistryEntry


@dataclass(frozen=True)
class Candidate:
    ref: ClassRef
    entries: list[RegistryEntry]
    decoder: ClassRef
    attribute: str
    assigned_line: int
    assigned_owner: ClassRef
    verdict: DecoderShape | Refusal
    # The targets fixed together with this one (itself included, sorted), when its decoder's
    # forward is also another target's (:mod:`bot.recipes.eagle3_enable.shared`); else empty.
    shared: tuple[ClassRef, ...] = ()
    # The decoder whose forward gains the capture: the decoder, or the class it inherits
    # forward from (FlashNgramModel -> FlashModel).
    owner: ClassRef | None = None
    lead: ClassRef | None = None  # the set's member its one plan is named after
    # The release's drafter loader lines refusing it, and whether the core-drafter-loader
    # plan lifts them (None) or why not; counted into the verdict last (_with_loaders)
    loader: tuple[tuple[LoaderSite, ...], str | None] | None = None
    # The core finding its plan needs first (set by _with_loaders when nothing else refuses)
    builds_on: BuildsOn | None = None
    # The verdict without the loaders (what still refuses it once the core plan is applied)
    model_verdict: DecoderShape | Refusal | None = None

    @property
    def captured(self) -> ClassRef:
        """The class whose ``forward`` gains the capture: the decoder, the class it inherits
        ``forward`` from, or the child decoder it hands back whole (OPTModel -> OPTDecoder)."""
        shape = self.model_verdict or self.verdict
        if isinstance(shape, DecoderShape) and shape.inner:
            return ClassRef((self.owner or self.decoder).module, shape.inner)
        return self.owner or self.decoder

    @property
    def reached(self) -> str:
        """What the target's two methods reach: its decoder attribute, and for the
        child-decoder form the child under it (``model.decoder``)."""
        shape = self.model_verdict or self.verdict
        if isinstance(shape, DecoderShape) and shape.inner_attr:
            return f"{self.attribute}.{shape.inner_attr}"
        return self.attribute
