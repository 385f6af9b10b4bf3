"""Recipe ``core-eagle3-forwarding``: ``SupportsEagle3``'s default methods forward to a
language model that declares the interface, and raise the tree's own clear error when the
model cannot collect aux hidden states, fixed once in ``interfaces.py`` instead of a guard and
two forwarders pasted into every multimodal wrapper whose language model the checkpoint picks.

Detected from the tree: the protocol's two defaults (which unwrap ``get_language_model()
.model`` and assert, but never ask the language model's own declaration), the tree's guard
(Pixtral's ``_require_language_model_eagle3``, whose ``raise`` the defaults reuse), and the
``eagle3-wrapper`` findings it turns into plain declarations; none when the defaults forward
already, the tree has no guard, or no wrapper needs it.

The finding also measures the risk (``declared``): every registered class that declares the
interface and inherits the defaults, with its language model, and whether the forwarding
changes what it does (only where that language model declares the interface itself and
overrides one of the two methods: then its override runs instead of the default's unwrap).
"""

from __future__ import annotations

import ast
import html
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
    WriteUp,
    own_templates,
    step,
)
from bot.recipes.core_eagle3_forwarding.evidence import (
    METHODS,
    NAME,
    PROTOCOL,
    Declared,
    ForwardingEvidence,
    Guard,
    Wrapper,
)
from bot.recipes.eagle3_analysis import constructed, declares_eagle3, mixin_chain
from bot.recipes.evidence import Located
from bot.recipes.wrapper_analysis import protocol_defaults
from bot.tree.index import ClassIndex, ClassRef
from bot.tree.layout import INTERFACES_MODULE

if TYPE_CHECKING:
    from bot.recipes.wrapper_analysis import Guard as TreeGuard

TEMPLATES = own_templates(__name__)
EDIT = "eagle3-forwarding-defaults"


class CoreEagle3Forwarding(Recipe):
    name = NAME
    description = "SupportsEagle3's defaults forward to the language model, with the clear error"
    evidence_type = ForwardingEvidence
    replication = (
        "Moves the guard and the two forwarders the tree's own wrappers write (Pixtral's) into "
        "the protocol's defaults once, reusing the guard's error."
    )

    def evidence_line(self, finding: Finding) -> str:
        ev = finding.evidence_as(ForwardingEvidence)
        return (
            f"{len(ev.declarations)} wrappers need only the declaration with it; of "
            f"{len(ev.declared)} declared classes on the defaults, {len(ev.changed())} change"
        )

    def group_key(self, finding: Finding) -> str:
        return NAME

    def detect(self, ctx: ScanContext) -> list[Finding]:
        from bot.recipes.eagle3_wrapper.recipe import findings_with_assessments
        from bot.recipes.wrapper_analysis import runtime_guard

        defaults = protocol_defaults(ctx.root)
        if defaults is None or defaults.forwards:
            return []
        tree_guard = runtime_guard(ctx)
        if tree_guard is None or (raises := guard_raise(tree_guard)) is None:
            return []
        wrappers = [
            Wrapper(f.class_name, f.path, "runtime", f.line)
            for f, _ in findings_with_assessments(ctx)
            if f.evidence.depends_on() is not None and f.evidence.depends_on().recipe == NAME
        ]
        if not wrappers:
            return []
        guard = Guard(
            tree_guard.name,
            tree_guard.path,
            tree_guard.line,
            owner=tree_guard.owner.name,
            raises=raises,
        )
        declared = tuple(declared_on_defaults(ctx))
        changed = sum(1 for d in declared if d.works_today and d.takes != "unwrap")
        evidence = ForwardingEvidence(
            cls=Located(PROTOCOL, defaults.path, defaults.class_line),
            methods=METHODS,
            guard=guard,
            declarations=tuple(sorted(wrappers, key=lambda w: (w.path, w.name))),
            declared=declared,
        )
        summary = (
            f"{PROTOCOL}'s defaults do not forward to a language model that declares the "
            f"interface: {len(wrappers)} wrappers need the tree's guard and two forwarders "
            f"each; with the defaults forwarding they need only the declaration "
            f"(of {len(declared)} classes on the defaults today, "
            f"{sum(d.works_today for d in declared)} work and {changed} of those would change)"
        )
        return [
            Finding(
                recipe=NAME,
                class_name=PROTOCOL,
                module=INTERFACES_MODULE,
                path=defaults.path,
                line=defaults.class_line,
                architectures=(),
                evidence=evidence,
                summary=summary,
            )
        ]

    def plan(self, finding: Finding, ctx: PlanContext) -> FixPlan | Declined:
        edit = forwarding_edit(ctx.scan)
        if isinstance(edit, Declined):
            return edit
        ev = finding.evidence_as(ForwardingEvidence)
        return FixPlan(
            recipe=NAME,
            finding=finding,
            resolves=(finding,),
            variant=None,
            edits=(edit,),
            tests=FixTests(),
            registry=RegistryDecision(None, "a core change: no model is added to the registry"),
            writeup=WriteUp.from_folder(TEMPLATES, writeup_context(ctx, ev)),
            commit_title=(
                "[Spec Decode] SupportsEagle3 defaults: forward to a language model that "
                "declares the interface"
            ),
            issue_comment=(
                f"`{PROTOCOL}`'s default methods forward to a language model that declares the "
                f"interface and raise the tree's clear error otherwise, so "
                f"{len(ev.declarations)} multimodal wrappers need only the declaration."
            ),
        )


