"""Recipe ``eagle3-interface``: a text model whose decoder is EAGLE-3 ready lacks the declaration.

Reported exactly where declaring ``SupportsEagle3`` alone would work: the class vLLM loads as a
text-generation target does not have ``SupportsEagle3`` in its MRO, its ``self.model`` is a
decoder with ``EagleModelMixin`` in its MRO (the interface's default methods assert on that), and
the decoder's ``forward`` collects the aux hidden states. Pooling models are never targets, and
multimodal classes belong to ``eagle3-wrapper``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from bot.recipes.base import Finding, ScanContext
from bot.recipes.eagle3_analysis import (
    SUPPORTS_EAGLE3,
    AuxCollection,
    Construction,
    aux_collection,
    class_finding,
    constructed,
    declares_eagle3,
    is_pooling_model,
    locate,
    mixin_chain,
)
from bot.tree.index import INTERFACES_MODULE, ClassIndex, ClassRef
from bot.tree.model_registry import RegistryEntry

NAME = "eagle3-interface"
DECODER_ATTRIBUTE = "model"


class Eagle3Interface:
    name = NAME
    description = "declare SupportsEagle3 on a model whose decoder already supports EAGLE-3"

    def detect(self, ctx: ScanContext) -> list[Finding]:
        findings: list[Finding] = []
        targets = registered_targets(ctx)
        siblings = _declared_siblings(ctx)
        for ref, entries in targets.items():
            if is_multimodal(ctx.index, ref):
                continue
            ready = eagle3_ready_decoder(ctx.index, ref)
            if ready is None:
                continue
            construction, chain, aux = ready
            findings.append(_finding(ctx.index, ref, entries, construction, chain, aux, siblings))
        return findings


def registered_targets(ctx: ScanContext) -> dict[ClassRef, list[RegistryEntry]]:
    """Classes the registry loads for text generation that lack SupportsEagle3, not pooling."""
    by_class: dict[ClassRef, list[RegistryEntry]] = defaultdict(list)
    for entry in ctx.registry.entries:
        for resolved in ctx.index.resolve(entry.module, entry.class_name):
            if isinstance(resolved, ClassRef):
                by_class[resolved].append(entry)
    targets: dict[ClassRef, list[RegistryEntry]] = {}
    for ref, entries in sorted(by_class.items()):
        if is_pooling_model(ctx.index, ref, entries):
            continue
        if not any(e.category in ("text_generation", "multimodal") for e in entries):
            continue  # speculative-decoding drafts, transformers backends
        targets[ref] = entries
    return targets


def is_multimodal(index: ClassIndex, ref: ClassRef) -> bool:
    # SupportsMultiModal brings get_language_model(), which the interface follows instead of self.
    return any(
        isinstance(a, ClassRef) and a.name == "SupportsMultiModal" for a in index.ancestors(ref)
    )


def eagle3_ready_decoder(
    index: ClassIndex, ref: ClassRef
) -> tuple[Construction, list[ClassRef], AuxCollection] | None:
    """The decoder that makes ``ref`` EAGLE-3 capable once declared, or None."""
    if declares_eagle3(index, ref) or not forwards_decoder_output(index, ref):
        return None
    for construction in constructed(index, ref, DECODER_ATTRIBUTE):
        chain = mixin_chain(index, construction.cls)
        aux = aux_collection(index, construction.cls)
        if chain and aux is not None and aux.collects:
            return construction, chain, aux
    return None


def forwards_decoder_output(index: ClassIndex, ref: ClassRef) -> bool:
    """Whether ``ref.forward`` returns what ``self.model(...)`` returned, untouched.

    The decoder returns ``(hidden_states, aux_hidden_states)`` when aux layers are set; a
    forward that post-processes its output would break on the tuple, so the declaration alone
    would not be enough. A class without a forward of its own in the index is not judged here.
    """
    found = index.find_method(ref, "forward")
    if found is None:
        return True
    return DECODER_ATTRIBUTE in found[1].get("passthrough", [])


def _declared_siblings(ctx: ScanContext) -> dict[ClassRef, ClassRef]:
    """decoder class -> a registered generation model that declares SupportsEagle3 over it."""
    candidates: dict[ClassRef, list[ClassRef]] = defaultdict(list)
    for ref in sorted(_registered_generation_classes(ctx)):
        if not declares_eagle3(ctx.index, ref):
            continue
        for construction in constructed(ctx.index, ref, DECODER_ATTRIBUTE):
            if mixin_chain(ctx.index, construction.cls):
                candidates[construction.cls].append(ref)

    def preference(decoder: ClassRef, ref: ClassRef) -> tuple[bool, bool, ClassRef]:
        # The model defined next to its decoder (LlamaForCausalLM for LlamaModel) reads best.
        direct = SUPPORTS_EAGLE3 in ctx.index.bases(ref)
        return (ref.module != decoder.module, not direct, ref)

    return {
        decoder: min(refs, key=lambda ref: preference(decoder, ref))
        for decoder, refs in candidates.items()
    }


def _registered_generation_classes(ctx: ScanContext) -> set[ClassRef]:
    classes: set[ClassRef] = set()
    for entry in ctx.registry.entries:
        if entry.category not in ("text_generation", "multimodal"):
            continue
        for resolved in ctx.index.resolve(entry.module, entry.class_name):
            if isinstance(resolved, ClassRef) and not is_pooling_model(ctx.index, resolved, []):
                classes.add(resolved)
    return classes


def _sibling(
    index: ClassIndex, decoder: ClassRef, siblings: dict[ClassRef, ClassRef]
) -> tuple[ClassRef, ClassRef, str] | None:
    """A class declaring SupportsEagle3 over the same kind of decoder, with the kinship."""
    if decoder in siblings:
        return siblings[decoder], decoder, "the same decoder class"
    lineage = [
        a
        for a in index.ancestors(decoder)
        if isinstance(a, ClassRef) and a != decoder and a.module != INTERFACES_MODULE
    ]
    for ancestor in lineage:  # nearest first: a sibling built on the decoder's own parent
        if ancestor in siblings:
            return siblings[ancestor], ancestor, f"{decoder.name}'s base class {ancestor.name}"
    for other_decoder, cls in sorted(siblings.items()):
        shared = set(lineage) & set(index.ancestors(other_decoder))
        if shared:
            common = min(shared)
            return cls, other_decoder, f"a decoder that also derives from {common.name}"
    for other_decoder, cls in sorted(siblings.items()):
        if other_decoder.module == decoder.module:
            return cls, other_decoder, "a decoder in the same module"
    best = _closest_by_name(decoder, siblings)
    if best is not None:
        other_decoder, cls = best
        return cls, other_decoder, "a decoder that also takes EagleModelMixin and taps aux states"
    return None


def _closest_by_name(
    decoder: ClassRef, siblings: dict[ClassRef, ClassRef]
) -> tuple[ClassRef, ClassRef] | None:
    def shared_prefix(other: ClassRef) -> int:
        count = 0
        for a, b in zip(decoder.name, other.name):
            if a != b:
                break
            count += 1
        return count

    ranked = sorted(siblings.items(), key=lambda item: (-shared_prefix(item[0]), item[0]))
    return ranked[0] if ranked else None


def _finding(
    index: ClassIndex,
    ref: ClassRef,
    entries: list[RegistryEntry],
    construction: Construction,
    chain: list[ClassRef],
    aux: AuxCollection,
    siblings: dict[ClassRef, ClassRef],
) -> Finding:
    decoder = locate(index, construction.cls)
    sibling = _sibling(index, construction.cls, siblings)
    evidence: dict[str, Any] = {
        "decoder": {
            **decoder.to_json(),
            "attribute": f"self.{construction.attribute}",
            "assigned_at": {"path": index.path_of(construction.owner), "line": construction.line},
        },
        "mixin": {**locate(index, chain[-1]).to_json(), "chain": [c.name for c in chain]},
        "aux": {
            "path": index.path_of(aux.forward_owner),
            "forward_line": aux.forward_line,
            "helper_lines": list(aux.helper_lines),
            "layer_check_lines": list(aux.layer_check_lines),
        },
        "sibling": None,
    }
    if sibling is not None:
        cls, other_decoder, kinship = sibling
        evidence["sibling"] = {
            **locate(index, cls).to_json(),
            "decoder": other_decoder.name,
            "kinship": kinship,
        }
    via = "" if chain[-1] == construction.cls else f" (via {chain[-1].name})"
    summary = (
        f"{ref.name} builds self.{construction.attribute} = {construction.cls.name}, which has "
        f"EagleModelMixin{via} and collects aux hidden states in forward, but {ref.name} does "
        "not declare SupportsEagle3"
    )
    return class_finding(NAME, index, ref, entries, evidence, summary)


RECIPE = Eagle3Interface()
