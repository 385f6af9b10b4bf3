"""Recipe ``eagle3-enable``: the decoder learns to collect aux hidden states, the target declares
``SupportsEagle3``.

Candidates are the classes vLLM loads for text generation (never pooling, never multimodal:
those are ``eagle3-wrapper``'s) that lack the interface, whose decoder lacks ``EagleModelMixin``
and does not collect. Each is reported; the ones whose decoder loop the analysis
(:mod:`bot.recipes.eagle3_enable.analysis`) names a shape for, and whose target and registered
subclasses hand the decoder's output back, are planned; the others carry "needs a human:
<reason>" in their finding and plan, and are never patched.

The edit follows the release's own enabled decoders: the mixin imported the way the file
imports from ``interfaces``, the capture counted from ``self.start_layer`` when the tree's
decoders use ``enumerate(..., start=self.start_layer)`` (from ``0`` otherwise), the tuple
returned only when aux states were collected. Pipeline parallelism is left at the mixin's
default (``supports_aux_hidden_states_over_pp`` false where the release has it): EAGLE-3 with
PP > 1 stays refused by vLLM for this model, which the write-up says.

A decoder at ``self.transformer`` / ``self.backbone`` (or whose layers are not ``self.layers``)
gets the two methods the interface's defaults cannot provide, written on the target the way the
release's own ``NemotronParse`` does (``self.decoder._set_aux_hidden_state_layers(layers)``).

The interface's two methods are not the only way vLLM reaches the decoder: the release's
drafter loaders take it from ``<target>.model`` and share its input embedding by the names they
look up there (both read from the tree, :mod:`bot.tree.drafter_loader`). A target those lines
refuse is fixed in vLLM's core once, by the ``core-drafter-loader`` plan: when nothing else
refuses it, its plan is ready and *builds on* that core plan (``evidence.builds_on``); else
every blocker is named, the loader lines among them.

This module is the recipe (its plan, the capture, the edits, the finding); the candidates and
their refusals are :mod:`.detection`'s, what the forward test needs of the decoder's file
:mod:`.forward_reads`'s, the write-up's context :mod:`.writeup`'s.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING, Any

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
from bot.recipes.eagle3_analysis import INTERFACE, MIXIN, class_finding, locate
from bot.recipes.eagle3_broken_claim.evidence import BrokenClaimEvidence
from bot.recipes.eagle3_enable.analysis import DecoderShape, Refusal, absolute_convention
from bot.recipes.eagle3_enable.candidate import Candidate
from bot.recipes.eagle3_enable.detection import candidates, delegates, enabled_decoders
from bot.recipes.eagle3_enable.evidence import EnableEvidence
from bot.recipes.eagle3_enable.forward_reads import branched_step, capture_norm, forward_test_fields
from bot.recipes.eagle3_enable.writeup import enable_writeup_context
from bot.recipes.eagle3_interface.recipe import (
    declaration_for,
    interfaces_import_module,
    regression_test_edit,
)
from bot.recipes.evidence import At, Bound, SharedSet
from bot.recipes.llm_test import (
    example_arch,
    follows_agents_rules,
    llm_test_edits,
    llm_test_unavailable,
)
from bot.recipes.registry_plan import plan_registry_entry
from bot.tree.index import ClassIndex

if TYPE_CHECKING:
    from bot.codemods.spans import Span


NAME = "eagle3-enable"
BROKEN_CLAIM = "eagle3-broken-claim"
TEMPLATES = own_templates(__name__)


class Eagle3Enable(Recipe):
    name = NAME
    description = "teach the decoder to collect aux hidden states and declare SupportsEagle3"

    # The edit changes the decoder's forward: verify and publish require the CPU forward check.
    required_checks = ("smoke",)
    # Every plan carries the contributed test that runs the patched forward: publish refuses
    # a plan without it (dropping it would open a PR whose capture no test exercises).
    # (through LLM where the tree has tests/AGENTS.md: bot.recipes.llm_test).
    required_edit_kinds = ("aux-forward-test|llm-test",)
    engine_gated = True
    evidence_type = EnableEvidence
    replication = (
        "Reuses `EagleModelMixin` and the capture the release's other decoders use; no new helper."
    )

    def claimed_outcome(self, finding: Finding, targets: Sequence[str]) -> ClaimedOutcome | None:
        # Serving is what the engine shows (the methods, refused before, ran after) and the
        # test through LLM; the registry test shows the declaration only.
        values = {
            "cls": finding.class_name,
            "archs": list(finding.architectures),
            "targets": list(targets),
        }
        return ClaimedOutcome(f"{TEMPLATES}/outcome.j2", values, ("engine", "engine-tests"))

    def model_evaluation(self, smoke_passed: bool) -> str:
        if not smoke_passed:
            return "none recorded."
        return "none run; without aux layers the output is unchanged (the second claim)."

    smoke = SmokeBuild(
        # the target in the decoder's file, or declared in its own (a declare-interface edit)
        frozenset({"enable-decoder-and-declare", "declare-interface"}),
        set_declaring="enable-shared-decoder",
        set_kinds=frozenset({"enable-shared-decoder", "declare-shared-interface"}),
    )

    def evidence_line(self, finding: Finding) -> str:
        from bot.recipes.eagle3_analysis import decoder_evidence_line

        ev = finding.evidence_as(EnableEvidence)
        if ev.refused:  # why a human is needed
            why = f"; {ev.refused}"
        else:
            why = f"; {ev.shape.loop} loop, {ev.shape.residual}" if ev.shape else ""
        if ev.builds_on is not None:
            why += f"; builds on {ev.builds_on.recipe} ({ev.builds_on.name})"
        return decoder_evidence_line(ev.decoder) + why

    def detect(self, ctx: ScanContext) -> list[Finding]:
        return [_finding(ctx.index, c) for c in candidates(ctx)]

    def plan(self, finding: Finding, ctx: PlanContext) -> FixPlan | Declined:
        evidence = finding.evidence_as(EnableEvidence)
        if evidence.refused:
            return Declined(evidence.refused)
        group = ctx.group or (finding,)
        if len(group) > 1:
            return Declined(
                f"needs a human: {finding.class_name} has {len(group)} platform variants"
            )
        if evidence.shared:
            from bot.recipes.eagle3_enable.shared import shared_plan

            return shared_plan(finding, ctx)
        capture = capture_of(ctx.scan, finding.class_name, finding.path)
        if capture is None:
            return Declined(f"needs a human: {finding.class_name} is no longer a clear candidate")
        candidate, shape, absolute = capture.candidate, capture.shape, capture.absolute
        if delegates(candidate.reached, shape.layers_attr) and capture.decoder_path != finding.path:
            return Declined(
                f"needs a human: {finding.class_name} needs the two delegating methods and is "
                f"not in its decoder's file ({capture.decoder_path}): the recipe writes them in "
                "one file only"
            )
        edits = _edits(ctx, finding, candidate, shape, absolute)
        entry, entry_why = plan_registry_entry(
            ctx.root, ctx.arch, ctx.catalogue, ctx.preferred_draft
        )
        if entry is not None:
            from bot.recipes.registry_edit import registry_entry_edit

            edits.append(registry_entry_edit(entry))
        variant = platform_variant(finding)
        test_edit, cpu_tests = regression_test_edit(ctx, finding, variant)
        edits.append(test_edit)
        engine_tests: tuple[str, ...] = ()
        through_llm: bool | str = follows_agents_rules(ctx.root)
        if not through_llm:
            forward_test = _aux_forward_test(ctx, finding, candidate, shape)
            if isinstance(forward_test, Declined):  # the test through LLM instead, if it can
                if (missing := llm_test_unavailable(ctx.root)) is not None:
                    return Declined(f"{forward_test.reason}; no test through LLM either: {missing}")
                through_llm = forward_test.reason
            else:
                edits.append(forward_test[0])
                cpu_tests = (*cpu_tests, forward_test[1])
        if through_llm:
            targets = llm_targets(ctx.scan, [(candidate, shape)])
            contributed = contributed_llm_test(ctx, targets, edits)
            if isinstance(contributed, Declined):
                return contributed
            edits.extend(contributed[0])
            engine_tests = contributed[1]
        claims = broken_claims_fixed(ctx, candidate)
        context = enable_writeup_context(ctx, finding, shape, absolute, through_llm)
        if branched := branched_step(ctx.scan.index, candidate.captured):
            path = ctx.scan.index.path_of(candidate.captured)
            context |= {"branched": branched, "branched_url": ctx.url(path, branched["line"])}
        context["broken_claims"] = [
            {"cls": c.class_name, "why": c.evidence_as(BrokenClaimEvidence).why} for c in claims
        ]
        return FixPlan(
            recipe=NAME,
            finding=finding,
            resolves=(finding, *claims),
            variant=variant,
            edits=tuple(edits),
            tests=FixTests(
                cpu=cpu_tests, gpu=(entry.gpu_test,) if entry else (), engine=engine_tests
            ),
            registry=RegistryDecision(entry, entry_why),
            writeup=WriteUp.from_folder(TEMPLATES, context),
            commit_title=(
                f"[Model][Spec Decode] Support EAGLE-3 in {finding.class_name}"
                + (f" ({variant} variant)" if variant else "")
            ),
            issue_comment=(
                f"its decoder `{html.escape(candidate.decoder.name)}` collects the aux hidden "
                f"states and `{html.escape(finding.class_name)}` declares `{INTERFACE}`, so "
                "EAGLE-3 speculative decoding can load it."
            ),
        )


@dataclass(frozen=True)
class Capture:
    """How the recipe makes one target's decoder collect the aux hidden states, all of it read
    from the tree: the candidate, its decoder's shape (loop and residual semantics), and whether
    the tree's enabled decoders count layers from ``self.start_layer``. Publish derives it again
    from the base commit and never takes it from a plan."""

    candidate: Candidate
    shape: DecoderShape
    absolute: bool
    decoder_path: str
    target_path: str

    @property
    def decoder(self) -> str:
        return self.candidate.captured.name

    def capture_args(self) -> dict[str, Any]:
        """The arguments of :func:`bot.codemods.nested_capture.add_capture`."""
        return _capture_args(self.decoder, self.shape, self.absolute)


def capture_of(scan: ScanContext, class_name: str, path: str | None = None) -> Capture | None:
    """The capture for the ready candidate ``class_name`` (in ``path``, where given); None when
    there is no such candidate, more than one, its decoder is refused, or it is fixed only
    together with other targets (:func:`bot.recipes.eagle3_enable.shared.shared_set_of`)."""
    found = [c for c in candidates(scan) if c.ref.name == class_name]
    if path is not None:
        found = [c for c in found if scan.index.path_of(c.ref) == path]
    if len(found) != 1 or found[0].shared:
        return None
    return capture_for(scan, found[0])


def capture_for(scan: ScanContext, candidate: Candidate) -> Capture | None:
    """The capture for one ready candidate (its decoder's forward, or the one it inherits)."""
    if not isinstance(candidate.verdict, DecoderShape):
        return None
    index = scan.index
    absolute = absolute_convention(index, enabled_decoders(scan))
    return Capture(
        candidate,
        candidate.verdict,
        absolute,
        index.path_of(candidate.captured),
        index.path_of(candidate.ref),
    )


def _capture_args(decoder: str, shape: DecoderShape, absolute: bool) -> dict[str, Any]:
    """The arguments of :func:`bot.codemods.nested_capture.add_capture`."""
    nested = {"child": shape.child, "child_attr": shape.child_attr} if shape.child else {}
    return {
        "class_name": decoder,
        "residual": shape.residual_name,
        # an "every" loop has no self.start_layer to count from: from 0, as its stage is all
        "absolute": absolute and shape.loop != "every",
        "stage_slice": shape.loop == "whole",
        **nested,
        # the decoder's own pre-mixin capture goes first, for the mixin's to replace
        **({"legacy": True} if shape.legacy_capture else {}),
    }


def broken_claims_fixed(ctx: PlanContext, candidate: Candidate) -> list[Finding]:
    """The ``eagle3-broken-claim`` reports this enablement fixes: classes that already declare
    the interface and reach this very decoder, which lacks the mixin (Exaone4_5 through
    Exaone4Model), or a subclass of it running the same ``forward``. The re-scan must see them
    gone; the write-up cites them as the cause."""
    from bot.recipes.eagle3_broken_claim.fix import repairs

    index = ctx.scan.index
    fixed: list[Finding] = []
    for other in ctx.findings:
        if other.recipe != BROKEN_CLAIM:
            continue
        claim = other.evidence_as(BrokenClaimEvidence)
        decoder = claim.decoder
        if claim.broken != "no-mixin":
            continue
        holders = [
            ref
            for ref in index.classes()
            if ref.name == decoder.name and index.path_of(ref) == decoder.path
        ]
        if any(repairs(ctx.scan, candidate, holder) for holder in holders):
            fixed.append(other)
    return fixed


def _aux_forward_test(
    ctx: PlanContext, finding: Finding, candidate: Candidate, shape: DecoderShape
) -> tuple[FileEdit, str] | Declined:
    """The contributed CPU test that runs the patched forward (one new file, the way
    upstream's Plamo3 aux-layer test is written) and its node id."""
    from bot.codemods.aux_forward_test import (
        aux_forward_test_name,
        aux_test_path,
        create_aux_forward_test,
    )

    fields = forward_test_fields(ctx.scan, candidate, shape)
    if isinstance(fields, Declined):
        return fields
    path = aux_test_path(finding.module)
    if (ctx.root / path).exists():
        return Declined(f"needs a human: no contributed forward test ({path} exists)")
    edit = FileEdit(
        path=path,
        kind="aux-forward-test",
        description=(
            f"a CPU test running {finding.class_name}'s forward on stand-in layers: the aux "
            "states captured are the residual stream, the output unchanged without them"
        ),
        steps=(step(create_aux_forward_test, **fields),),
        confined_to=(),
        creates=True,
    )
    return edit, f"{path}::{aux_forward_test_name(finding.class_name)}"


def llm_targets(
    scan: ScanContext, members: list[tuple[Candidate, DecoderShape]]
) -> dict[str, str | None] | Declined:
    """The LLM test's targets for the candidates one plan enables: each one's architecture
    with an example model, and its decoder's final norm (publish derives the same)."""
    targets: dict[str, str | None] = {}
    missing: Declined | None = None
    for candidate, shape in members:
        arch = example_arch(scan.root, [e.arch for e in candidate.entries])
        if isinstance(arch, Declined):
            missing = missing or arch
            continue
        targets[arch] = capture_norm(scan, candidate, shape)
    # A set's member without an example model is left out: the others run the same capture.
    if missing is not None and not targets:
        # None has one available online (Dbrx): the entry is written all the same, never a
        # refusal for want of a test; CI's run skips the case (check_available_online), as
        # upstream's own initialization test skips such an entry, and `bot verify` names it.
        candidate, shape = members[0]
        return {candidate.entries[0].arch: capture_norm(scan, candidate, shape)}
    return targets


def contributed_llm_test(
    ctx: PlanContext, targets: dict[str, str | None] | Declined, edits: list[FileEdit]
) -> tuple[list[FileEdit], tuple[str, ...]] | Declined:
    """For a tree with tests/AGENTS.md: the test through LLM, placed where a CI step runs it
    for the plan's model files."""
    if isinstance(targets, Declined):
        return targets
    changed = sorted({e.path for e in edits if e.path.startswith("vllm/")})
    planned = llm_test_edits(ctx.root, targets, changed)
    if isinstance(planned, Declined):
        return planned
    return planned[0], planned[1]


def _edits(
    ctx: PlanContext,
    finding: Finding,
    candidate: Candidate,
    shape: DecoderShape,
    absolute: bool,
) -> list[FileEdit]:
    # The codemods (libcst) are imported where a plan is made: `bot scan` never pays for them.
    from bot.codemods.bases import append_base_class
    from bot.codemods.delegate_methods import add_decoder_delegation
    from bot.codemods.imports import add_import_name
    from bot.codemods.nested_capture import add_capture
    from bot.codemods.spans import AfterClassBody, ClassBody, ClassHeader, Imports

    index = ctx.scan.index
    decoder = candidate.captured if shape.inner else candidate.decoder
    path = index.path_of(decoder)
    source = (ctx.root / path).read_text(encoding="utf-8")
    module = interfaces_import_module(source, path)
    # A nested decoder's child (Plamo3Decoder) takes the mixin too and does the collecting; a
    # child decoder handed back whole (OPTDecoder) takes it alone (its parent is unchanged).
    classes = [decoder.name, *([shape.child] if shape.child else [])]
    steps = [
        step(add_import_name, module=module, name=MIXIN),
        *(step(append_base_class, class_name=name, base=MIXIN) for name in classes),
        step(add_capture, **_capture_args(decoder.name, shape, absolute)),
    ]
    spans: list[Span] = [Imports()]
    for name in classes:
        spans += [ClassHeader(name), ClassBody(name)]
    kind = "enable-decoder"
    description = (
        f"{decoder.name} takes {MIXIN} and collects the aux hidden states in forward "
        f"({shape.loop} loop, {shape.residual})"
        + (
            f", which {candidate.decoder.name} hands back whole from self.{shape.inner_attr}"
            if shape.inner
            else ""
        )
        if not shape.child
        else f"{decoder.name} and its child {shape.child} take {MIXIN}: {shape.child} collects "
        f"the aux hidden states in its loop ({shape.loop}, {shape.residual}) and hands them "
        f"back, {decoder.name} passes the aux layers down"
    )
    delegation = delegates(candidate.reached, shape.layers_attr)
    if path != finding.path:
        return [
            FileEdit(path, kind, description, tuple(steps), tuple(spans)),
            declaration_for(ctx, finding),
        ]
    steps += [
        step(add_import_name, module=module, name=INTERFACE),
        step(append_base_class, class_name=finding.class_name, base=INTERFACE),
    ]
    spans.append(ClassHeader(finding.class_name))
    description += f"; {finding.class_name} declares {INTERFACE}"
    if delegation:
        steps.append(
            step(
                add_decoder_delegation,
                class_name=finding.class_name,
                attribute=candidate.reached,
                layers=shape.layers_attr,
            )
        )
        spans += [ClassBody(finding.class_name), AfterClassBody(finding.class_name)]
        description += (
            f" and reaches self.{candidate.reached} (layers at "
            f"self.{candidate.reached}.{shape.layers_attr}) in the interface's two methods"
        )
    return [FileEdit(path, "enable-decoder-and-declare", description, tuple(steps), tuple(spans))]


def _finding(index: ClassIndex, candidate: Candidate) -> Finding:
    ref, decoder, verdict = candidate.ref, candidate.decoder, candidate.verdict
    shared = None
    if candidate.shared:
        shared = SharedSet(
            decoder=candidate.captured.name,
            targets=tuple(r.name for r in candidate.shared),
            paths=tuple(index.path_of(r) for r in candidate.shared),
            lead=candidate.lead.name if candidate.lead else None,
        )
    evidence = EnableEvidence(
        cls=locate(index, ref),
        decoder=Bound(
            *astuple(locate(index, decoder)),
            attribute=f"self.{candidate.attribute}",
            assigned_at=At(index.path_of(candidate.assigned_owner), candidate.assigned_line),
        ),
        shape=verdict if isinstance(verdict, DecoderShape) else None,
        refused=str(verdict) if isinstance(verdict, Refusal) else None,
        shared=shared,
        builds_on=candidate.builds_on,
    )
    if isinstance(verdict, Refusal):
        summary = (
            f"{ref.name} lacks SupportsEagle3 and its decoder {decoder.name} does not collect "
            f"aux hidden states; {verdict}"
        )
    elif candidate.shared:
        others = ", ".join(r.name for r in candidate.shared if r != ref)
        summary = (
            f"{ref.name} lacks SupportsEagle3 and its decoder {decoder.name} lacks "
            f"EagleModelMixin; {candidate.captured.name}.forward ({verdict.loop} loop, "
            f"{verdict.residual}) can collect the aux hidden states, and it runs in {others} "
            f"too, so the {len(candidate.shared)} targets are fixed together"
        )
    else:
        summary = (
            f"{ref.name} lacks SupportsEagle3 and its decoder {decoder.name} lacks "
            f"EagleModelMixin; its forward ({verdict.loop} loop, {verdict.residual}) can "
            "collect the aux hidden states"
        )
    if candidate.builds_on is not None:
        summary += f", once the {candidate.builds_on.recipe} plan is applied"
    return class_finding(NAME, ref, candidate.entries, evidence, summary)


RECIPE = Eagle3Enable()
