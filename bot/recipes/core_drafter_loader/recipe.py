"""Recipe ``core-drafter-loader``: vLLM's speculative-decoding loaders reach every target's
decoder and input embedding, fixed once in the core instead of in each model.

Detected from the tree (:mod:`bot.tree.drafter_loader`): the loader lines that read the
target's decoder as ``.model`` with no fallback, or look its input embedding up by name only,
and the ``eagle3-enable`` targets those lines refuse (each with the lines refusing it). One
finding per tree, named after the first such line's function; none when the loaders refuse no
target.

The plan changes every loader in one PR: each decoder read becomes ``getattr(lm, "model",
lm)``, the form the protocol's own default and dflash's loader already use; each lookup by
name becomes ``get_input_embedding(decoder)``, a helper beside ``PPMissingLayer`` in
``vllm/model_executor/models/utils.py`` that tries the loaders' names first (a target served
today is served the same module) and otherwise takes the one ``VocabParallelEmbedding`` the
module holds that is not an ``lm_head``. The enable plans of the targets it unblocks build on
it (``evidence.builds_on``) and open after its PR merges.
"""

from __future__ import annotations

import html
from collections import defaultdict
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
from bot.recipes.core_drafter_loader.evidence import (
    NAME,
    Blocked,
    LoaderEvidence,
    Served,
    Site,
    anchor,
)
from bot.recipes.evidence import Located
from bot.tree.drafter_loader import REWRITTEN, Loaders, loader_sites

if TYPE_CHECKING:
    from bot.codemods.spans import Span

TEMPLATES = own_templates(__name__)
LOADER_EDIT = "drafter-loader"
HELPER_EDIT = "input-embedding-helper"


class CoreDrafterLoader(Recipe):
    name = NAME
    description = "the speculative-decoding loaders reach every target's decoder and embedding"
    evidence_type = LoaderEvidence
    replication = (
        "Uses the decoder read the protocol's own default and dflash's loader already use "
        '(`getattr(lm, "model", lm)`), and one helper every loader shares.'
    )

    def evidence_line(self, finding: Finding) -> str:
        ev = finding.evidence_as(LoaderEvidence)
        ready = len(ev.unblocked())
        return (
            f"{len(ev.sites)} loader lines refuse {len(ev.blocked)} enable targets; "
            f"{ready} of them are ready once this is applied"
        )

    def group_key(self, finding: Finding) -> str:
        return NAME

    def detect(self, ctx: ScanContext) -> list[Finding]:
        loaders = loader_sites(ctx.root)
        if not loaders.sites:
            return []
        blocked = refused_targets(ctx)
        if not blocked:
            return []
        first = anchor(loaders)
        evidence = LoaderEvidence(
            cls=Located(first.function, first.path, first.line),
            sites=tuple(Site.of(s) for s in loaders.sites),
            language_models=loaders.language_models,
            decoders=loaders.decoders,
            blocked=tuple(blocked),
            served=served_today(ctx, loaders),
        )
        ready = sum(1 for b in blocked if b.after is None)
        summary = (
            f"{len(loaders.decoder_sites)} loader lines read the target's decoder as .model "
            f"and {len(loaders.embedding_sites)} look its input embedding up by name only: "
            f"they refuse {len(blocked)} enable targets, {ready} of which are ready once the "
            "loaders are fixed"
        )
        module = first.path.removesuffix(".py").replace("/", ".")
        return [
            Finding(
                recipe=NAME,
                class_name=first.function,
                module=module,
                path=first.path,
                line=first.line,
                architectures=(),
                evidence=evidence,
                summary=summary,
            )
        ]

    def plan(self, finding: Finding, ctx: PlanContext) -> FixPlan | Declined:
        loaders = loader_sites(ctx.root)
        if not loaders.sites:
            return Declined(f"no loader line refuses a target in this tree ({finding.path})")
        unwritten = loaders.unwritten
        if unwritten:
            return Declined(
                f"needs a human: {unwritten[0]} is written in a form the {NAME} codemods do "
                "not rewrite"
            )
        helper = helper_edit(ctx)
        if isinstance(helper, Declined):
            return helper
        edits = [*loader_edits(loaders), helper]
        ev = finding.evidence_as(LoaderEvidence)
        context = writeup_context(ctx, ev)
        ready = len(ev.unblocked())
        return FixPlan(
            recipe=NAME,
            finding=finding,
            resolves=(finding,),
            variant=None,
            edits=tuple(edits),
            tests=FixTests(),
            registry=RegistryDecision(None, "a core change: no model is added to the registry"),
            writeup=WriteUp.from_folder(TEMPLATES, context),
            commit_title=(
                "[Spec Decode] Drafter loaders: reach the target's decoder and input "
                "embedding like the protocol default"
            ),
            issue_comment=(
                f"the speculative-decoding loaders reach the target's decoder the way "
                f"`SupportsEagle3`'s default does and find its input embedding by type, which "
                f"{ready} targets' EAGLE-3 enablement needs first."
            ),
        )


