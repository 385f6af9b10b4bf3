"""Report ``eagle3-broken-claim``: a class declares ``SupportsEagle3`` but would fail when used.

vLLM trusts the declaration: with EAGLE-3 configured it calls the interface's default methods,
which follow ``get_language_model()`` (or ``self.language_model``) to a holder and its ``.model``
the way *this tree's* ``SupportsEagle3`` says, and assert that the holder is an
``EagleModelMixin``; then the target's ``forward`` must hand back the decoder's
``(hidden_states, aux_hidden_states)`` tuple. Reported, with file:line evidence, when:

- ``no-mixin``: the holder the defaults reach lacks ``EagleModelMixin`` (the assert fails);
- ``no-capture``: the holder has the mixin but its ``forward`` collects no aux hidden states;
- ``forward-drops``: the target's ``forward`` (its own or an intermediate base's) does not return
  the decoder's output unchanged, so the tuple never reaches the proposer.

Only what the index can follow is judged: a class that overrides the interface's methods, whose
language model is chosen at run time, or whose decoder the bot cannot resolve is left alone
(``unjudged`` counts them), since a false alarm here costs a maintainer's time. No patch.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, replace
from typing import Any

from bot.recipes.base import Finding, Recipe, ScanContext
from bot.recipes.eagle3_analysis import (
    SUPPORTS_EAGLE3,
    class_finding,
    constructed,
    declares_eagle3,
    is_pooling_model,
    locate,
    mixin_chain,
)
from bot.recipes.eagle3_broken_claim.evidence import (
    BrokenClaimEvidence,
    ClaimFix,
    ClaimTrace,
    Declared,
    Reached,
)
from bot.recipes.evidence import At, Bound, Located
from bot.recipes.wrapper_analysis import (
    DECODER_ATTRIBUTE,
    INTERFACES_PATH,
    LANGUAGE_MODEL_ATTRIBUTE,
    PROTOCOL_METHODS,
    ProtocolDefaults,
    language_model_sources,
    protocol_defaults,
)
from bot.tree.index import ClassIndex, ClassRef
from bot.tree.layout import INTERFACES_MODULE
from bot.tree.model_registry import GENERATION_CATEGORIES, RegistryEntry

NAME = "eagle3-broken-claim"
NO_MIXIN = "no-mixin"
NO_CAPTURE = "no-capture"
FORWARD_DROPS = "forward-drops"


# -- one class's claim ----------------------------------------------------------------------


@dataclass(frozen=True)
class Resolution:
    """What the defaults reach from a class: ``parent`` (the language model or the class itself,
    reached as ``self.<parent_attribute>``), then ``holder`` (its ``.model``, or itself)."""

    parent: ClassRef
    parent_attribute: str  # "" when the parent is the class itself
    parent_line: int  # where the class builds it (0 for the class itself)
    parent_owner: ClassRef
    holder: ClassRef
    holder_line: int  # where the parent builds self.model (0 when the holder is the parent)
    holder_owner: ClassRef


@dataclass(frozen=True)
class Verdict:
    """``kind`` is None when the claim holds; ``unjudged`` says why the bot did not decide."""

    kind: str | None
    why: str
    trace: ClaimTrace | None
    unjudged: str = ""
    holder: ClassRef | None = None  # the decoder the interface's defaults reach


class Eagle3BrokenClaim(Recipe):
    name = NAME
    description = "declares SupportsEagle3 but would fail when used (reported, not patched)"
    evidence_type = BrokenClaimEvidence

    def evidence_line(self, finding: Finding) -> str:
        ev = finding.evidence_as(BrokenClaimEvidence)
        return f"declared {ev.declared.path}:{ev.declared.line}; {ev.why}"

    def contests_claim(self, ctx: ScanContext, arch: str) -> str | None:
        """The judgement on each platform variant of the class ``arch`` loads (None when the
        claim holds or cannot be judged)."""
        defaults = protocol_defaults(ctx.root)
        if defaults is None:
            return None
        for entry in ctx.registry.entries:
            if entry.arch != arch or entry.category not in GENERATION_CATEGORIES:
                continue
            for ref in ctx.index.resolve(entry.module, entry.class_name):
                if isinstance(ref, ClassRef):
                    verdict = judge(ctx, ref, defaults)
                    if verdict.kind is not None:
                        return verdict.why
        return None

    def detect(self, ctx: ScanContext) -> list[Finding]:
        defaults = protocol_defaults(ctx.root)
        if defaults is None:
            return []
        from bot.recipes.eagle3_broken_claim.fix import claim_fix
        from bot.recipes.eagle3_enable.detection import candidates

        enable: list[Any] = []  # eagle3-enable's candidates, read once, only when a claim asks

        def enable_candidates() -> list[Any]:
            if not enable:
                enable.extend(candidates(ctx))
            return enable

        findings: list[Finding] = []
        for ref, entries in claimed_targets(ctx).items():
            verdict = judge(ctx, ref, defaults)
            if verdict.kind is None:
                continue
            fix = None
            if verdict.holder is not None:
                fix = claim_fix(ctx, verdict.kind, verdict.holder, ref, enable_candidates)
            findings.append(_finding(ctx.index, ref, entries, verdict, fix))
        return findings


def claimed_targets(ctx: ScanContext) -> dict[ClassRef, list[RegistryEntry]]:
    """Registered text-generation / multimodal classes that declare SupportsEagle3."""
    by_class: dict[ClassRef, list[RegistryEntry]] = {}
    for entry in ctx.registry.entries:
        if entry.category not in GENERATION_CATEGORIES:
            continue
        for resolved in ctx.index.resolve(entry.module, entry.class_name):
            if isinstance(resolved, ClassRef):
                by_class.setdefault(resolved, []).append(entry)
    return {
        ref: entries
        for ref, entries in sorted(by_class.items())
        if declares_eagle3(ctx.index, ref) and not is_pooling_model(ctx.index, ref, entries)
    }


def judge(ctx: ScanContext, ref: ClassRef, defaults: ProtocolDefaults) -> Verdict:
    index = ctx.index
    overridden = _overridden_protocol(index, ref)
    if overridden is not None:
        return _unjudged(f"{overridden} overrides the interface's methods")
    resolution = resolve_holder(ctx, ref, defaults)
    if isinstance(resolution, str):
        return _unjudged(resolution)
    trace = _trace(ctx, resolution, defaults)
    holder = resolution.holder
    if mixin_chain(index, holder) is None:
        where = locate(index, holder)
        fails = (
            f"the assert in {INTERFACES_PATH}:{defaults.assert_line} fails"
            if defaults.assert_line
            else f"its _set_aux_hidden_state_layers call ({INTERFACES_PATH}:{defaults.line}) fails"
        )
        why = (
            f"the interface's default set_aux_hidden_state_layers reaches {_path_text(resolution)}"
            f" = {holder.name} ({where.path}:{where.line}), which lacks EagleModelMixin: {fails}"
        )
        return Verdict(NO_MIXIN, why, trace, holder=holder)
    decoder_forward = _forward(index, holder)
    if decoder_forward is None:
        return _unjudged(f"{holder.name} has no forward in the model packages")
    owner, facts = decoder_forward
    trace = replace(trace, decoder_forward=_forward_at(index, owner, facts["line"]))
    if not handles_aux(index, holder):
        why = (
            f"{holder.name} has EagleModelMixin but {owner.name}.forward "
            f"({index.path_of(owner)}:{facts['line']}) never collects aux hidden states (no "
            "_maybe_add_hidden_state, no aux_hidden_state_layers, nothing it hands off to does), "
            "so EAGLE-3 gets none back"
        )
        return Verdict(NO_CAPTURE, why, trace, holder=holder)
    checked = _forward_check(index, ref, resolution)
    if checked is not None:
        verdict, owner, line, why = checked
        if verdict == "reworks":
            return _unjudged(why)
        trace = replace(trace, forward=_forward_at(index, owner, line))
        return Verdict(FORWARD_DROPS, why, trace)
    return Verdict(None, "the claim holds", trace)


def _unjudged(reason: str) -> Verdict:
    return Verdict(None, "", None, unjudged=reason)


def _overridden_protocol(index: ClassIndex, ref: ClassRef) -> str | None:
    for method in PROTOCOL_METHODS:
        found = index.find_method(ref, method)
        if found is not None and found[0].module != INTERFACES_MODULE:
            return f"{found[0].name}.{method}"
    return None


def resolve_holder(ctx: ScanContext, ref: ClassRef, defaults: ProtocolDefaults) -> Resolution | str:
    """The class the defaults assert on, following this tree's rules, or why it is unknown."""
    index = ctx.index
    parent, attribute, line, owner = ref, "", 0, ref
    has_get_lm = index.find_method(ref, "get_language_model") is not None
    if defaults.follows_get_language_model and has_get_lm:
        sources, problem = language_model_sources(ctx, ref)
        if problem:
            return problem
        classes = {s.cls for s in sources}
        if not sources or len(classes) != 1 or None in classes:
            return "its language model is chosen at run time or not followed"
        lm = sources[0]
        assert lm.cls is not None
        parent, attribute, line, owner = lm.cls, lm.attribute, lm.line, lm.owner
    elif defaults.follows_language_model or (
        has_get_lm and not defaults.follows_get_language_model
    ):
        built = constructed(index, ref, LANGUAGE_MODEL_ATTRIBUTE)
        if built:
            if len({c.cls for c in built}) != 1:
                return "it builds one of several language models"
            parent, attribute = built[0].cls, LANGUAGE_MODEL_ATTRIBUTE
            line, owner = built[0].line, built[0].owner
    if defaults.unwrap == "none":
        return Resolution(parent, attribute, line, owner, parent, 0, parent)
    decoders = constructed(index, parent, DECODER_ATTRIBUTE)
    if len({c.cls for c in decoders}) > 1:
        return f"{parent.name} builds one of several decoders"
    if decoders:
        built = decoders[0]
        return Resolution(parent, attribute, line, owner, built.cls, built.line, built.owner)
    if defaults.unwrap == "optional" and mixin_chain(index, parent) is not None:
        return Resolution(parent, attribute, line, owner, parent, 0, parent)
    # No self.model the index can see: built in a way the bot does not follow (or missing).
    return f"{parent.name} builds no self.model the bot can follow"


