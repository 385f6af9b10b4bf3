"""Which eagle3-enable plan repairs a broken ``SupportsEagle3`` claim, or what blocks one.

A claim broken because the decoder the interface reaches lacks ``EagleModelMixin`` (Exaone4_5
through ``Exaone4Model``) is repaired by the enablement of that decoder: the plan of a
registered target whose ``.model`` it is, or whose decoder's ``forward`` it inherits (the
mixin and the capture go where that ``forward`` is, and the subclass inherits both), which
cites the claim as the cause in its write-up (``eagle3_enable.broken_claims_fixed``). Where
no such plan is ready, every blocker is named: the enable target's own refusal, or, for a
decoder no registered target builds, that and the decoder's shape. A claim broken because a
``forward`` override drops the capture (MiMo) has no plan yet: the decoder already has the
mixin, and eagle3-enable's plans add the mixin, the capture and the declaration together.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bot.recipes.base import ScanContext
from bot.recipes.eagle3_analysis import mixin_chain
from bot.recipes.eagle3_broken_claim.evidence import ClaimFix
from bot.recipes.eagle3_enable.analysis import NEEDS_HUMAN, DecoderShape, Refusal, decoder_shape
from bot.recipes.eagle3_enable.candidate import Candidate
from bot.recipes.eagle3_enable.detection import forward_owner
from bot.tree.index import ClassRef

NO_MIXIN = "no-mixin"
NO_CAPTURE = "no-capture"


def claim_fix(
    ctx: ScanContext,
    kind: str,
    holder: ClassRef,
    claimant: ClassRef,
    enable_candidates: Callable[[], Sequence[Candidate]],
) -> ClaimFix | None:
    """The eagle3-enable targets whose plan repairs the claim (``ready``), or ``refused``
    ("needs a human: ...") naming every blocker; None for a kind no
    enablement repairs (the target's own forward dropping the output)."""
    if kind == NO_MIXIN:
        matching = [c for c in enable_candidates() if repairs(ctx, c, holder)]
        ready = sorted(c.ref.name for c in matching if isinstance(c.verdict, DecoderShape))
        if ready:
            return ClaimFix(ready=tuple(ready))
        if matching:
            reasons = [c.verdict.reason for c in matching if isinstance(c.verdict, Refusal)]
            return ClaimFix(refused=_refused(reasons))
        return ClaimFix(refused=_refused([_unbuilt(holder), *_shape_blockers(ctx, holder)]))
    if kind == NO_CAPTURE:
        chain = mixin_chain(ctx.index, holder) or [holder]
        reasons = [
            f"{holder.name} already has EagleModelMixin (through {chain[-1].name}) and "
            f"{claimant.name} already declares the interface; eagle3-enable's plans add the "
            "mixin, the capture and the declaration together, and none adds the capture alone "
            "to a forward that dropped it",
            *_shape_blockers(ctx, holder),
        ]
        return ClaimFix(refused=_refused(reasons))
    return None


def _unbuilt(holder: ClassRef) -> str:
    return (
        f"no registered text-generation architecture builds {holder.name} as its .model, so "
        "there is no eagle3-enable target whose plan would give it the mixin and the capture"
    )


def _shape_blockers(ctx: ScanContext, holder: ClassRef) -> list[str]:
    shape = decoder_shape(ctx.index, forward_owner(ctx.index, holder))
    return [shape.reason] if isinstance(shape, Refusal) else []


def repairs(ctx: ScanContext, candidate: Candidate, holder: ClassRef) -> bool:
    """Whether ``candidate``'s enablement gives ``holder`` the mixin and the capture: ``holder``
    is its decoder, or a subclass of the class whose ``forward`` it captures in that runs that
    very ``forward`` (the mixin and the capture are inherited)."""
    owner = candidate.captured
    if candidate.decoder == holder:
        # unless the capture goes into a child decoder it hands back whole (OPTDecoder):
        # then the holder itself gains nothing
        return owner in (holder, forward_owner(ctx.index, holder))
    return owner != holder and forward_owner(ctx.index, holder) == owner


def _refused(reasons: list[str]) -> str:
    plain = [r.removeprefix(f"{NEEDS_HUMAN}: ") for r in reasons]
    return f"{NEEDS_HUMAN}: " + "; and ".join(dict.fromkeys(plain))
