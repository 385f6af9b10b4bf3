"""``eagle3-enable`` for a decoder several targets share: fixed together, or not at all.

When one decoder's ``forward`` runs under several registered targets (OpenPangu's three
classes build ``OpenPanguModel``; ``LongcatFlashNgramForCausalLM`` builds ``FlashNgramModel``,
which inherits ``FlashModel``'s forward), the capture added once reaches all of them. Declaring
the interface on only one would leave the others with the capture and no interface, so the
targets form one set: ready together when every member is ready on its own, each refused with
every blocker of the set named otherwise. One plan fixes the set (:func:`shared_plan`): the
mixin and the capture on the decoder whose forward they run, the interface on every target,
the regression test listing every architecture and a contributed forward test per target.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from bot.recipes.base import (
    CodemodStep,
    Declined,
    FileEdit,
    Finding,
    FixPlan,
    FixTests,
    PlanContext,
    RegistryDecision,
    ScanContext,
    WriteUp,
    step,
)
from bot.recipes.eagle3_analysis import locate
from bot.recipes.eagle3_broken_claim.evidence import BrokenClaimEvidence
from bot.recipes.eagle3_enable.analysis import DecoderShape, Refusal
from bot.recipes.llm_test import follows_agents_rules, llm_test_unavailable
from bot.recipes.registry_plan import plan_registry_entry
from bot.tree.index import ClassIndex, ClassRef

if TYPE_CHECKING:
    from bot.codemods.spans import Span
    from bot.recipes.eagle3_enable.candidate import Candidate
    from bot.recipes.eagle3_enable.recipe import Capture

# The edit kinds of a set's plan (publish checks them against the set derived from the base).
SHARED_DECODER = "enable-shared-decoder"
SHARED_INTERFACE = "declare-shared-interface"


def join_shared(
    index: ClassIndex, found: Sequence[Candidate], sharers: Mapping[ClassRef, Sequence[ClassRef]]
) -> list[Candidate]:
    """``found`` with each set of targets that share a forward joined: every member ready
    (``shared`` naming the set) when all are, else each refused naming the set's blockers."""
    by_ref = {c.ref: c for c in found}
    sets = _connected(sharers, [c.ref for c in found if c.owner not in (None, c.decoder)])
    joined: list[Candidate] = []
    for candidate in found:
        members = sets.get(candidate.ref)
        if members is None:
            joined.append(candidate)
            continue
        blockers = _set_blockers(candidate, [by_ref.get(m) for m in members], members)
        if blockers:
            own = candidate.verdict
            reasons = [own.reason] if isinstance(own, Refusal) else []
            verdict = Refusal("; and ".join(dict.fromkeys([*reasons, *blockers])))
            joined.append(replace(candidate, verdict=verdict, shared=()))
        else:
            joined.append(replace(candidate, shared=members))
    ready = [c for c in joined if c.shared]
    leads = {c.shared: lead([m for m in ready if m.shared == c.shared], index) for c in ready}
    return [replace(c, lead=leads[c.shared].ref) if c.shared else c for c in joined]


def _connected(
    sharers: Mapping[ClassRef, Sequence[ClassRef]], alone: Sequence[ClassRef]
) -> dict[ClassRef, tuple[ClassRef, ...]]:
    """Each target that shares a forward (or inherits one) mapped to its whole set, sorted."""
    links: dict[ClassRef, set[ClassRef]] = {}
    for ref, others in sharers.items():
        for other in others:
            links.setdefault(ref, set()).add(other)
            links.setdefault(other, set()).add(ref)
    for ref in alone:
        links.setdefault(ref, set())
    sets: dict[ClassRef, tuple[ClassRef, ...]] = {}
    for start in links:
        if start in sets:
            continue
        seen, todo = {start}, [start]
        while todo:
            for nxt in links.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        members = tuple(sorted(seen))
        for ref in members:
            sets[ref] = members
    return sets