@dataclass(frozen=True)
class ForwardChain:
    """A class's ``forward`` and the parents' it reaches through ``super().forward(...)``."""

    owner: ClassRef
    line: int
    passthrough: frozenset[str]  # what it hands back unchanged: "model", "language_model", ...
    calls: frozenset[str]  # what it calls: "model", "language_model.model", "_stock_forward"


def forward_chain(index: ClassIndex, ref: ClassRef, method: str = "forward") -> ForwardChain | None:
    found = _forward(index, ref, method)
    if found is None:
        return None
    owner, facts = found
    passthrough = set(facts.get("passthrough", ()))
    calls = set(facts.get("calls", ()))
    current: ClassRef | None = owner
    while current is not None and "super()" in passthrough | calls:
        passthrough.discard("super()")
        calls.discard("super()")
        current = _next_definition(index, ref, current, method)
        if current is not None:
            parent_facts = (index.class_facts(current) or {})["methods"][method]
            passthrough |= set(parent_facts.get("passthrough", ()))
            calls |= set(parent_facts.get("calls", ()))
    return ForwardChain(owner, facts["line"], frozenset(passthrough), frozenset(calls))


def _forward(
    index: ClassIndex, ref: ClassRef, method: str = "forward"
) -> tuple[ClassRef, dict[str, Any]] | None:
    found = index.find_method(ref, method)
    if found is None or found[0].module == INTERFACES_MODULE:
        return None
    return found


