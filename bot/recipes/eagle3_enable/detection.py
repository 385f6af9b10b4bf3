"""Which targets ``eagle3-enable`` can fix, and why the others are refused: the candidates of a
scan (remembered for the last scans), the decoder each target reaches, and every blocker named
(pipeline parallelism, speculative refusals, delegation, drafter loaders, the target's forward)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from bot.recipes.base import Declined, ScanContext
from bot.recipes.core_drafter_loader.evidence import NAME as CORE_LOADER
from bot.recipes.core_drafter_loader.evidence import builds_on as loader_dependency
from bot.recipes.eagle3_analysis import (
    EAGLE_MODEL_MIXIN,
    AuxCollection,
    aux_collection,
    constructed,
    declares_eagle3,
    forwards_decoder_output,
    is_multimodal,
    mixin_chain,
)
from bot.recipes.eagle3_enable.analysis import NEEDS_HUMAN, DecoderShape, Refusal, decoder_shape
from bot.recipes.eagle3_enable.candidate import Candidate
from bot.recipes.eagle3_enable.forward_reads import forward_test_fields
from bot.recipes.eagle3_interface.recipe import registered_targets
from bot.recipes.llm_test import follows_agents_rules, llm_test_unavailable
from bot.tree.drafter_loader import REWRITTEN as _REWRITTEN
from bot.tree.drafter_loader import Loaders, LoaderSite, loader_sites
from bot.tree.index import DECODER_ATTRIBUTE, ClassIndex, ClassRef

# Where a decoder under another name lives: its target gets the two delegating methods.
OTHER_DECODER_ATTRIBUTES = ("transformer", "backbone", "decoder", "language_model")
VOCAB_EMBEDDING = "VocabParallelEmbedding"


# The last scan's candidates: detect, the broken-claim reports' fixes and a plan's capture all
# ask for them on the same ScanContext (one scan, one tree state).
_LAST: list[tuple[ScanContext, tuple[Candidate, ...]]] = []


def candidates(ctx: ScanContext) -> list[Candidate]:
    """Every text-generation target without the interface whose decoder neither has the mixin
    nor collects, with the decoder's shape or the reason it is refused."""
    if _LAST and _LAST[0][0] is ctx:
        return list(_LAST[0][1])
    found = _candidates(ctx)
    _LAST[:] = [(ctx, tuple(found))]
    return found


def _candidates(ctx: ScanContext) -> list[Candidate]:
    index = ctx.index
    targets = registered_targets(ctx)
    # Each target's decoder classes, once: every candidate checks every other target.
    others = _Targets(
        decoders={t: {c.cls for c in constructed(index, t, DECODER_ATTRIBUTE)} for t in targets},
        ancestors={t: set(index.ancestors(t)) for t in targets},
        declared={t for t in targets if declares_eagle3(index, t)},
    )
    found: list[Candidate] = []
    sharers: dict[ClassRef, list[ClassRef]] = {}  # the other targets reaching a forward
    loaders: Loaders | None = None  # read once, only when a decoder needs it
    for ref, entries in targets.items():
        if is_multimodal(index, ref) or ref in others.declared:
            continue
        built = _decoder_of(index, ref)
        if built is None:
            continue
        attribute, constructions = built
        decoders = sorted({c.cls for c in constructions})
        decoder = decoders[0]
        if any(mixin_chain(index, d) for d in decoders):
            continue  # the interface (or broken-claim) recipes' case
        collections = [aux_collection(index, d) for d in decoders]
        legacy = any(aux is not None and legacy_only(aux) for aux in collections)
        if any(aux is not None and aux.collects and not legacy_only(aux) for aux in collections):
            continue
        verdict: DecoderShape | Refusal
        loader: tuple[tuple[LoaderSite, ...], str | None] | None = None
        owner = None
        if len(decoders) > 1:
            names = ", ".join(d.name for d in decoders)
            verdict = Refusal(f"{ref.name} builds one of several decoders ({names})")
        else:
            # Every blocker is named, not only the first: the decoder's own shape, the targets
            # sharing it, and the release's drafter loaders.
            # A decoder inheriting forward is captured where forward is: in the class it
            # inherits from, fixed together with every target that class's forward reaches.
            owner = forward_owner(index, decoder)
            shape = decoder_shape(index, owner, staged=_declares_pp(index, ref))
            refusal, sharers[ref] = _target_refusal(index, others, ref, owner, decoder, attribute)
            verdict = _all_blockers(
                shape,
                refusal,
                _delegation_refusal(attribute, shape),
                _legacy_refusal(owner, shape) if legacy else None,
            )
            if loaders is None:
                loaders = loader_sites(ctx.root)
            holder = decoder if attribute == DECODER_ATTRIBUTE else ref
            refusing = loaders.refusing(attribute, assigned(index, holder)[0])
            if refusing:
                loader = (tuple(refusing), _loader_lift(index, refusing, holder))
        if (refuses := _speculative_refusal(index, ref)) is not None:
            verdict = _all_blockers(refuses, verdict)  # the model's own word first
        construction = constructions[0]
        found.append(
            Candidate(
                ref,
                entries,
                decoder,
                attribute,
                construction.line,
                construction.owner,
                verdict,
                owner=owner,
                loader=loader,
            )
        )
    from bot.recipes.eagle3_enable.shared import join_shared

    if not follows_agents_rules(ctx.root):  # there, the test goes through LLM instead
        found = [_without_forward_test_refused(ctx, c) for c in found]
    joined = join_shared(index, found, sharers)
    return [_with_loaders(loaders, c) for c in joined] if loaders else joined