def _set_blockers(
    candidate: Candidate,
    members: Sequence[Candidate | None],
    refs: Sequence[ClassRef],
) -> list[str]:
    """What keeps ``candidate``'s set from being fixed together, in plain words."""
    owner = candidate.captured
    own = candidate.verdict.reason if isinstance(candidate.verdict, Refusal) else None
    blockers: list[str] = []
    for ref, member in zip(refs, members, strict=True):
        if member is None:
            blockers.append(f"{ref.name} is not a target this recipe can fix")
        elif member.ref == candidate.ref:
            continue
        elif isinstance(member.verdict, Refusal):
            same = member.verdict.reason == own
            why = "for the same reason" if same else f"({member.verdict.reason})"
            blockers.append(f"{ref.name} is refused {why}")
        elif member.captured != owner:
            blockers.append(
                f"{ref.name}'s decoder runs {member.captured.name}.forward, not {owner.name}'s"
            )
    if blockers:
        names = ", ".join(r.name for r in refs if r != candidate.ref)
        blockers = [
            f"{owner.name}.forward runs in {names} too, so they are fixed together only, and "
            + "; ".join(blockers)
        ]
    if any(
        m is not None
        and isinstance(m.verdict, DecoderShape)
        and (m.attribute != "model" or m.verdict.layers_attr != "layers")
        for m in members
    ):
        blockers.append(
            "a member keeps its decoder or its layers under another name, and the set's plan "
            "does not write the two delegating methods"
        )
    if not any(m is not None and m.decoder == owner for m in members):
        blockers.append(
            f"{candidate.decoder.name} inherits forward from {owner.name}, which no target "
            "builds itself; editing it reaches decoders this recipe does not check"
        )
    return blockers


def lead(members: Sequence[Candidate], index: ClassIndex) -> Candidate:
    """The member a set's plan is named after: the first (by file, then name) whose own
    decoder is the one gaining the capture."""
    own = [m for m in members if m.decoder == m.captured]
    return min(own or members, key=lambda m: (index.path_of(m.ref), m.ref.name))


@dataclass(frozen=True)
class SharedSet:
    """A ready set, all of it read from the tree: its members (sorted), the one the plan is
    named after, and the capture written once into the decoder whose forward they share."""

    members: tuple[Candidate, ...]
    lead: Candidate
    capture: Capture

    @property
    def owner(self) -> ClassRef:
        return self.lead.captured


def shared_set_of(scan: ScanContext, class_name: str, path: str | None = None) -> SharedSet | None:
    """The ready set ``class_name`` (in ``path``, where given) belongs to; None when it is in
    none, is refused, or is not a clear candidate."""
    from bot.recipes.eagle3_enable.detection import candidates
    from bot.recipes.eagle3_enable.recipe import capture_for

    found = candidates(scan)
    mine = [c for c in found if c.ref.name == class_name]
    if path is not None:
        mine = [c for c in mine if scan.index.path_of(c.ref) == path]
    if len(mine) != 1 or not mine[0].shared:
        return None
    members = tuple(c for c in found if c.ref in mine[0].shared)
    if len(members) != len(mine[0].shared):
        return None
    first = lead(members, scan.index)
    capture = capture_for(scan, first)
    if capture is None:
        return None
    return SharedSet(members, first, capture)


