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
"""

from __future__ import annotations

import ast
import functools
import html
from dataclasses import astuple, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.recipes.base import (
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
from bot.recipes.core_drafter_loader.evidence import NAME as CORE_LOADER
from bot.recipes.core_drafter_loader.evidence import builds_on as loader_dependency
from bot.recipes.eagle3_analysis import (
    EAGLE_MODEL_MIXIN,
    INTERFACE,
    MIXIN,
    AuxCollection,
    aux_collection,
    class_finding,
    constructed,
    declares_eagle3,
    forwards_decoder_output,
    is_multimodal,
    locate,
    mixin_chain,
)
from bot.recipes.eagle3_broken_claim.evidence import BrokenClaimEvidence
from bot.recipes.eagle3_enable.analysis import (
    NEEDS_HUMAN,
    DecoderShape,
    Refusal,
    absolute_convention,
    decoder_shape,
)
from bot.recipes.eagle3_enable.evidence import EnableEvidence
from bot.recipes.eagle3_interface.recipe import (
    declaration_for,
    interfaces_import_module,
    registered_targets,
    regression_test_edit,
)
from bot.recipes.evidence import At, Bound, BuildsOn, SharedSet
from bot.recipes.llm_test import (
    AGENTS_RULES,
    example_arch,
    follows_agents_rules,
    llm_test_edits,
    llm_test_unavailable,
)
from bot.recipes.registry_plan import plan_registry_entry
from bot.tree.drafter_loader import REWRITTEN as _REWRITTEN
from bot.tree.drafter_loader import Loaders, LoaderSite, loader_sites
from bot.tree.index import DECODER_ATTRIBUTE, ClassIndex, ClassRef
from bot.tree.model_registry import RegistryEntry

if TYPE_CHECKING:
    from bot.codemods.spans import Span

NAME = "eagle3-enable"
BROKEN_CLAIM = "eagle3-broken-claim"
TEMPLATES = own_templates(__name__)
# Where a decoder under another name lives: its target gets the two delegating methods.
OTHER_DECODER_ATTRIBUTES = ("transformer", "backbone", "decoder", "language_model")
VOCAB_EMBEDDING = "VocabParallelEmbedding"


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

    def model_evaluation(self, smoke_passed: bool) -> str:
        if not smoke_passed:
            return "none recorded."
        return (
            "with no aux hidden-state layers requested, the patched model's output equals the "
            "unpatched model's bit for bit (the smoke check above, a tiny random config on "
            "CPU); no end-to-end model evaluation was run."
        )

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
        if branched := _branched_step(ctx.scan.index, candidate.captured):
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
    absolute = absolute_convention(index, _enabled_decoders(scan))
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


def capture_norm(scan: ScanContext, candidate: Candidate, shape: DecoderShape) -> str | None:
    """The attribute of the final norm the captured decoder applies before returning, which
    the LLM test passes the last captured state through; None where the target applies it."""
    path = scan.root / scan.index.path_of(candidate.captured)
    return _norm_attribute(path, candidate.captured.name, shape)


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


# The residual semantics the contributed forward test has a stand-in layer for (the keys of
# bot.codemods.aux_forward_test's stand-ins; a test keeps the two equal). Named here so that
# the scan, which asks every candidate for its test's fields, does not import the codemods.
FORWARD_TEST_RESIDUALS = frozenset(
    {"residual-stream", "explicit-add", "full-stream-pair", "no-residual"}
)


def forward_test_fields(
    scan: ScanContext, candidate: Candidate, shape: DecoderShape
) -> dict[str, Any] | Declined:
    """The contributed forward test's fields (:func:`bot.codemods.aux_forward_test.
    new_aux_test_file`), all read from the tree: the target's module, the decoder, the residual
    semantics, the final norm's attribute and the stream multipliers set to 1.0."""
    path = scan.index.path_of(candidate.ref)
    if scan.index.path_of(candidate.decoder) != path:
        return Declined(
            f"needs a human: {candidate.decoder.name} is not in {candidate.ref.name}'s module, "
            "and the contributed forward test imports one module"
        )
    if shape.residual not in FORWARD_TEST_RESIDUALS:
        return Declined(f"needs a human: no forward test for {shape.residual} decoders yet")
    # Where forward is written: the decoder's own file, or the one of the class it inherits
    # forward from (then the test patches that module's get_pp_group).
    forward_path = scan.index.path_of(candidate.captured)
    norm = _norm_attribute(scan.root / forward_path, candidate.captured.name, shape)
    reads = _forward_reads(scan.root / forward_path, candidate.captured.name)
    per_layer = _per_layer_inputs(scan.root / forward_path, candidate.captured.name, shape.stream)
    unset = reads.plain - {shape.layers_attr, norm, *_STAND_IN_SETS, *per_layer.methods}
    if reads.config_elsewhere:
        unset.add("config")
    if unset:
        listed = ", ".join(f"self.{name}" for name in sorted(unset))
        return Declined(
            f"needs a human: no contributed forward test: {candidate.decoder.name}.forward reads "
            f"{listed}, which a test on stand-in layers does not set up"
        )
    if norm is None and shape.final_norm != "target":
        return Declined(
            "needs a human: no contributed forward test (the final norm's attribute could not "
            "be read)"
        )
    if shape.child is not None:
        child_reads = _forward_reads(scan.root / path, shape.child)
        unset = child_reads.plain - {shape.layers_attr, *_STAND_IN_SETS}
        if (
            unset
            or child_reads.scalars
            or child_reads.config_scalars
            or child_reads.config_elsewhere
            or child_reads.config_defaults
        ):
            read = sorted(unset | child_reads.scalars | child_reads.config_scalars)
            return Declined(
                f"needs a human: no contributed forward test: {shape.child}.forward reads "
                f"{', '.join(f'self.{name}' for name in read) or 'self.config'}, which a test "
                "on stand-in layers does not set up"
            )
    fields: dict[str, Any] = {
        "module": candidate.ref.module,
        "decoder": candidate.decoder.name,
        "target": candidate.ref.name,
        "residual": shape.residual,
        "norm": norm,
        "scalars": tuple(sorted(reads.scalars)),
        "config_scalars": tuple(sorted(reads.config_scalars)),
        **(
            {"config_defaults": tuple(sorted(reads.config_defaults))}
            if reads.config_defaults
            else {}
        ),
        **({"child": shape.child} if shape.child else {}),
    }
    fit = _stand_in_fit(scan, candidate, shape)
    if isinstance(fit, Declined):
        return fit
    fields.update(fit)
    if per_layer.methods:  # taken by keyword, so the stand-in already takes the call's names
        fields |= {"per_layer_inputs": per_layer.methods, "per_layer_params": per_layer.params}
    if shape.residual == "full-stream-pair" and shape.residual_name is not None:
        fields["hands_back_none"] = True  # the capture passes the residual each layer nulls
    if flags := _layer_flags(scan.index, candidate.captured):
        fields["layer_flags"] = flags
    if candidate.captured.module != candidate.ref.module:
        fields["forward_module"] = candidate.captured.module
    if candidate.attribute != DECODER_ATTRIBUTE:
        fields["decoder_attr"] = candidate.attribute
    if shape.layers_attr != "layers":
        fields["layers_attr"] = shape.layers_attr
    return fields


def _stand_in_fit(
    scan: ScanContext, candidate: Candidate, shape: DecoderShape
) -> dict[str, Any] | Declined:
    """The forward test's fields for a module without ``get_pp_group`` (nothing to
    monkeypatch) and for a layer call the usual stand-in signature does not take (Zamba2's
    ``layer(hidden_states, original_hidden_states=..., positions=...)``): the stand-in then
    takes the call's own names. Empty for the usual case, so those tests read as before."""
    index = scan.index
    fields: dict[str, Any] = {}
    imports = index.modules[candidate.captured.module].facts.get("imports", {})
    if "get_pp_group" not in imports:
        fields["pp_group"] = False
    looping = candidate.captured
    if shape.child is not None:  # the analysis put the child in the decoder's module
        looping = ClassRef(looping.module, shape.child)
    facts = index.class_facts(looping) or {}
    loop = facts["methods"]["forward"]["shape"]["loops"][0]
    call = loop["call"]
    usual = ["positions", "hidden_states"] + (
        [] if shape.residual == "no-residual" else ["residual"]
    )
    if _takes(usual, call, shape.stream):
        return fields
    names = [*call["args"], *(k for k in call["keywords"] if k != "**")]
    needed = {"hidden_states"} | (set() if shape.residual == "no-residual" else {"residual"})
    if all(isinstance(n, str) and n.isidentifier() for n in names) and needed <= set(names):
        fields["layer_params"] = tuple(names)  # the stand-in takes the call's own names
        return fields
    listed = ", ".join(str(n) for n in names)
    return Declined(
        f"needs a human: no contributed forward test: the layer call passes ({listed}), which "
        "a stand-in layer cannot take by the same names"
    )


def _branched_step(index: ClassIndex, decoder: ClassRef) -> dict[str, Any]:
    """Where ``decoder``'s loop calls its layer by the same statement in both branches of an
    ``if`` (DeciLM's): that ``if``'s line, test and the layer attributes it reads; else empty."""
    facts = index.class_facts(decoder) or {}
    shape = facts.get("methods", {}).get("forward", {}).get("shape") or {}
    call = (shape.get("loops") or [{}])[0].get("call") or {}
    return dict(call.get("branched", {}))


def _layer_flags(index: ClassIndex, decoder: ClassRef) -> tuple[str, ...]:
    """The layer attributes the loop's ``if`` reads where the same call opens both branches
    (DeciLM's ``_is_no_op_attention``): the stand-in layers carry them, so both branches run."""
    return tuple(_branched_step(index, decoder).get("layer_reads", []))


def _takes(params: list[str], call: dict[str, Any], stream: str) -> bool:
    """Whether ``def forward(self, <params>)`` binds the call, the stream as hidden_states. A
    ``**kwargs`` the decoder passes on is empty in the test (it calls the target with none)."""
    args = call["args"]
    keywords = {k: v for k, v in call["keywords"].items() if k != "**"}
    if len(args) > len(params):
        return False
    bound = dict(zip(params, args, strict=False))
    if set(keywords) - set(params) or set(keywords) & set(bound):
        return False
    bound.update(keywords)
    streams = {stream, *call["targets"]}  # the stream before an alias rebinds it
    return bound.get("hidden_states") in streams and set(bound) == set(params)


# What the forward test sets on the decoder, or the mixin and the decoder's class provide.
_STAND_IN_SETS = frozenset(
    {
        "start_layer",
        "end_layer",
        "do_not_compile",
        "aux_hidden_state_layers",
        "_maybe_add_hidden_state",
        "embed_input_ids",  # these two only without inputs_embeds, which the test passes
        "embed_tokens",
    }
)


@dataclass(frozen=True)
class _ForwardReads:
    """What ``decoder.forward`` reads from ``self``: multipliers of the stream (``self.x`` and
    ``self.config.x``, which a stand-in test sets to 1.0) and everything else."""

    plain: set[str]
    scalars: set[str]
    config_scalars: set[str]
    config_elsewhere: list[bool]  # one element when self.config is read another way
    # ``getattr(self.config, "<x>", <constant>)``: read with a default, which an empty
    # stand-in config gives (AXK1's ``llama_4_scaling``, None)
    config_defaults: set[str] = field(default_factory=set)


def _parsed(path: Path) -> ast.Module:
    """The model file's syntax tree, parsed once per content (the scan asks for each file's
    forward-test fields, and publish again; callers only read it)."""
    stat = path.stat()
    return _parsed_at(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=128)
def _parsed_at(path: str, _mtime_ns: int, _size: int) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))


def _forward_of(path: Path, decoder: str) -> ast.FunctionDef | None:
    return next(
        (
            item
            for node in _parsed(path).body
            if isinstance(node, ast.ClassDef) and node.name == decoder
            for item in node.body
            if isinstance(item, ast.FunctionDef) and item.name == "forward"
        ),
        None,
    )


def _forward_reads(path: Path, decoder: str) -> _ForwardReads:
    forward = _forward_of(path, decoder)
    reads = _ForwardReads(set(), set(), set(), [])
    if forward is None:
        return reads
    factors: set[int] = set()  # ids of the nodes multiplied with the stream
    for node in ast.walk(forward):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            factors.update({id(node.left), id(node.right)})
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Mult):
            factors.add(id(node.value))
    config_in_factors: set[int] = set()
    for node in ast.walk(forward):
        if (name := _config_default(node)) is not None:
            reads.config_defaults.add(name)
            config_in_factors.add(id(node.args[0]))  # type: ignore[attr-defined]
    for node in ast.walk(forward):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            inner = node.value
            if _is_self(inner.value) and inner.attr == "config" and id(node) in factors:
                reads.config_scalars.add(node.attr)
                config_in_factors.add(id(inner))
    for node in ast.walk(forward):
        if not (isinstance(node, ast.Attribute) and _is_self(node.value)):
            continue
        if node.attr == "config":
            if id(node) not in config_in_factors:
                reads.config_elsewhere.append(True)
        elif id(node) in factors:
            reads.scalars.add(node.attr)
        elif isinstance(node.ctx, ast.Load):
            reads.plain.add(node.attr)
    return reads


@dataclass(frozen=True)
class _PerLayerInputs:
    """The decoder's own methods whose result the loop slices per layer and hands each layer
    (Gemma 4: ``per_layer_inputs = self.project_per_layer_inputs(hidden_states,
    self.get_per_layer_inputs(...))``, then ``layer(..., per_layer_input=per_layer_inputs[:,
    i, :])``), and the layer call's parameters that take the slice."""

    methods: tuple[str, ...] = ()
    params: tuple[str, ...] = ()


def _per_layer_inputs(path: Path, decoder: str, stream: str) -> _PerLayerInputs:
    """Read from ``decoder.forward``: a name ``P`` sliced ``P[:, <index>, :]`` in the layer
    loop, the slice (or the name it is bound to) passed by keyword to a call there; the methods
    of ``decoder``'s class whose result is bound to ``P``, or feeds such a method."""
    cls = next(
        (n for n in _parsed(path).body if isinstance(n, ast.ClassDef) and n.name == decoder), None
    )
    forward = _forward_of(path, decoder)
    if cls is None or forward is None:
        return _PerLayerInputs()
    taken = _sliced_keywords(forward)
    own = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    methods = _feeding_methods(forward, own, set(taken.values()), stream)
    if not methods:
        return _PerLayerInputs()
    return _PerLayerInputs(tuple(sorted(methods)), tuple(sorted(taken)))


def _sliced_keywords(forward: ast.FunctionDef) -> dict[str, str]:
    """The loops' call keywords given one layer's slice of a per-layer tensor, each with that
    tensor's name (``per_layer_input=layer_per_input`` where ``layer_per_input =
    per_layer_inputs[:, i, :]``: ``{"per_layer_input": "per_layer_inputs"}``)."""
    taken: dict[str, str] = {}
    for loop in (n for n in ast.walk(forward) if isinstance(n, ast.For)):
        sliced: dict[str, str] = {}  # the bound slice's name -> the per-layer tensor's name
        for node in ast.walk(loop):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, whole = node.targets[0], _per_layer_slice(node.value)
                if isinstance(target, ast.Name) and whole is not None:
                    sliced[target.id] = whole
        for call in (n for n in ast.walk(loop) if isinstance(n, ast.Call)):
            for keyword in call.keywords:
                whole = _per_layer_slice(keyword.value)
                if whole is None and isinstance(keyword.value, ast.Name):
                    whole = sliced.get(keyword.value.id)
                if keyword.arg is not None and whole is not None:
                    taken[keyword.arg] = whole
    return taken


def _feeding_methods(
    forward: ast.FunctionDef, own: set[str], names: set[str], stream: str
) -> set[str]:
    """The class's own methods whose calls are bound to ``names``, or feed such a call (bound
    to a name it is passed, or called in its arguments); the stream is not followed (it is the
    test's ``inputs_embeds``)."""
    producers: dict[str, list[ast.expr]] = {}  # name -> the own-method calls bound to it
    for node in ast.walk(forward):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and _own_call(node.value, own)
        ):
            producers.setdefault(node.targets[0].id, []).append(node.value)
    methods: set[str] = set()
    frontier, seen = list(names), set()
    while frontier:
        name = frontier.pop()
        if name in seen:
            continue
        seen.add(name)
        calls = list(producers.get(name, []))
        while calls:
            call = calls.pop()
            assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            methods.add(call.func.attr)
            for arg in call.args:
                if isinstance(arg, ast.Name) and arg.id != stream:
                    frontier.append(arg.id)
                elif _own_call(arg, own):
                    calls.append(arg)
    return methods


def _own_call(node: ast.expr, own: set[str]) -> bool:
    """Whether ``node`` is ``self.<m>(...)`` for a method ``m`` of the class itself."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and _is_self(node.func.value)
        and node.func.attr in own
    )


def _per_layer_slice(node: ast.expr) -> str | None:
    """``P`` for ``P[:, <index>, :]`` (one layer's slice of a per-token, per-layer tensor)."""
    if not (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and isinstance(node.slice, ast.Tuple)
        and len(node.slice.elts) == 3
    ):
        return None
    first, index, last = node.slice.elts
    if all(
        isinstance(s, ast.Slice) and s.lower is None and s.upper is None and s.step is None
        for s in (first, last)
    ) and not isinstance(index, ast.Slice):
        return node.value.id
    return None


def _config_default(node: ast.AST) -> str | None:
    """``x`` for ``getattr(self.config, "x", <constant>)``, else None."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) == 3
        and not node.keywords
    ):
        return None
    config, name, default = node.args
    if (
        isinstance(config, ast.Attribute)
        and _is_self(config.value)
        and config.attr == "config"
        and isinstance(name, ast.Constant)
        and isinstance(name.value, str)
        and name.value.isidentifier()
        and isinstance(default, ast.Constant)
    ):
        return name.value
    return None


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _norm_attribute(path: Path, decoder: str, shape: DecoderShape) -> str | None:
    """The final norm's attribute (``norm`` for ``hidden_states, _ = self.norm(...)``): the
    ``self.<x>(...)`` called on the norm's line, or, for a norm picked by whether the residual
    is ``None``, on the lines of its two branches (each calls the same one); None where the
    decoder has no final norm (the target applies it)."""
    if shape.final_norm in ("target", "conditional"):
        return None  # no norm, or one the config may skip: the test checks the output alone
    last = shape.return_line if shape.final_norm == "when-residual" else shape.norm_line
    forward = _forward_of(path, decoder)
    called = {
        node.func.attr
        for node in (ast.walk(forward) if forward is not None else ())
        if isinstance(node, ast.Call)
        and shape.norm_line <= node.lineno <= last
        and isinstance(node.func, ast.Attribute)
        and _is_self(node.func.value)
    }
    return called.pop() if len(called) == 1 else None


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


def _enabled_decoders(ctx: ScanContext) -> list[ClassRef]:
    index = ctx.index
    return [ref for ref in index.classes() if EAGLE_MODEL_MIXIN in index.bases(ref)]


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


def enable_writeup_context(
    ctx: PlanContext, finding: Finding, shape: DecoderShape, absolute: bool, through_llm: bool | str
) -> dict[str, Any]:
    """``through_llm``: the plan's test goes through LLM, not on stand-ins (True: the tree has
    tests/AGENTS.md; a text: why the tree's own stand-in forward test cannot be written)."""
    from bot.recipes.eagle3_wrapper.recipe import wrappers_waiting_for

    url = ctx.url
    ev = finding.evidence_as(EnableEvidence)
    decoder = ev.decoder
    has_pp_flag = bool(
        ctx.scan.index.find_class_attr(EAGLE_MODEL_MIXIN, "supports_aux_hidden_states_over_pp")
    )
    return {
        "where": {**ev.cls.to_json(), "url": url(ev.cls.path, ev.cls.line)},
        "decoder": {**decoder.to_json(), "url": url(decoder.path, decoder.line)},
        "shape": shape.to_json(),
        "loop_url": url(decoder.path, shape.loop_line),
        "norm_url": url(decoder.path, shape.norm_line),
        "absolute": absolute,
        "pp_flag": has_pp_flag,
        "unproven": unproven_lines(ctx, finding, shape, through_llm),
        "follow_ups": wrappers_waiting_for(ctx.scan, finding.class_name),
        # the plan's test: on stand-ins (the tree's own style), or through LLM
        "stand_in_test": through_llm is False,
        "builds_on": ev.builds_on.to_json() if ev.builds_on else None,
        "delegates": delegates(_reached(decoder.attribute, shape), shape.layers_attr),
        "reached": "self." + _reached(decoder.attribute, shape),
        "collector": shape.inner or decoder.name,  # the class that collects
    }


def _reached(attribute: str, shape: DecoderShape) -> str:
    """What the target's two methods reach (:attr:`Candidate.reached`), from the evidence."""
    bare = attribute.removeprefix("self.")
    return f"{bare}.{shape.inner_attr}" if shape.inner_attr else bare


def unproven_lines(
    ctx: PlanContext, finding: Finding, shape: DecoderShape, through_llm: bool | str
) -> list[dict[str, str]]:
    """What this plan's tests leave unproven for the class, one line each."""
    decoder = finding.evidence_as(EnableEvidence).decoder
    lines: list[dict[str, str]] = []
    scaled = _scaled_embedding(ctx.root / decoder.path, decoder.name)
    if scaled is not None:
        lines.append(
            {
                "name": decoder.name,
                "where": f"{decoder.path}:{scaled}",
                "url": ctx.url(decoder.path, scaled),
                "text": "scales its input embedding (embed_input_ids multiplies it); an EAGLE-3 "
                "drafter that shares the embedding weights does not apply the scale, so how "
                "well a draft predicts for this model is not measured here",
            }
        )
    if shape.residual == "residual-stream":
        lines.append(
            {
                "name": decoder.name,
                "where": "",
                "url": "",
                "text": "the captured state is hidden_states + residual in the model's dtype; "
                "in bf16 it may differ in the last bits from a fused add-norm that adds in "
                "float32 (CPU tests run float32)",
            }
        )
    if through_llm:
        compared = (
            "only the state after the last layer is compared with what the final norm reads"
            if shape.final_norm not in ("target", "conditional")
            else "no captured state is compared with the model's output (the decoder's "
            + (
                "finishing steps depend on the config"
                if shape.final_norm == "conditional"
                else "final norm is the target's"
            )
            + "), only that the model loads with the aux states requested and keeps its "
            "greedy output"
        )
        text = (
            "the contributed test runs the model through LLM with dummy weights, one layer "
            "(the registry example's config, shrunk as tests/models/test_initialization.py "
            f"does) and extract_hidden_states: {compared}; no draft model is run"
        )
        if isinstance(through_llm, str):  # a tree whose own style is a stand-in test
            text += (
                f"; this tree has no {AGENTS_RULES}, and its own style of test, the forward on "
                f"stand-in layers, cannot be written here ("
                f"{through_llm.removeprefix(f'{NEEDS_HUMAN}: ')})"
            )
    else:
        text = (
            "the contributed CPU test runs the patched forward on stand-in layers; the "
            "real layers and GPU kernels are exercised only by the GPU test"
        )
    lines.append({"name": finding.class_name, "where": "", "url": "", "text": text})
    return lines


def _scaled_embedding(path: Path, decoder: str) -> int | None:
    """The line of ``embed_input_ids`` in ``decoder`` when it multiplies what it returns."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef) and node.name == decoder:
            for item in node.body:
                multiplies = any(
                    isinstance(n, ast.BinOp | ast.AugAssign) and isinstance(n.op, ast.Mult)
                    for n in ast.walk(item)
                )
                if isinstance(item, ast.FunctionDef) and item.name == "embed_input_ids":
                    return item.lineno if multiplies else None
    return None


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