def guard_raise(guard: TreeGuard) -> str | None:
    """The guard's ``raise`` statement with its language model named ``language_model`` (what
    the defaults' helper calls it), or None when it has no single one."""
    tree = ast.parse(guard.source)
    raises = [n for n in ast.walk(tree) if isinstance(n, ast.Raise)]
    if len(raises) != 1:
        return None
    text = ast.get_source_segment(guard.source, raises[0], padded=False)
    if text is None:
        return None
    lines = text.splitlines()
    indent = raises[0].col_offset
    body = "\n".join([lines[0], *(line[indent:] for line in lines[1:])])
    named = body.replace(f"self.{guard.attribute}", "language_model")
    return None if "self" in named else named + "\n"


def forwarding_edit(scan: ScanContext) -> FileEdit | Declined:
    """The edit of the interfaces module, the guard's raise read from the tree."""
    from bot.codemods.spans import BetweenTopLevel, ClassBody
    from bot.recipes.core_eagle3_forwarding.codemods import forward_eagle3_defaults
    from bot.recipes.wrapper_analysis import runtime_guard

    defaults = protocol_defaults(scan.root)
    tree_guard = runtime_guard(scan)
    if defaults is None or tree_guard is None:
        return Declined(f"no {PROTOCOL} defaults, or no guard to take the error from")
    raises = guard_raise(tree_guard)
    if raises is None:
        return Declined(f"the tree's guard {tree_guard.name} has no single raise to reuse")
    return FileEdit(
        path=defaults.path,
        kind=EDIT,
        description=(
            f"{PROTOCOL}.{' and '.join(METHODS)} hand a multimodal model's call to its "
            f"language model when that declares the interface, and raise "
            f"{tree_guard.owner.name}.{tree_guard.name}'s error when it cannot collect"
        ),
        steps=(step(forward_eagle3_defaults, raises=raises),),
        confined_to=(ClassBody(PROTOCOL), BetweenTopLevel()),
    )


def declared_on_defaults(ctx: ScanContext) -> list[Declared]:
    """Every registered class declaring the interface that inherits both defaults and has a
    language model of its own, with whether forwarding changes what the defaults do for it."""
    from bot.recipes.wrapper_analysis import language_model_sources

    index = ctx.index
    found: list[Declared] = []
    for entry in ctx.registry.entries:
        for ref in index.resolve(entry.module, entry.class_name):
            if not isinstance(ref, ClassRef) or not declares_eagle3(index, ref):
                continue
            if any(_overrides(index, ref, m) for m in METHODS):
                continue  # its own methods: the defaults never run for it
            if index.find_method(ref, "get_language_model") is None and not any(
                attr == "language_model" for attr in _assigned(index, ref)
            ):
                continue  # no language model to forward to: the defaults run as before
            sources, _ = language_model_sources(ctx, ref)
            if not sources or not sources[0].attribute:
                continue  # its own language model (a text model): the defaults run as before
            found.append(_declared(ctx, ref, sources[0].cls))
    unique = {(d.name, d.path): d for d in found}
    return sorted(unique.values(), key=lambda d: (d.path, d.name))


def _assigned(index: ClassIndex, ref: ClassRef) -> set[str]:
    """What ``ref`` and its ancestors assign to ``self`` in ``__init__``."""
    found: set[str] = set()
    for owner in index.ancestors(ref):
        facts = index.class_facts(owner) if isinstance(owner, ClassRef) else None
        init = (facts or {}).get("methods", {}).get("__init__", {})
        found |= {attr for attr, _callee, _line in init.get("assigns", [])}
    return found


def _overrides(index: ClassIndex, ref: ClassRef, method: str) -> ClassRef | None:
    """The class below the protocol that defines ``method`` for ``ref``, if any."""
    found = index.find_method(ref, method)
    if found is None or found[0].module == INTERFACES_MODULE:
        return None
    return found[0]


def _declared(ctx: ScanContext, ref: ClassRef, lm: ClassRef | None) -> Declared:
    index = ctx.index
    path = index.path_of(ref)
    if lm is None:  # the checkpoint picks it: today's capable ones all unwrap
        return Declared(ref.name, path, "text_config (run time)", "unwrap", True)
    if _unwraps(index, lm):
        return Declared(ref.name, path, lm.name, "unwrap", True)
    takes = "forward" if declares_eagle3(index, lm) else "error"
    return Declared(ref.name, path, lm.name, takes, False)


def _unwraps(index: ClassIndex, lm: ClassRef) -> bool:
    """Whether the defaults' ``getattr(lm, "model", lm)`` is an ``EagleModelMixin``."""
    if mixin_chain(index, lm):
        return True
    return any(mixin_chain(index, c.cls) for c in constructed(index, lm, "model"))


def writeup_context(ctx: PlanContext, ev: ForwardingEvidence) -> dict[str, Any]:
    guard = ev.guard
    return {
        "protocol": {**ev.cls.to_json(), "url": ctx.url(ev.cls.path, ev.cls.line)},
        "guard": {**guard.to_json(), "url": ctx.url(guard.path, guard.line)},
        "raises": html.escape(guard.raises.strip()),
        "declarations": [w.to_json() for w in ev.declarations],
        "declared": [d.to_json() for d in ev.declared],
        "changed": [d.to_json() for d in ev.changed()],
    }


RECIPE = CoreEagle3Forwarding()