def shared_plan(finding: Finding, ctx: PlanContext) -> FixPlan | Declined:
    """One plan for the whole set ``finding`` belongs to, named after the set's lead (the
    same plan whichever member is asked for)."""
    from bot.recipes.eagle3_enable.recipe import NAME, TEMPLATES, broken_claims_fixed
    from bot.recipes.eagle3_enable.writeup import enable_writeup_context

    index = ctx.scan.index
    found = shared_set_of(ctx.scan, finding.class_name, finding.path)
    if found is None:
        return Declined(f"needs a human: {finding.class_name} is no longer a clear candidate")
    capture, owner = found.capture, found.owner
    by_key = {(f.recipe, f.class_name, f.path): f for f in ctx.findings}
    member_findings: list[Finding] = []
    for member in found.members:
        known = by_key.get((NAME, member.ref.name, index.path_of(member.ref)))
        if known is None:
            return Declined(f"needs a human: {member.ref.name} is not reported by this scan")
        member_findings.append(known)
    lead_finding = next(f for f in member_findings if f.class_name == found.lead.ref.name)
    if capture.target_path != capture.decoder_path:
        return Declined(
            f"needs a human: no target of the set is in {owner.name}'s file "
            f"({capture.decoder_path}); the plan declares the interface there"
        )
    edits = shared_edits(ctx.scan, found)
    entry, entry_why = plan_registry_entry(
        ctx.root, lead_finding.architectures[0], ctx.catalogue, ctx.preferred_draft
    )
    others_with_entry = [
        f.class_name
        for f in member_findings
        if f is not lead_finding
        and plan_registry_entry(ctx.root, f.architectures[0], ctx.catalogue, None)[0]
    ]
    if others_with_entry:
        return Declined(
            "needs a human: registry entries for several targets of one set "
            f"({', '.join(others_with_entry)}); one plan adds at most one"
        )
    if entry is not None:
        from bot.recipes.registry_edit import registry_entry_edit

        edits.append(registry_entry_edit(entry))
    regression = _regression_tests(ctx, member_findings)
    if isinstance(regression, Declined):
        return regression
    edits.append(regression[0])
    cpu_tests = list(regression[1])
    engine_tests: tuple[str, ...] = ()
    through_llm: bool | str = follows_agents_rules(ctx.root)
    if not through_llm:
        forward = _forward_tests(ctx.scan, found)
        if isinstance(forward, Declined):  # the test through LLM instead, if it can
            if (missing := llm_test_unavailable(ctx.root)) is not None:
                return Declined(f"{forward.reason}; no test through LLM either: {missing}")
            through_llm = forward.reason
        else:
            for edit, node_ids in forward:
                edits.append(edit)
                cpu_tests += node_ids
    if through_llm:  # one test through LLM, every member in it
        from bot.recipes.eagle3_enable.recipe import contributed_llm_test, llm_targets

        members = [(m, capture.shape) for m in found.members]
        contributed = contributed_llm_test(ctx, llm_targets(ctx.scan, members), edits)
        if isinstance(contributed, Declined):
            return contributed
        edits.extend(contributed[0])
        engine_tests = contributed[1]
    claims = broken_claims_fixed(ctx, found.lead)
    context = enable_writeup_context(
        ctx, lead_finding, capture.shape, capture.absolute, through_llm
    )
    context["broken_claims"] = [
        {"cls": c.class_name, "why": c.evidence_as(BrokenClaimEvidence).why} for c in claims
    ]
    context["shared"] = _shared_context(ctx, found)
    names = ", ".join(f"`{html.escape(m.ref.name)}`" for m in found.members)
    return FixPlan(
        recipe=NAME,
        finding=lead_finding,
        resolves=(*member_findings, *claims),
        variant=None,
        edits=tuple(edits),
        tests=FixTests(
            cpu=tuple(cpu_tests), gpu=(entry.gpu_test,) if entry else (), engine=engine_tests
        ),
        registry=RegistryDecision(entry, entry_why),
        writeup=WriteUp.from_folder(TEMPLATES, context),
        commit_title=(
            f"[Model][Spec Decode] Support EAGLE-3 in the {len(found.members)} models "
            f"sharing {owner.name}"
        ),
        issue_comment=(
            f"the decoder `{html.escape(owner.name)}` they share collects the aux hidden "
            f"states and {names} declare `SupportsEagle3`, so EAGLE-3 speculative decoding "
            "can load them."
        ),
    )


def shared_edits(scan: ScanContext, found: SharedSet) -> list[FileEdit]:
    """The model-file edits: in the shared decoder's file the mixin, the capture and the
    interface on the targets there; in each other file the interface on its targets."""
    from bot.codemods.bases import append_base_class
    from bot.codemods.imports import add_import_name
    from bot.codemods.nested_capture import add_capture
    from bot.codemods.spans import ClassBody, ClassHeader, Imports
    from bot.recipes.eagle3_analysis import INTERFACE, MIXIN
    from bot.recipes.eagle3_interface.recipe import interfaces_import_module

    index, capture, owner = scan.index, found.capture, found.owner
    by_path: dict[str, list[str]] = {}
    for member in inheritance_roots(index, [m.ref for m in found.members]):
        by_path.setdefault(index.path_of(member), []).append(member.name)
    edits: list[FileEdit] = []
    for path in sorted({capture.decoder_path, *by_path}):
        module = interfaces_import_module((scan.root / path).read_text(encoding="utf-8"), path)
        steps: list[CodemodStep] = []
        spans: list[Span] = [Imports()]
        if path == capture.decoder_path:
            # A nested decoder's child takes the mixin too (the two-module form).
            mixin_classes = [owner.name, *([capture.shape.child] if capture.shape.child else [])]
            steps += [
                step(add_import_name, module=module, name=MIXIN),
                *(step(append_base_class, class_name=name, base=MIXIN) for name in mixin_classes),
                step(add_capture, **capture.capture_args()),
            ]
            for name in mixin_classes:
                spans += [ClassHeader(name), ClassBody(name)]
        targets = sorted(by_path.get(path, ()))
        if targets:
            steps.append(step(add_import_name, module=module, name=INTERFACE))
        for name in targets:
            steps.append(step(append_base_class, class_name=name, base=INTERFACE))
            spans.append(ClassHeader(name))
        declared = ", ".join(targets)
        if path == capture.decoder_path:
            kind = SHARED_DECODER
            description = (
                f"{owner.name} takes {MIXIN} and collects the aux hidden states in forward "
                f"({capture.shape.loop} loop, {capture.shape.residual}); {declared} declare "
                f"{INTERFACE}"
            )
        else:
            kind = SHARED_INTERFACE
            description = (
                f"{declared} declare {INTERFACE} (their decoder runs {owner.name}.forward)"
            )
        edits.append(FileEdit(path, kind, description, tuple(steps), tuple(spans)))
    return edits


