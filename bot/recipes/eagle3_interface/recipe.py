"""Recipe ``eagle3-interface``: a text model whose decoder is EAGLE-3 ready lacks the declaration.

Reported exactly where declaring ``SupportsEagle3`` alone would work: the class vLLM loads as a
text-generation target does not have ``SupportsEagle3`` in its MRO, its ``self.model`` is a
decoder with ``EagleModelMixin`` in its MRO (the interface's default methods assert on that), and
the decoder's ``forward`` collects the aux hidden states. Pooling models are never targets, and
multimodal classes belong to ``eagle3-wrapper``.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import astuple
from typing import Any

from bot.recipes.base import (
    ClaimedOutcome,
    Declined,
    FileEdit,
    Finding,
    FixPlan,
    FixTests,
    PlanContext,
    Recipe,
    RegistryDecision,
    ScanContext,
    SmokeBuild,
    WriteUp,
    own_templates,
    platform_variant,
    step,
)
from bot.recipes.eagle3_analysis import (
    INTERFACE,
    SUPPORTS_EAGLE3,
    AuxCollection,
    Construction,
    aux_collection,
    class_finding,
    constructed,
    declares_eagle3,
    decoder_evidence_line,
    forwards_decoder_output,
    is_multimodal,
    is_pooling_model,
    locate,
    mixin_chain,
)
from bot.recipes.eagle3_interface.evidence import (
    AuxCollected,
    InterfaceEvidence,
    Mixin,
    Sibling,
)
from bot.recipes.evidence import At, Bound
from bot.recipes.interface_status import already_fixed, missing_variants
from bot.recipes.llm_test import declaration_test
from bot.recipes.registry_plan import plan_registry_entry
from bot.tree.index import DECODER_ATTRIBUTE, ClassIndex, ClassRef
from bot.tree.layout import INTERFACES_MODULE
from bot.tree.model_registry import RegistryEntry
from bot.tree.signatures import error_signatures

# The codemods (libcst) are imported where a plan is made: `bot scan` never pays for them.

NAME = "eagle3-interface"
TEMPLATES = own_templates(__name__)


# A declaration changes no forward pass: what the PR says in place of a model evaluation.
DECLARATION_EVALUATION = (
    "none run: the change declares an interface and changes no forward pass, so output, "
    "accuracy and serving are unchanged unless EAGLE-3-family speculative decoding is "
    "requested (which failed at load time before)."
)


class Eagle3Interface(Recipe):
    name = NAME
    description = "declare SupportsEagle3 on a model whose decoder already supports EAGLE-3"
    smoke = SmokeBuild(frozenset({"declare-interface"}))
    evidence_type = InterfaceEvidence
    replication = (
        "Reuses the existing `SupportsEagle3` protocol and the decoder's existing aux-state "
        "capture; no new code path."
    )

    def model_evaluation(self, smoke_passed: bool) -> str:
        return DECLARATION_EVALUATION

    def claimed_outcome(self, finding: Finding, targets: Sequence[str]) -> ClaimedOutcome | None:
        values = {"cls": finding.class_name, "archs": list(finding.architectures)}
        return ClaimedOutcome(f"{TEMPLATES}/outcome.j2", values)

    def evidence_line(self, finding: Finding) -> str:
        ev = finding.evidence_as(InterfaceEvidence)
        sibling = f"; sibling {ev.sibling.name}" if ev.sibling else ""
        return decoder_evidence_line(ev.decoder) + sibling

    def group_key(self, finding: Finding) -> str:
        from bot.recipes.grouping import INTERFACE_ONLY

        return INTERFACE_ONLY

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

    def plan(self, finding: Finding, ctx: PlanContext) -> FixPlan | Declined:
        """Import the interface and add it as the last base of the class (and of each of its
        platform variants), add the registry entry that puts the model under the GPU test, and
        a CPU regression test asserting ``supports_eagle3``."""
        from bot.recipes.registry_edit import registry_entry_edit

        group = ctx.group or (finding,)
        variant = platform_variant(finding) if len(group) == 1 else None
        entry, entry_why = plan_registry_entry(
            ctx.root, ctx.arch, ctx.catalogue, ctx.preferred_draft
        )
        edits = [declaration_for(ctx, f) for f in group]
        if entry is not None:
            edits.append(registry_entry_edit(entry))
        test_edit, cpu_tests = regression_test_edit(ctx, finding, variant)
        edits.append(test_edit)
        engine_tests: tuple[str, ...] = ()
        through_llm = declaration_test(ctx.root, finding, edits) if len(group) == 1 else None
        if isinstance(through_llm, Declined):
            return through_llm
        if through_llm is not None:
            edits.extend(through_llm[0])
            engine_tests = through_llm[1]
        title = f"[Model][Spec Decode] Declare {INTERFACE} on {finding.class_name}"
        return FixPlan(
            recipe=NAME,
            finding=finding,
            resolves=group,
            variant=variant,
            edits=tuple(edits),
            tests=FixTests(
                cpu=cpu_tests, gpu=(entry.gpu_test,) if entry else (), engine=engine_tests
            ),
            registry=RegistryDecision(entry, entry_why),
            writeup=WriteUp.from_folder(TEMPLATES, _writeup_context(ctx, finding, group)),
            commit_title=title + (f" ({variant} variant)" if variant else ""),
            issue_comment=(
                f"it declares `{INTERFACE}` on `{html.escape(finding.class_name)}` so EAGLE-3 "
                "speculative decoding can load it."
            ),
        )

    def explain(self, wanted: str, ctx: ScanContext) -> str | None:
        """Why a registered architecture without a finding needs no declaration."""
        for entry in ctx.registry.entries:
            if wanted not in (entry.arch, entry.class_name):
                continue
            resolved = ctx.index.resolve(entry.module, entry.class_name)
            fixed = already_fixed(ctx, wanted)
            if fixed:
                return fixed
            if any(isinstance(r, ClassRef) and is_multimodal(ctx.index, r) for r in resolved):
                return None  # a wrapper that still lacks it: eagle3-wrapper explains it
            lacking = missing_variants(ctx, wanted)
            if lacking:
                sites = ", ".join(s.site for s in lacking)
                return (
                    f"not fixed on every platform: {lacking[0].where.name} lacks {INTERFACE} in "
                    f"{sites}, and that variant is not an interface gap (its decoder lacks "
                    "EagleModelMixin or does not collect aux hidden states)"
                )
            return (
                f"{entry.arch} is not an interface gap: its decoder lacks EagleModelMixin or does "
                f"not collect aux hidden states, so declaring {INTERFACE} alone would not work"
            )
        return None


def declaration_for(ctx: PlanContext, finding: Finding) -> FileEdit:
    source = (ctx.root / finding.path).read_text(encoding="utf-8")
    return declare_interface_edit(finding.path, source, finding.class_name)


def declare_interface_edit(path: str, source: str, class_name: str) -> FileEdit:
    """The declaration of the interface on ``class_name`` in the file at ``path`` (whose text is
    ``source``); publish re-applies it on the base text."""
    from bot.codemods.bases import append_base_class
    from bot.codemods.imports import add_import_name
    from bot.codemods.spans import ClassHeader, Imports

    module = interfaces_import_module(source, path)
    return FileEdit(
        path=path,
        kind="declare-interface",
        description=f"import {INTERFACE} and add it as the last base of {class_name}",
        steps=(
            step(add_import_name, module=module, name=INTERFACE),
            step(append_base_class, class_name=class_name, base=INTERFACE),
        ),
        confined_to=(Imports(), ClassHeader(class_name)),
    )


def interfaces_import_module(source: str, path: str) -> str:
    """How this file imports from interfaces: an existing import wins, else the file's style."""
    if "from .interfaces import" in source:
        return ".interfaces"
    if f"from {INTERFACES_MODULE} import" in source:
        return INTERFACES_MODULE
    in_models_package = path.startswith("vllm/model_executor/models/")
    return ".interfaces" if in_models_package and "\nfrom ." in source else INTERFACES_MODULE