def handles_aux(index: ClassIndex, ref: ClassRef, method: str = "forward", depth: int = 0) -> bool:
    """Whether ``ref.<method>`` (or what it hands its answer to) touches the aux hidden states.

    Generous on purpose: any aux name, the helper, or ``aux_hidden_state_layers`` counts, and so
    does a ``return super().forward(...)`` or ``return self._impl(...)`` that does.
    """
    found = index.find_method(ref, method)
    if found is None or depth > 5:
        return False
    owner, facts = found
    if any(facts.get("aux", {}).values()):
        return True
    for path in facts.get("passthrough", ()):
        if path == "super()":
            parent = _next_definition(index, ref, owner, method)
            if parent is not None and handles_aux(index, parent, method, depth + 1):
                return True
        elif (
            "." not in path
            and path != method
            and index.find_method(ref, path) is not None
            and handles_aux(index, ref, path, depth + 1)
        ):
            return True
    return False


def _next_definition(
    index: ClassIndex, ref: ClassRef, after: ClassRef, method: str
) -> ClassRef | None:
    ancestors = [a for a in index.ancestors(ref) if isinstance(a, ClassRef)]
    for ancestor in ancestors[ancestors.index(after) + 1 :]:
        facts = index.class_facts(ancestor)
        if facts and method in facts["methods"] and ancestor.module != INTERFACES_MODULE:
            return ancestor
    return None


def _forward_check(
    index: ClassIndex, ref: ClassRef, resolution: Resolution
) -> tuple[str, ClassRef, int, str] | None:
    """``(verdict, owner, line, why)`` for the forward that must hand the tuple back:
    ``drops`` when it never calls the decoder, ``reworks`` when it calls it but does not return
    its output unchanged (the bot cannot tell whether the tuple survives); None when it does."""
    if resolution.parent == ref:
        if resolution.holder == ref:
            return None  # the class is the decoder: its forward is the one that collects
        return _check_calls(index, ref, (DECODER_ATTRIBUTE,), resolution.holder)
    attr = resolution.parent_attribute
    through_decoder = f"{attr}.{DECODER_ATTRIBUTE}"
    chain = forward_chain(index, ref)
    if chain is None:
        return None
    if through_decoder in chain.passthrough and resolution.holder != resolution.parent:
        return None
    if attr in chain.passthrough:
        if resolution.holder == resolution.parent:
            return None
        return _check_calls(index, resolution.parent, (DECODER_ATTRIBUTE,), resolution.holder)
    return _check_calls(index, ref, (attr, through_decoder), None)