def _without_forward_test_refused(ctx: ScanContext, candidate: Candidate) -> Candidate:
    """A candidate whose plan would be declined for want of its contributed test (the stand-in
    forward test cannot be written, nor the test through LLM) is refused by the scan too, so
    ``fixable`` never promises a plan ``bot propose`` won't write."""
    if not isinstance(candidate.verdict, DecoderShape):
        return candidate
    fields = forward_test_fields(ctx, candidate, candidate.verdict)
    if not isinstance(fields, Declined):
        return candidate
    missing = llm_test_unavailable(ctx.root)
    if missing is None:
        return candidate  # its plan contributes the test through LLM instead
    reason = fields.reason.removeprefix(f"{NEEDS_HUMAN}: ")
    return replace(candidate, verdict=Refusal(f"{reason}; no test through LLM either: {missing}"))


def forward_owner(index: ClassIndex, decoder: ClassRef) -> ClassRef:
    """The class whose ``forward`` the decoder runs: itself, or the ancestor it inherits it
    from (the decoder itself when it inherits none the index knows)."""
    facts = index.class_facts(decoder)
    if facts is not None and "forward" in facts["methods"]:
        return decoder
    inherited = index.find_method(decoder, "forward")
    return inherited[0] if inherited and inherited[0] != decoder else decoder


def legacy_only(aux: AuxCollection) -> bool:
    """The decoder collects aux states only the way decoders did before EagleModelMixin
    (``self.aux_hidden_state_layers`` checked, no ``_maybe_add_hidden_state``)."""
    return aux.collects and not aux.helper_lines


def _legacy_refusal(owner: ClassRef, shape: DecoderShape | Refusal) -> Refusal | None:
    """A pre-mixin collection the migration does not recognise (not one check before each layer
    call and its guarded return) is not migrated."""
    if isinstance(shape, DecoderShape) and not shape.legacy_capture:
        return Refusal(
            f"{owner.name}.forward collects the aux hidden states in a form of its own, not the "
            "pre-mixin capture the bot replaces with the mixin's"
        )
    return None


def _declares_pp(index: ClassIndex, ref: ClassRef) -> bool:
    """Whether the target declares ``SupportsPP`` (a pipeline stage may split its decoder)."""
    return any(getattr(a, "name", None) == "SupportsPP" for a in index.ancestors(ref))