def inheritance_roots(index: ClassIndex, members: Sequence[ClassRef]) -> list[ClassRef]:
    """The members that declare the interface themselves: a member subclassing another member
    inherits the declaration, as upstream writes it (one ``SupportsEagle3`` on the base)."""
    return [m for m in members if not any(a != m and a in members for a in index.ancestors(m))]


def _regression_tests(
    ctx: PlanContext, findings: Sequence[Finding]
) -> tuple[FileEdit, tuple[str, ...]] | Declined:
    """One edit of tests/models/test_registry.py listing every member's architecture."""
    from bot.codemods.regression_test import (
        REGISTRY_TEST,
        add_eagle3_regression_test,
        add_registry_eagle3_test,
        regression_test_spans,
    )

    node_ids: list[str] = []
    for finding in findings:
        planned = add_eagle3_regression_test(
            ctx.root,
            class_name=finding.class_name,
            class_module=finding.module,
            archs=[finding.architectures[0]],
            platform_variant=False,
        )
        if planned.path != REGISTRY_TEST:
            return Declined(
                f"needs a human: {finding.class_name}'s regression test goes into "
                f"{planned.path}, and a set's plan writes one regression test edit"
            )
        node_ids += planned.node_ids
    archs = tuple(f.architectures[0] for f in findings)
    edit = FileEdit(
        path=REGISTRY_TEST,
        kind="regression-test",
        description=f"assert supports_eagle3 on the CPU for {', '.join(archs)}",
        steps=(step(add_registry_eagle3_test, archs=archs),),
        confined_to=regression_test_spans(),
    )
    return edit, tuple(node_ids)


def shared_forward_tests(
    scan: ScanContext, found: SharedSet
) -> dict[str, tuple[str, tuple[dict[str, Any], ...]]] | Declined:
    """Each test file's path mapped to its module and its tests' fields (one per target)."""
    from bot.codemods.aux_forward_test import aux_test_path
    from bot.recipes.eagle3_enable.forward_reads import forward_test_fields

    by_module: dict[str, list[dict[str, Any]]] = {}
    for member in found.members:
        fields = forward_test_fields(scan, member, found.capture.shape)
        if isinstance(fields, Declined):
            return fields
        by_module.setdefault(member.ref.module, []).append(fields)
    return {
        aux_test_path(module): (module, tuple(tests)) for module, tests in sorted(by_module.items())
    }


def _forward_tests(
    scan: ScanContext, found: SharedSet
) -> list[tuple[FileEdit, list[str]]] | Declined:
    from bot.codemods.aux_forward_test import aux_forward_test_name, create_shared_aux_forward_test

    planned = shared_forward_tests(scan, found)
    if isinstance(planned, Declined):
        return planned
    result: list[tuple[FileEdit, list[str]]] = []
    for path, (module, tests) in planned.items():
        if (scan.root / path).exists():
            return Declined(f"needs a human: no contributed forward test ({path} exists)")
        targets = [str(t["target"]) for t in tests]
        edit = FileEdit(
            path=path,
            kind="aux-forward-test",
            description=(
                f"a CPU test per target ({', '.join(targets)}) running its forward on stand-in "
                "layers: the aux states captured are the residual stream, the output unchanged "
                "without them"
            ),
            steps=(step(create_shared_aux_forward_test, module=module, tests=tests),),
            confined_to=(),
            creates=True,
        )
        result.append((edit, [f"{path}::{aux_forward_test_name(t)}" for t in targets]))
    return result


def _shared_context(ctx: PlanContext, found: SharedSet) -> dict[str, Any]:
    index = ctx.scan.index
    targets = []
    for member in found.members:
        where = locate(index, member.ref)
        targets.append(
            {
                "name": member.ref.name,
                "path": where.path,
                "line": where.line,
                "url": ctx.url(where.path, where.line),
                "decoder": member.decoder.name,
                "inherits": member.decoder != found.owner,
            }
        )
    return {"decoder": found.owner.name, "targets": targets}