def _check_calls(
    index: ClassIndex, ref: ClassRef, wanted: tuple[str, ...], decoder: ClassRef | None
) -> tuple[str, ClassRef, int, str] | None:
    chain = forward_chain(index, ref)
    if chain is None or wanted[0] in chain.passthrough:
        return None
    where = ref.name if chain.owner == ref else f"{ref.name}'s base {chain.owner.name}"
    shown = f"self.{wanted[0]}" + (f" ({decoder.name})" if decoder else "")
    if chain.calls & set(wanted):
        why = f"{where}.forward calls {shown} but does not return its output unchanged"
        return "reworks", chain.owner, chain.line, why
    why = (
        f"{where}.forward never calls {shown}, whose forward collects the aux hidden states, "
        "so the (hidden_states, aux_hidden_states) tuple never reaches EAGLE-3"
    )
    return "drops", chain.owner, chain.line, why


# -- evidence -------------------------------------------------------------------------------


def _at(index: ClassIndex, ref: ClassRef, line: int) -> At:
    return At(index.path_of(ref), line)


def _forward_at(index: ClassIndex, owner: ClassRef, line: int) -> Located:
    return Located(f"{owner.name}.forward", index.path_of(owner), line)


def _path_text(resolution: Resolution) -> str:
    parts = ["self"]
    if resolution.parent_attribute:
        parts.append(resolution.parent_attribute)
    if resolution.holder_line:
        parts.append(DECODER_ATTRIBUTE)
    return ".".join(parts)


def declaration(index: ClassIndex, ref: ClassRef) -> Declared:
    """Where ``ref`` gets the interface: the class that lists SupportsEagle3 among its bases."""
    chain = index.path_to(ref, SUPPORTS_EAGLE3)
    if chain and len(chain) >= 2:
        declaring = chain[-2]
        return Declared(*astuple(locate(index, declaring)), inherited=declaring != ref)
    flag = index.find_class_attr(ref, "supports_eagle3")
    owner = flag[0] if flag else ref
    return Declared(*astuple(locate(index, owner)), inherited=owner != ref, flag=True)


def _trace(ctx: ScanContext, resolution: Resolution, defaults: ProtocolDefaults) -> ClaimTrace:
    index = ctx.index
    holder_at = None
    if resolution.holder_line:
        holder_at = _at(index, resolution.holder_owner, resolution.holder_line)
    language_model = None
    if resolution.parent_attribute:
        language_model = Bound(
            *astuple(locate(index, resolution.parent)),
            attribute=f"self.{resolution.parent_attribute}",
            assigned_at=_at(index, resolution.parent_owner, resolution.parent_line),
        )
    return ClaimTrace(
        interface=Located(
            f"SupportsEagle3.{PROTOCOL_METHODS[0]}",
            INTERFACES_PATH,
            defaults.assert_line or defaults.line,
        ),
        decoder=Reached(
            *astuple(locate(index, resolution.holder)),
            reached_as=_path_text(resolution),
            assigned_at=holder_at,
        ),
        language_model=language_model,
    )


def _finding(
    index: ClassIndex,
    ref: ClassRef,
    entries: list[RegistryEntry],
    verdict: Verdict,
    fix: ClaimFix | None = None,
) -> Finding:
    trace = verdict.trace
    assert verdict.kind is not None and trace is not None  # only broken claims are reported
    declared = declaration(index, ref)
    evidence = BrokenClaimEvidence(
        cls=locate(index, ref),
        declared=declared,
        broken=verdict.kind,
        why=verdict.why,
        interface=trace.interface,
        decoder=trace.decoder,
        language_model=trace.language_model,
        decoder_forward=trace.decoder_forward,
        forward=trace.forward,
        fix=fix,
    )
    via = f" (inherited from {declared.name})" if declared.inherited else ""
    summary = f"{ref.name} declares SupportsEagle3{via} but would fail when used: {verdict.why}"
    if fix is not None and fix.ready:
        summary += f"; the eagle3-enable plan for {', '.join(fix.ready)} repairs it"
    return class_finding(NAME, ref, entries, evidence, summary)


RECIPE = Eagle3BrokenClaim()