def _all_blockers(shape: DecoderShape | Refusal, *others: Refusal | None) -> DecoderShape | Refusal:
    """The shape when nothing blocks it, else one refusal naming every blocker."""
    reasons = [r.reason for r in (shape, *others) if isinstance(r, Refusal)]
    if not reasons:
        return shape
    return Refusal("; and ".join(dict.fromkeys(reasons)))


def _speculative_refusal(index: ClassIndex, ref: ClassRef) -> Refusal | None:
    """A target whose ``__init__`` raises when speculative decoding is configured (Zaya's
    ``NotImplementedError("ZAYA1 does not support speculative decoding.")``): declaring
    ``SupportsEagle3`` would promise what the model's own code rejects."""
    init = index.find_method(ref, "__init__")
    if init is None or not (guards := init[1].get("refuses_speculative", [])):
        return None
    first = guards[0]
    return Refusal(
        f"{init[0].name}.__init__ refuses speculative decoding itself (line {first['line']}: "
        f"`if {first['test']}: raise {first['raises']}`), so declaring SupportsEagle3 would "
        "promise what the model's own code rejects"
    )


def _delegation_refusal(attribute: str, shape: DecoderShape | Refusal) -> Refusal | None:
    """A nested decoder (Plamo3's two modules) under another attribute than ``self.model``:
    the delegating methods would have to count the child's layers, which they do not yet."""
    if attribute != DECODER_ATTRIBUTE and isinstance(shape, DecoderShape) and shape.child:
        return Refusal(
            f"the decoder is self.{attribute} and loops in its child self.{shape.child_attr}: "
            "the delegating methods this recipe writes count one module's layers"
        )
    return None


def delegates(attribute: str, layers_attr: str) -> bool:
    """Whether the target gets the two delegating methods: the interface's defaults reach
    only ``self.model`` and count only ``self.model.layers`` (``attribute`` is what the methods
    reach: ``model.decoder`` for a child decoder)."""
    return attribute != DECODER_ATTRIBUTE or layers_attr != "layers"


def assigned(index: ClassIndex, cls: ClassRef) -> tuple[set[str], list[str]]:
    """What ``cls`` (and its ancestors) assign to ``self`` in ``__init__``, and which of those
    are built as a ``VocabParallelEmbedding`` (an ``lm_head`` is a ``ParallelLMHead``)."""
    names: set[str] = set()
    embeddings: list[str] = []
    for owner in index.ancestors(cls):
        facts = index.class_facts(owner) if isinstance(owner, ClassRef) else None
        init = (facts or {}).get("methods", {}).get("__init__", {})
        for attr, callee, _line in init.get("assigns", []):
            names.add(attr)
            called = str(callee[-1] if isinstance(callee, list) else callee)
            if called.rsplit(".", 1)[-1] == VOCAB_EMBEDDING and attr not in embeddings:
                embeddings.append(attr)
    return names, embeddings


def _loader_lift(index: ClassIndex, refusing: list[LoaderSite], holder: ClassRef) -> str | None:
    """Why the core-drafter-loader plan would not serve the target the loader lines
    ``refusing`` refuse (a form it does not rewrite, no single vocabulary embedding to find by
    type), or None when it would."""
    unwritten = [s for s in refusing if s.form not in _REWRITTEN]
    if unwritten:
        return f"the {CORE_LOADER} plan does not rewrite {unwritten[0]}"
    if any(s.kind == "embedding" for s in refusing):
        held = _held_embeddings(index, holder)
        if len(held) != 1:
            kept = f" ({', '.join(f'self.{n}' for n in held)})" if held else ""
            return (
                f"the bot finds {len(held)} VocabParallelEmbedding built in {holder.name} or "
                f"the decoder it builds{kept}, so it cannot say the {CORE_LOADER} plan finds "
                "its input embedding by type"
            )
    return None