def regression_test_edit(
    ctx: PlanContext, finding: Finding, variant: str | None
) -> tuple[FileEdit, tuple[str, ...]]:
    """The CPU test asserting the class advertises the interface: the model package's own
    test file when it has one, else the parametrized test in tests/models/test_registry.py."""
    from bot.codemods.regression_test import (
        REGISTRY_TEST,
        add_advertises_test,
        add_eagle3_regression_test,
        add_registry_eagle3_test,
        add_variant_test,
        regression_test_spans,
        variant_test_name,
    )

    planned = add_eagle3_regression_test(
        ctx.root,
        class_name=finding.class_name,
        class_module=finding.module,
        archs=[ctx.arch],
        platform_variant=variant is not None,
    )
    if planned.path == REGISTRY_TEST:
        codemod = step(add_registry_eagle3_test, archs=(ctx.arch,))
    elif variant is not None and planned.node_ids[0].endswith(
        f"::{variant_test_name(finding.class_name, variant)}"
    ):
        codemod = step(
            add_variant_test,
            class_module=finding.module,
            class_name=finding.class_name,
            variant=variant,
        )
    else:
        codemod = step(
            add_advertises_test, class_module=finding.module, class_name=finding.class_name
        )
    edit = FileEdit(
        path=planned.path,
        kind="regression-test",
        description=f"assert supports_eagle3({finding.class_name}) on the CPU",
        steps=(codemod,),
        confined_to=regression_test_spans(),
    )
    return edit, tuple(planned.node_ids)


