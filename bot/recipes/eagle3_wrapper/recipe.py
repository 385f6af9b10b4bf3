"""Recipe ``eagle3-wrapper``: a multimodal wrapper over an EAGLE-3-capable language model.

The wrapper is what vLLM loads; ``SupportsEagle3`` on it routes through
``get_language_model()`` to the language model's decoder. Reported where that would work
(``wrapper_analysis`` says why, with file:line evidence), once per fix class: when a family base
builds the language model and every registered wrapper below it is ready, the base is fixed.
Wrappers whose language model comes from the checkpoint's ``text_config`` at run time are
reported with the language models that would work. Their fix is the declaration alone once
``SupportsEagle3``'s defaults forward to a language model that declares the interface (with
the tree's clear error otherwise): where the tree's defaults do, it is planned so; where they
do not yet, it *builds on* the ``core-eagle3-forwarding`` plan that makes them
(:func:`forwarding`); a tree whose defaults cannot be rewritten gets the tree's guard and the
two forwarding methods written into the wrapper, as before.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import astuple, dataclass, replace
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
    WriteUp,
    own_templates,
    platform_variant,
    step,
)
from bot.recipes.core_eagle3_forwarding.evidence import builds_on as forwarding_dependency
from bot.recipes.eagle3_analysis import (
    INTERFACE,
    class_finding,
    declares_eagle3,
    is_multimodal,
    is_pooling_model,
    locate,
)
from bot.recipes.eagle3_interface.recipe import (
    DECLARATION_EVALUATION,
    declare_interface_edit,
    registered_targets,
    regression_test_edit,
)
from bot.recipes.eagle3_wrapper.evidence import LanguageModel, WrapperEvidence, WrapperForward
from bot.recipes.evidence import At, BuildsOn, Located
from bot.recipes.llm_test import declaration_test, follows_agents_rules
from bot.recipes.registry_plan import plan_registry_entry
from bot.recipes.wrapper_analysis import (
    DELEGATE,
    INTERFACE_ONLY,
    RUNTIME,
    Assessment,
    Guard,
    assess,
    capable_language_models,
    protocol_defaults,
    runtime_guard,
    wrapper_guard,
)
from bot.tree.index import ClassIndex, ClassRef
from bot.tree.layout import INTERFACES_MODULE
from bot.tree.model_registry import RegistryEntry

if TYPE_CHECKING:
    from pathlib import Path


# The codemods (libcst) are imported where a plan is made: `bot scan` never pays for them.
NAME = "eagle3-wrapper"
TEMPLATES = own_templates(__name__)
SUPPORTS_EAGLE3_CHECK = "supports_eagle3"
WRAPPER_TEST = "wrapper-forward-test"


class Eagle3Wrapper(Recipe):
    name = NAME
    description = "multimodal wrapper whose language model already supports EAGLE-3"
    engine_gated = True  # the wrapper forwards the capture to its language model
    evidence_type = WrapperEvidence
    replication = (
        "Reuses `SupportsEagle3` and the language model's existing aux-state capture; no new "
        "helper."
    )

    def model_evaluation(self, smoke_passed: bool) -> str:
        return DECLARATION_EVALUATION

    def claimed_outcome(self, finding: Finding, targets: Sequence[str]) -> ClaimedOutcome | None:
        # Whatever the shape: the registry test asserts the check, the test through LLM loads
        # the example checkpoint. The runtime guard's refusal is described, not claimed.
        values = {"cls": finding.class_name, "archs": list(finding.architectures)}
        return ClaimedOutcome(f"{TEMPLATES}/outcome.j2", values)

    def follows_fix_of(self, finding: Finding, fixed_class: str) -> bool:
        """A wrapper over ``fixed_class``, now that it supports EAGLE-3, is reported as ready
        to declare it too, also when the wrapper's code pins several language models and
        ``fixed_class`` was the last of them not capable yet (Glm4v's Glm4 and Glm4Moe)."""
        language_model = finding.evidence_as(WrapperEvidence).language_model
        return fixed_class in (language_model.name, *(language_model.pinned or ()))

    def evidence_line(self, finding: Finding) -> str:
        evidence = finding.evidence_as(WrapperEvidence)
        lm = evidence.language_model
        core = evidence.builds_on
        after = f"; builds on {core.recipe} ({core.name})" if core is not None else ""
        return f"{lm.attribute} = {lm.name} ({lm.path}:{lm.line}){after}"

    def group_key(self, finding: Finding) -> str:
        """``interface-only`` with the plain declarations (those the tree's forwarding
        defaults make plain too), else by shape and family."""
        from bot.recipes.grouping import INTERFACE_ONLY

        evidence = finding.evidence_as(WrapperEvidence)
        shape = evidence.shape
        if shape == "interface" or evidence.forwarded:
            return INTERFACE_ONLY
        if shape == "runtime":
            # The language model is the checkpoint's choice: one family, the forwarding core
            # (or the tree's guard in each wrapper).
            return "wrapper-runtime"
        return f"wrapper-{shape}-{evidence.language_model.name}"

    def detect(self, ctx: ScanContext) -> list[Finding]:
        return [finding for finding, _ in findings_with_assessments(ctx)]

    def explain(self, wanted: str, ctx: ScanContext) -> str | None:
        """Why a registered wrapper is not a finding (its language model, a subclass, a
        language model whose own fix must come first)."""
        for ref, entries in wrapper_targets(ctx).items():
            if wanted in (ref.name, *(e.arch for e in entries)):
                checked = assess_all(ctx).get(ref) or assess(ctx, ref)
                if checked.shape is None:
                    return f"{ref.name} is not ready for EAGLE-3: {checked.reason}" + (
                        _dependency(ctx, checked)
                    )
        return None

    def plan(self, finding: Finding, ctx: PlanContext) -> FixPlan | Declined:
        """Declare the interface on the wrapper (or the family base that builds the language
        model for several wrappers), with the registry entry and a CPU regression test."""
        from bot.recipes.registry_edit import registry_entry_edit

        source = (ctx.root / finding.path).read_text(encoding="utf-8")
        declaration = declaration_edit(ctx.scan, finding, source)
        if isinstance(declaration, Declined):
            return declaration
        variant = platform_variant(finding)
        entry, entry_why = plan_registry_entry(
            ctx.root, ctx.arch, ctx.catalogue, ctx.preferred_draft
        )
        evidence = finding.evidence_as(WrapperEvidence)
        guard = wrapper_guard(ctx.scan) if evidence.shape == RUNTIME else None
        edits = [declaration]
        if entry is not None:
            edits.append(registry_entry_edit(entry))
        test_edit, cpu_tests = _wrapper_regression_test(ctx, finding, variant)
        edits.append(test_edit)
        engine_tests: tuple[str, ...] = ()
        if follows_agents_rules(ctx.root):  # through LLM there, never on a stand-in model
            through_llm = declaration_test(ctx.root, finding, edits)
            if isinstance(through_llm, Declined):
                return through_llm
            if through_llm is not None:
                edits.extend(through_llm[0])
                engine_tests = through_llm[1]
        else:
            forwarding = _wrapper_forward_test(ctx, finding)
            if isinstance(forwarding, Declined):
                return forwarding
            if forwarding is not None:
                edits.append(forwarding[0])
                cpu_tests = (*cpu_tests, forwarding[1])
        covers = list(evidence.covers)
        return FixPlan(
            recipe=NAME,
            finding=finding,
            resolves=(finding,),
            variant=variant,
            edits=tuple(edits),
            tests=FixTests(
                cpu=cpu_tests, gpu=(entry.gpu_test,) if entry else (), engine=engine_tests
            ),
            registry=RegistryDecision(entry, entry_why),
            writeup=WriteUp.from_folder(TEMPLATES, _writeup_context(ctx, finding, covers, guard)),
            commit_title=(
                f"[Model][Spec Decode] Declare {INTERFACE} on {finding.class_name}"
                + (f" ({variant} variant)" if variant else "")
            ),
            issue_comment=(
                f"it declares `{INTERFACE}` on the multimodal wrapper "
                f"`{html.escape(finding.class_name)}` so EAGLE-3 speculative decoding reaches "
                "its language model."
            ),
        )


def declaration_edit(scan: ScanContext, finding: Finding, source: str) -> FileEdit | Declined:
    """The edit of the finding's file (whose text is ``source``): the interface declared on the
    class and, for its shape, the protocol's methods forwarding to its language model (behind
    the tree's own guard for a model chosen at run time). Publish re-applies it on the base."""
    evidence = finding.evidence_as(WrapperEvidence)
    shape = evidence.shape
    if shape not in (INTERFACE_ONLY, DELEGATE, RUNTIME):
        return Declined(f"{finding.class_name}: unknown fix shape {shape!r}")
    guard = wrapper_guard(scan) if shape == RUNTIME else None
    if shape == RUNTIME and guard is None:
        return Declined(
            f"{finding.class_name} builds its language model from the checkpoint's "
            "text_config at run time; the bot proposes that only with a clear-error guard, "
            "and this tree has neither a wrapper's guard nor a missing-interface error to "
            "write one in the words of"
        )
    attribute = evidence.language_model.attribute.removeprefix("self.")
    if shape != INTERFACE_ONLY and attribute in ("", "self"):
        return Declined(f"{finding.class_name} is its own language model: nothing to delegate to")
    edit = declare_interface_edit(finding.path, source, finding.class_name)
    if declaration_only(scan, finding):
        return edit
    if shape == DELEGATE:
        return _with_delegation(edit, finding.class_name, attribute)
    if guard is not None:
        return _with_guarded_delegation(edit, finding, attribute, guard)
    return edit


@dataclass(frozen=True)
class Forwarding:
    """What the tree's ``SupportsEagle3`` defaults do for a wrapper whose language model
    declares the interface: ``forwards`` (they call its methods, with the clear error when it
    cannot), or ``core`` (they do not yet, and the core-eagle3-forwarding plan makes them:
    ``builds_on`` names it); else None (no defaults to rewrite, or no guard to take the error
    from)."""

    state: str | None
    builds_on: BuildsOn | None = None


def forwarding(scan: ScanContext) -> Forwarding:
    if _FORWARDING and _FORWARDING[0][0] is scan:
        return _FORWARDING[0][1]
    defaults = protocol_defaults(scan.root)
    if defaults is not None and defaults.forwards:
        found = Forwarding("forwards")
    elif (
        defaults is not None
        and defaults.methods_follow_get_language_model
        and runtime_guard(scan) is not None
    ):
        found = Forwarding("core", forwarding_dependency(defaults))
    else:
        found = Forwarding(None)
    _FORWARDING[:] = [(scan, found)]
    return found


_FORWARDING: list[tuple[ScanContext, Forwarding]] = []  # the last scan's, computed once


def declaration_only(scan: ScanContext, finding: Finding) -> bool:
    """Whether the wrapper's fix is the declaration alone: an interface-only wrapper, or one
    whose language model is chosen at run time (or forwarded to) where the defaults forward
    or will once the core plan it builds on is applied."""
    evidence = finding.evidence_as(WrapperEvidence)
    return evidence.shape == INTERFACE_ONLY or evidence.forwarded or evidence.builds_on is not None


def _dependency(ctx: ScanContext, checked: Assessment) -> str:
    """The plans this wrapper waits for: its language models' own fixable findings."""
    from bot.recipes import RECIPES

    lm = checked.language_model
    names = set(checked.depends_on) or ({lm.cls.name} if lm and lm.cls else set())
    plans = [
        f"{f.class_name} ({recipe.name})"
        for recipe in RECIPES
        if recipe.name in ("eagle3-interface", "eagle3-enable")
        for f in recipe.detect(ctx)
        if f.class_name in names and not f.evidence.refusal()
    ]
    return f"; the plan(s) it depends on: {', '.join(sorted(plans))}" if plans else ""


def wrapper_targets(ctx: ScanContext) -> dict[ClassRef, list[RegistryEntry]]:
    """Registered multimodal generation models that do not declare SupportsEagle3."""
    return {
        ref: entries
        for ref, entries in registered_targets(ctx).items()
        if is_multimodal(ctx.index, ref) and not declares_eagle3(ctx.index, ref)
    }


def assess_all(ctx: ScanContext) -> dict[ClassRef, Assessment]:
    """Every candidate wrapper, ready or not (the rejected ones carry their reason).

    A declaration is inherited: a wrapper is only ready when every registered wrapper below it
    is ready the same way, or the fix would make a subclass claim what it cannot do.
    Assessed once per scan (the wrapper and forwarding recipes both ask).
    """
    return dict(ctx.remembered(f"{__name__}.assess_all", lambda: _assess_all(ctx)))


def _assess_all(ctx: ScanContext) -> dict[ClassRef, Assessment]:
    assessments = {ref: assess(ctx, ref) for ref in wrapper_targets(ctx)}
    ancestors = {ref: set(ctx.index.ancestors(ref)) for ref in assessments}
    checked: dict[ClassRef, Assessment] = {}
    for ref, assessment in assessments.items():
        below = [r for r in assessments if r != ref and ref in ancestors[r]]
        unready = [r for r in below if not _same_fix(assessments[r], assessment)]
        if assessment.shape is not None and unready:
            other = assessments[unready[0]]
            why = other.reason if other.shape is None else "it needs a different fix"
            assessment = replace(
                assessment,
                shape=None,
                reason=f"the declaration would also reach {unready[0].name}, which is not "
                f"ready: {why}",
            )
        checked[ref] = assessment
    return checked


def wrappers_waiting_for(ctx: ScanContext, class_name: str) -> list[str]:
    """Registered wrappers whose code pins their language models and whose only one not
    capable yet is ``class_name``: the wrapper plans that follow from ``class_name``'s own fix
    (the re-scan then reports them, :func:`bot.recipes.base.follows_from`)."""
    return sorted(
        ref.name
        for ref, checked in assess_all(ctx).items()
        if checked.shape is None and checked.depends_on == (class_name,)
    )


def findings_with_assessments(ctx: ScanContext) -> list[tuple[Finding, Assessment]]:
    """The wrapper findings, each with its assessment (once per scan)."""
    return list(ctx.remembered(f"{__name__}.findings", lambda: _findings_with_assessments(ctx)))


def _findings_with_assessments(ctx: ScanContext) -> list[tuple[Finding, Assessment]]:
    targets = wrapper_targets(ctx)
    assessments = assess_all(ctx)
    groups: dict[ClassRef, list[ClassRef]] = defaultdict(list)
    fix_assessment: dict[ClassRef, Assessment] = {}
    for ref, assessment in assessments.items():
        if assessment.shape is None:
            continue
        fix_class, fix = _fix_class(ctx, ref, assessment, assessments)
        groups[fix_class].append(ref)
        fix_assessment[fix_class] = fix
    capable: list[str] | None = None
    results: list[tuple[Finding, Assessment]] = []
    for fix_class, covered in sorted(groups.items()):
        assessment = fix_assessment[fix_class]
        if assessment.shape == RUNTIME and capable is None:
            capable = capable_language_models(ctx)
        entries = [e for ref in covered for e in targets[ref]]
        defaults = forwarding(ctx) if assessment.shape in (RUNTIME, DELEGATE) else None
        finding = _finding(
            ctx.index, fix_class, sorted(covered), entries, assessment, capable, defaults
        )
        results.append((finding, assessment))
    return results


def _fix_class(
    ctx: ScanContext,
    ref: ClassRef,
    assessment: Assessment,
    assessments: dict[ClassRef, Assessment],
) -> tuple[ClassRef, Assessment]:
    """The most basic class the fix can go on: one declaration for a whole family.

    A base qualifies when it is multimodal, builds the same language model the same way and
    hands its output back, and every registered class below it either already declares
    SupportsEagle3 or is ready the same way (a declaration on the base reaches them all).
    """
    best = (ref, assessment)
    for base in ctx.index.ancestors(ref)[1:]:
        if not isinstance(base, ClassRef) or base.module == INTERFACES_MODULE:
            continue
        if not is_multimodal(ctx.index, base) or declares_eagle3(ctx.index, base):
            continue
        base_assessment = assessments.get(base) or assess(ctx, base)
        if not _same_fix(base_assessment, assessment):
            continue
        below = [r for r in assessments if base in ctx.index.ancestors(r)]
        if all(_same_fix(assessments[r], assessment) for r in below):
            best = (base, base_assessment)
    return best


def _same_fix(a: Assessment, b: Assessment) -> bool:
    if a.shape is None or a.shape != b.shape or a.language_model is None:
        return False
    assert b.language_model is not None
    return (
        a.language_model.cls == b.language_model.cls
        and a.language_model.attribute == b.language_model.attribute
        and a.forward_returns == b.forward_returns
    )


def _finding(
    index: ClassIndex,
    ref: ClassRef,
    covered: list[ClassRef],
    entries: list[RegistryEntry],
    assessment: Assessment,
    capable: list[str] | None,
    defaults: Forwarding | None = None,
) -> Finding:
    lm = assessment.language_model
    assert lm is not None and assessment.forward_owner is not None
    attribute = f"self.{lm.attribute}" if lm.attribute else "self"
    assigned = At(index.path_of(lm.owner), lm.line)
    if lm.cls is not None:
        where = locate(index, lm.cls)
    else:
        where = Located("text_config.architectures (run time)", assigned.path, assigned.line)
    declares = bool(lm.cls and declares_eagle3(index, lm.cls))
    assert assessment.shape is not None  # only ready wrappers are findings
    evidence = WrapperEvidence(
        cls=locate(index, ref),
        shape=assessment.shape,
        why=assessment.reason,
        language_model=LanguageModel(
            *astuple(where),
            attribute=attribute,
            how=lm.how,
            assigned_at=assigned,
            declares_eagle3=declares,
            pinned=tuple(assessment.pinned) if assessment.pinned else None,
        ),
        lm_decoder=locate(index, assessment.decoder) if assessment.decoder else None,
        forward=WrapperForward(
            index.path_of(assessment.forward_owner),
            assessment.forward_line,
            assessment.forward_returns,
        ),
        covers=tuple(c.name for c in covered),
        works_with=tuple(capable) if capable is not None and lm.cls is None else None,
        forwarded=True if defaults is not None and defaults.state == "forwards" else None,
        builds_on=(
            defaults.builds_on if defaults is not None and assessment.shape == RUNTIME else None
        ),
    )
    family = "" if covered == [ref] else f" (base of {', '.join(c.name for c in covered)})"
    if lm.cls is None:
        summary = (
            f"multimodal {ref.name}{family} builds {attribute} from the checkpoint's "
            f"text_config at run time and hands back {assessment.forward_returns}; "
            f"SupportsEagle3 would work when that is one of {len(capable or [])} EAGLE-3 "
            "capable language models; "
            + (
                f"the declaration alone, once the {evidence.builds_on.recipe} plan is applied"
                if evidence.builds_on
                else "the declaration alone: the tree's defaults forward to it"
                if evidence.forwarded
                else "proposed only with the tree's clear-error guard"
            )
        )
    else:
        state = "declares SupportsEagle3" if declares else "is EAGLE-3 ready"
        summary = (
            f"multimodal {ref.name}{family} wraps {lm.cls.name} ({attribute}, {lm.how}), which "
            f"{state}, and hands back {assessment.forward_returns}, but does not declare "
            "SupportsEagle3 itself"
        )
    return class_finding(NAME, ref, entries, evidence, summary)


def _with_delegation(edit: FileEdit, class_name: str, attribute: str) -> FileEdit:
    """The declaration plus the two protocol methods forwarding to ``self.<attribute>``."""
    from bot.codemods.delegate_methods import PROTOCOL_METHODS, add_delegating_methods
    from bot.codemods.spans import AfterClassBody, ClassBody

    return replace(
        edit,
        kind="declare-interface-and-delegate",
        description=(
            f"{edit.description}; forward {' and '.join(PROTOCOL_METHODS)} to self.{attribute}"
        ),
        steps=(
            *edit.steps,
            step(add_delegating_methods, class_name=class_name, attribute=attribute),
        ),
        confined_to=(*edit.confined_to, ClassBody(class_name), AfterClassBody(class_name)),
    )


def _with_guarded_delegation(
    edit: FileEdit, finding: Finding, attribute: str, guard: Guard
) -> FileEdit:
    """The declaration, the tree's guard and the two methods calling it before forwarding."""
    from bot.codemods.delegate_methods import PROTOCOL_METHODS, add_delegating_methods
    from bot.codemods.imports import add_import_name
    from bot.codemods.spans import AfterClassBody, ClassBody

    module = dict(edit.steps[0].args)["module"]
    return replace(
        edit,
        kind="declare-interface-and-guarded-delegate",
        description=(
            f"{edit.description}; add {guard.name} ({guard.provenance}) and forward "
            f"{' and '.join(PROTOCOL_METHODS)} to self.{attribute} behind it"
        ),
        steps=(
            *edit.steps,
            step(add_import_name, module=module, name=SUPPORTS_EAGLE3_CHECK),
            step(
                add_delegating_methods,
                class_name=finding.class_name,
                attribute=attribute,
                guard_name=guard.name,
                guard_source=guard.text_for(attribute),
            ),
        ),
        confined_to=(
            *edit.confined_to,
            ClassBody(finding.class_name),
            AfterClassBody(finding.class_name),
        ),
    )


def _wrapper_regression_test(
    ctx: PlanContext, finding: Finding, variant: str | None
) -> tuple[FileEdit, tuple[str, ...]]:
    """One wrapper: the same test the interface recipe adds. A family base: the registry
    test for every architecture it covers (each registered wrapper must advertise it)."""
    from bot.codemods.regression_test import (
        add_eagle3_regression_test,
        add_registry_eagle3_test,
        regression_test_spans,
    )

    if len(finding.architectures) <= 1:
        return regression_test_edit(ctx, finding, variant)
    archs = tuple(finding.architectures)
    planned = add_eagle3_regression_test(
        ctx.root,
        class_name=finding.class_name,
        class_module=finding.module,
        archs=list(archs),
        platform_variant=True,  # through the registry: each architecture is its own case
    )
    edit = FileEdit(
        path=planned.path,
        kind="regression-test",
        description=f"assert supports_eagle3 for {', '.join(archs)} on the CPU",
        steps=(step(add_registry_eagle3_test, archs=archs),),
        confined_to=regression_test_spans(),
    )
    return edit, tuple(planned.node_ids)


def _wrapper_forward_test(
    ctx: PlanContext, finding: Finding
) -> tuple[FileEdit, str] | Declined | None:
    """The contributed CPU test that runs the forwarding methods (and the guard) the plan
    adds, on a stand-in language model, and its node id; None for an interface-only plan."""
    from bot.codemods.base import CodemodRefused
    from bot.codemods.wrapper_forward_test import (
        create_wrapper_forward_test,
        new_wrapper_test_file,
        wrapper_test_name,
        wrapper_test_path,
    )

    fields = wrapper_test_fields(ctx.scan, finding)
    if fields is None or isinstance(fields, Declined):
        return fields
    try:
        new_wrapper_test_file(**fields)
    except CodemodRefused as refused:
        return Declined(f"needs a human: no contributed forwarding test ({refused})")
    path = wrapper_test_path(finding.module)
    if (ctx.root / path).exists():
        return Declined(f"needs a human: no contributed forwarding test ({path} exists)")
    guarded = fields["guard_error"] is not None
    edit = FileEdit(
        path=path,
        kind=WRAPPER_TEST,
        description=(
            f"a CPU test calling {finding.class_name}'s two protocol methods on a stand-in "
            "language model: "
            + (
                "one without SupportsEagle3 gets the guard's error, one with it is reached"
                if guarded
                else "both reach it"
            )
        ),
        steps=(step(create_wrapper_forward_test, **fields),),
        confined_to=(),
        creates=True,
    )
    return edit, f"{path}::{wrapper_test_name(finding.class_name, guarded)}"


def wrapper_test_fields(scan: ScanContext, finding: Finding) -> dict[str, Any] | Declined | None:
    """The forwarding test's fields (:func:`bot.codemods.wrapper_forward_test.
    new_wrapper_test_file`), all from the finding the scan made and the tree: the module, the
    class, its language model's attribute, the tree guard's error, the tree's platform skip.
    None where the plan adds no method (interface only)."""
    evidence = finding.evidence_as(WrapperEvidence)
    shape = evidence.shape
    if shape not in (DELEGATE, RUNTIME) or declaration_only(scan, finding):
        return None
    guard_error = None
    if shape == RUNTIME:
        guard = wrapper_guard(scan)
        if guard is None or guard.error is None:
            return Declined(f"{finding.class_name}: the tree has no guard raising a plain error")
        guard_error = guard.error
    attribute = evidence.language_model.attribute.removeprefix("self.")
    return {
        "module": finding.module,
        "wrapper": finding.class_name,
        "attribute": attribute,
        "guard_error": guard_error,
        "skip": _platform_skip(scan.root, finding.architectures),
    }


def _platform_skip(root: Path, archs: tuple[str, ...]) -> tuple[str, str] | None:
    """The tree's ``test_registry_imports`` skip for the first of ``archs`` it skips."""
    from bot.codemods.regression_test import REGISTRY_TEST, platform_skip

    try:
        source = (root / REGISTRY_TEST).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    skips = (platform_skip(source, arch) for arch in sorted(archs))
    return next((skip for skip in skips if skip is not None), None)


def _writeup_context(
    ctx: PlanContext, finding: Finding, covers: list[str], guard: Guard | None
) -> dict[str, Any]:
    url = ctx.url
    ev = finding.evidence_as(WrapperEvidence)
    lm, decoder, forward = ev.language_model, ev.lm_decoder, ev.forward
    return {
        "shape": ev.shape,
        "why": ev.why,
        "files": [finding.path],
        "where": {**ev.cls.to_json(), "url": url(ev.cls.path, ev.cls.line)},
        "covers": covers,
        "language_model": {
            **lm.to_json(),
            "url": url(lm.path, lm.line),
            "assigned_url": url(lm.assigned_at.path, lm.assigned_at.line),
        },
        "lm_decoder": {**decoder.to_json(), "url": url(decoder.path, decoder.line)}
        if decoder
        else None,
        "forward": {**forward.to_json(), "url": url(forward.path, forward.line)},
        "guard": {**guard.to_json(), "url": url(guard.path, guard.line)} if guard else None,
        "works_with": list(ev.works_with or ()),
        "reached": reached_subclasses(ctx.scan, finding),
        "unproven": _unproven(finding),
        "forward_test": _forward_test_context(ctx, finding),
        "builds_on": ev.builds_on.to_json() if ev.builds_on else None,
    }


def _forward_test_context(ctx: PlanContext, finding: Finding) -> dict[str, Any] | None:
    from bot.codemods.wrapper_forward_test import wrapper_test_path

    if follows_agents_rules(ctx.root):
        return None  # no test on a stand-in model there: the test through LLM instead
    fields = wrapper_test_fields(ctx.scan, finding)
    if not isinstance(fields, dict):
        return None
    return {"path": wrapper_test_path(finding.module), "error": fields["guard_error"]}


_REACHED_WHY = {
    "pooling": "a pooling model: vLLM runs speculative decoding only for generation, so "
    "the two methods are never called for it",
    "streaming": "streaming (SupportsRealtime) generation over the same language model; the "
    "realtime path with speculative decoding is not exercised by this PR's tests",
    "generation": "builds and hands back the same language model the same way",
}


def reached_subclasses(ctx: ScanContext, finding: Finding) -> list[dict[str, Any]]:
    """Every registered class below the declaring class (it inherits the declaration), with
    its kind (generation, streaming, pooling) and why the declaration is safe for it."""
    index = ctx.index
    declaring = [r for r in index.classes() if r.name == finding.class_name]
    by_class: dict[ClassRef, list[RegistryEntry]] = defaultdict(list)
    for entry in ctx.registry.entries:
        for resolved in index.resolve(entry.module, entry.class_name):
            if isinstance(resolved, ClassRef):
                by_class[resolved].append(entry)
    reached = []
    for ref, entries in sorted(by_class.items()):
        if ref in declaring or not any(d in index.ancestors(ref) for d in declaring):
            continue
        if is_pooling_model(index, ref, entries):
            kind = "pooling"
        elif any(
            isinstance(a, ClassRef) and a.name == "SupportsRealtime" for a in index.ancestors(ref)
        ):
            kind = "streaming"
        else:
            kind = "generation"
        archs = sorted({e.arch for e in entries})
        reached.append({"name": ref.name, "archs": archs, "kind": kind, "why": _REACHED_WHY[kind]})
    return reached


def _unproven(finding: Finding) -> list[dict[str, str]]:
    lines = []
    if finding.evidence_as(WrapperEvidence).shape == RUNTIME:
        lines.append(
            {
                "name": finding.class_name,
                "where": "",
                "url": "",
                "text": "which language model a checkpoint brings is known only at run time; "
                "the CPU test proves the declaration and the guard, not a served checkpoint",
            }
        )
    return lines


RECIPE = Eagle3Wrapper()