def refused_targets(ctx: ScanContext) -> list[Blocked]:
    """The enable targets the tree's loaders refuse, with the lines refusing each and what
    still refuses it with the loaders fixed (None: its plan is ready then)."""
    from bot.recipes.eagle3_enable.detection import candidates

    index = ctx.index
    blocked: list[Blocked] = []
    for candidate in candidates(ctx):
        if candidate.loader is None:
            continue
        refusing, lift = candidate.loader
        model = candidate.model_verdict
        after = lift or (getattr(model, "reason", None) if model is not None else None)
        blocked.append(
            Blocked(
                name=candidate.ref.name,
                path=index.path_of(candidate.ref),
                decoder=f"self.{candidate.attribute}",
                refused_by=tuple(f"{s.path}:{s.line}" for s in refusing),
                after=after,
            )
        )
    return sorted(blocked, key=lambda b: (b.after is not None, b.name, b.path))


def served_today(ctx: ScanContext, loaders: Loaders) -> Served:
    """Every registered class declaring the interface, by whether the loaders' name lookup
    finds its embedding today (then the helper returns that same module: unchanged)."""
    from bot.recipes.eagle3_analysis import constructed, declares_eagle3
    from bot.recipes.eagle3_enable.detection import assigned
    from bot.recipes.wrapper_analysis import language_model_sources
    from bot.tree.index import ClassRef

    index = ctx.index
    names = {n for s in loaders.embedding_sites for n in s.names}
    unchanged: set[str] = set()
    unknown: set[str] = set()
    for entry in ctx.registry.entries:
        for ref in index.resolve(entry.module, entry.class_name):
            if not isinstance(ref, ClassRef) or not declares_eagle3(index, ref):
                continue
            holder = ref
            if not constructed(index, ref, "model"):
                sources, _ = language_model_sources(ctx, ref)
                lm = sources[0].cls if sources else None
                holder = lm if lm is not None else ref
            built = constructed(index, holder, "model")
            if built and assigned(index, built[0].cls)[0] & names:
                unchanged.add(ref.name)
            elif sources_runtime(ctx, ref):
                unchanged.add(ref.name)  # every capable language model holds embed_tokens
            else:
                unknown.add(ref.name)
    return Served(tuple(sorted(unchanged)), tuple(sorted(unknown - unchanged)))


def sources_runtime(ctx: ScanContext, ref: Any) -> bool:
    """Whether ``ref``'s language model is the checkpoint's choice (``text_config``)."""
    from bot.recipes.wrapper_analysis import language_model_sources

    sources, _ = language_model_sources(ctx, ref)
    return bool(sources) and sources[0].cls is None


def loader_edits(loaders: Loaders) -> list[FileEdit]:
    """One edit per loader file: its decoder reads fall back, its lookups call the helper."""
    from bot.codemods.spans import Function, Imports
    from bot.recipes.core_drafter_loader.codemods import (
        embedding_by_holder,
        fallback_decoder_reads,
    )

    by_file: dict[str, list[Any]] = defaultdict(list)
    for site in loaders.sites:
        by_file[site.path].append(site)
    edits: list[FileEdit] = []
    for path, sites in sorted(by_file.items()):
        functions = tuple(sorted({s.function for s in sites}))
        embedding = tuple(sorted({s.function for s in sites if s.kind == "embedding"}))
        steps = [
            step(
                fallback_decoder_reads,
                functions=functions,
                language_models=loaders.language_models,
            )
        ]
        spans: list[Span] = [Function(f) for f in functions]
        if embedding:
            steps.append(
                step(
                    embedding_by_holder,
                    functions=embedding,
                    language_models=loaders.language_models,
                    decoders=loaders.decoders,
                )
            )
            spans.append(Imports())
        lines = ", ".join(str(s.line) for s in sites)
        edits.append(
            FileEdit(
                path=path,
                kind=LOADER_EDIT,
                description=(
                    f"{', '.join(functions)}: the target's decoder read with the protocol's "
                    f"fallback and its input embedding found by `get_input_embedding` "
                    f"(lines {lines})"
                ),
                steps=tuple(steps),
                confined_to=tuple(spans),
            )
        )
    return edits


def helper_edit(ctx: PlanContext | ScanContext) -> FileEdit | Declined:
    from bot.codemods.spans import BetweenTopLevel, Imports
    from bot.recipes.core_drafter_loader.codemods import HELPER_PATH, add_input_embedding_helper

    if not (ctx.root / HELPER_PATH).is_file():
        return Declined(f"needs a human: {HELPER_PATH}, where the helper goes, is not in the tree")
    return FileEdit(
        path=HELPER_PATH,
        kind=HELPER_EDIT,
        description=(
            "`get_input_embedding(model)`: `embed_tokens` or `embedding` as the loaders read "
            "it, else the one `VocabParallelEmbedding` the module holds that is not an lm_head"
        ),
        steps=(step(add_input_embedding_helper),),
        confined_to=(Imports(), BetweenTopLevel()),
    )


def writeup_context(ctx: PlanContext, ev: LoaderEvidence) -> dict[str, Any]:
    sites = [
        {**s.to_json(), "url": ctx.url(s.path, s.line), "shown": html.escape(s.code)}
        for s in ev.sites
    ]
    return {
        "sites": sites,
        "decoder_sites": [s for s in sites if s["kind"] == "decoder"],
        "embedding_sites": [s for s in sites if s["kind"] == "embedding"],
        "unblocked": [b.to_json() for b in ev.unblocked()],
        "still_refused": [b.to_json() for b in ev.blocked if b.after is not None],
        "served": ev.served.to_json(),
        "forms": list(REWRITTEN),
    }


RECIPE = CoreDrafterLoader()