def _writeup_context(
    ctx: PlanContext, finding: Finding, group: tuple[Finding, ...]
) -> dict[str, Any]:
    url = ctx.url
    ev = finding.evidence_as(InterfaceEvidence)
    decoder, sibling, mixin, aux = ev.decoder, ev.sibling, ev.mixin, ev.aux
    assigned = decoder.assigned_at
    return {
        "files": sorted({f.path for f in group}),
        "where": {**ev.cls.to_json(), "url": url(ev.cls.path, ev.cls.line)},
        "decoder": {
            **decoder.to_json(),
            "url": url(decoder.path, decoder.line),
            "assigned_path": assigned.path,
            "assigned_line": assigned.line,
            "assigned_url": url(assigned.path, assigned.line),
        },
        "mixin": {**mixin.to_json(), "url": url(mixin.path, mixin.line)},
        "aux": {**aux.to_json(), "url": url(aux.path, aux.forward_line)},
        "sibling": {**sibling.to_json(), "url": url(sibling.path, sibling.line)}
        if sibling
        else None,
        "crash_sites": [
            {
                "message": s.message_prefix,
                "path": s.path,
                "line": s.line,
                "url": url(s.path, s.line),
            }
            for s in error_signatures(ctx.root)
        ],
    }


def registered_targets(ctx: ScanContext) -> dict[ClassRef, list[RegistryEntry]]:
    """Classes the registry loads for text generation that lack SupportsEagle3, not pooling
    (once per scan: every recipe asks)."""
    return dict(ctx.remembered(f"{__name__}.registered_targets", lambda: _registered(ctx)))


def _registered(ctx: ScanContext) -> dict[ClassRef, list[RegistryEntry]]:
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


def _sibling_evidence(
    index: ClassIndex, sibling: tuple[ClassRef, ClassRef, str] | None
) -> Sibling | None:
    if sibling is None:
        return None
    cls, other_decoder, kinship = sibling
    return Sibling(*astuple(locate(index, cls)), decoder=other_decoder.name, kinship=kinship)


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
    evidence = InterfaceEvidence(
        cls=locate(index, ref),
        decoder=Bound(
            decoder.name,
            decoder.path,
            decoder.line,
            attribute=f"self.{construction.attribute}",
            assigned_at=At(index.path_of(construction.owner), construction.line),
        ),
        mixin=Mixin(*astuple(locate(index, chain[-1])), chain=tuple(c.name for c in chain)),
        aux=AuxCollected(
            path=index.path_of(aux.forward_owner),
            forward_line=aux.forward_line,
            helper_lines=tuple(aux.helper_lines),
            layer_check_lines=tuple(aux.layer_check_lines),
        ),
        sibling=_sibling_evidence(index, sibling),
    )
    via = "" if chain[-1] == construction.cls else f" (via {chain[-1].name})"
    summary = (
        f"{ref.name} builds self.{construction.attribute} = {construction.cls.name}, which has "
        f"EagleModelMixin{via} and collects aux hidden states in forward, but {ref.name} does "
        "not declare SupportsEagle3"
    )
    return class_finding(NAME, ref, entries, evidence, summary)


RECIPE = Eagle3Interface()