def _with_loaders(loaders: Loaders, candidate: Candidate) -> Candidate:
    """``candidate`` with the release's drafter loaders counted: ready, building on the
    core-drafter-loader plan, when that plan serves it and nothing else refuses it; else one
    refusal naming every blocker, the loader lines last."""
    if candidate.loader is None:
        return candidate
    refusing, lift = candidate.loader
    verdict = candidate.verdict
    if lift is None and isinstance(verdict, DecoderShape):
        dependency = loader_dependency(loaders, refusing)
        return replace(candidate, builds_on=dependency, model_verdict=verdict)
    lines = ", ".join(str(s) for s in refusing)
    why = lift or f"the {CORE_LOADER} plan lifts that"
    loader = Refusal(f"this release's drafter loaders refuse it ({lines}): {why}")
    return replace(candidate, verdict=_all_blockers(verdict, loader), model_verdict=verdict)


def _held_embeddings(index: ClassIndex, holder: ClassRef) -> list[str]:
    """The ``VocabParallelEmbedding`` attributes of ``holder`` and of the decoders it builds
    (a target whose decoder is ``self.transformer`` holds the decoder's embedding)."""
    found = list(assigned(index, holder)[1])
    for attribute in (DECODER_ATTRIBUTE, *OTHER_DECODER_ATTRIBUTES):
        for construction in constructed(index, holder, attribute):
            found += [f"{attribute}.{n}" for n in assigned(index, construction.cls)[1]]
    return found


def _decoder_of(index: ClassIndex, ref: ClassRef) -> tuple[str, list[Any]] | None:
    for attribute in (DECODER_ATTRIBUTE, *OTHER_DECODER_ATTRIBUTES):
        constructions = constructed(index, ref, attribute)
        if constructions:
            return attribute, constructions
    return None


@dataclass(frozen=True)
class _Targets:
    """The registered targets' decoders, ancestors and declarations, computed once per scan."""

    decoders: dict[ClassRef, set[ClassRef]]
    ancestors: dict[ClassRef, set[Any]]
    declared: set[ClassRef]


def _target_refusal(
    index: ClassIndex,
    others: _Targets,
    ref: ClassRef,
    decoder: ClassRef,
    built: ClassRef,
    attribute: str = DECODER_ATTRIBUTE,
) -> tuple[Refusal | None, list[ClassRef]]:
    """Why declaring the interface on ``ref`` would be wrong for it or for a class below it,
    and the other undeclared targets whose decoder runs ``decoder``'s forward (``built`` is
    the decoder ``ref`` builds, ``decoder`` the class whose forward it runs) (to be fixed
    together with ``ref``, :func:`bot.recipes.eagle3_enable.shared.join_shared`)."""
    sharers: list[ClassRef] = []
    if not forwards_decoder_output(index, ref, attribute):
        return Refusal(
            f"{ref.name}.forward does not hand self.{attribute}'s output back unchanged"
        ), []
    for other, theirs in sorted(others.decoders.items()):
        if other == ref:
            continue
        if ref in others.ancestors[other]:
            # A registered subclass inherits the interface: it must be ready the same way.
            if is_multimodal(index, other):
                return Refusal(
                    f"the interface would reach the multimodal subclass {other.name}"
                ), []
            if not forwards_decoder_output(index, other):
                return Refusal(
                    f"the subclass {other.name} overrides forward and does not hand the "
                    "decoder's output back"
                ), []
            if theirs != {built}:
                return Refusal(f"the subclass {other.name} builds another decoder"), []
            continue
        if other in others.declared:
            continue
        for cls in sorted(theirs):
            if cls == decoder or decoder in index.ancestors(cls):
                if is_multimodal(index, other):
                    return Refusal(
                        f"{decoder.name}'s forward also runs in {other.name}, a multimodal "
                        "wrapper this recipe does not declare the interface on; it would gain "
                        "the capture without the interface"
                    ), []
                sharers.append(other)
                break
    return None, sharers


def enabled_decoders(ctx: ScanContext) -> list[ClassRef]:
    index = ctx.index
    return [ref for ref in index.classes() if EAGLE_MODEL_MIXIN in index.bases(ref)]
