"""Recipe ``eagle3-wrapper``: a multimodal wrapper over an EAGLE-3-capable language model.

The wrapper is what vLLM loads; ``SupportsEagle3`` on it routes through
``get_language_model()`` to the language model's decoder. Reported where that would work
(``wrapper_analysis`` says why, with file:line evidence), once per fix class: when a family base
builds the language model and every registered wrapper below it is ready, the base is fixed.
Wrappers whose language model comes from the checkpoint's ``text_config`` at run time are
reported with the language models that would work, but not proposed.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from bot.recipes.base import Finding, ScanContext
from bot.recipes.eagle3_analysis import class_finding, declares_eagle3, locate
from bot.recipes.eagle3_interface import is_multimodal, registered_targets
from bot.recipes.wrapper_analysis import (
    RUNTIME,
    Assessment,
    assess,
    capable_language_models,
)
from bot.tree.index import INTERFACES_MODULE, ClassIndex, ClassRef
from bot.tree.model_registry import RegistryEntry

NAME = "eagle3-wrapper"


class Eagle3Wrapper:
    name = NAME
    description = "multimodal wrapper whose language model already supports EAGLE-3"

    def detect(self, ctx: ScanContext) -> list[Finding]:
        return [finding for finding, _ in findings_with_assessments(ctx)]


def wrapper_targets(ctx: ScanContext) -> dict[ClassRef, list[RegistryEntry]]:
    """Registered multimodal generation models that do not declare SupportsEagle3."""
    return {
        ref: entries
        for ref, entries in registered_targets(ctx).items()
        if is_multimodal(ctx.index, ref) and not declares_eagle3(ctx.index, ref)
    }


def assess_all(ctx: ScanContext) -> dict[ClassRef, Assessment]:
    """Every candidate wrapper, ready or not (the rejected ones carry their reason)."""
    return {ref: assess(ctx, ref) for ref in wrapper_targets(ctx)}


def findings_with_assessments(ctx: ScanContext) -> list[tuple[Finding, Assessment]]:
    targets = wrapper_targets(ctx)
    assessments = {ref: assess(ctx, ref) for ref in targets}
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
        finding = _finding(ctx.index, fix_class, sorted(covered), entries, assessment, capable)
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
) -> Finding:
    lm = assessment.language_model
    assert lm is not None and assessment.forward_owner is not None
    attribute = f"self.{lm.attribute}" if lm.attribute else "self"
    assigned = {"path": index.path_of(lm.owner), "line": lm.line}
    if lm.cls is not None:
        where = locate(index, lm.cls).to_json()
    else:
        where = {"name": "text_config.architectures (run time)", **assigned}
    evidence: dict[str, Any] = {
        "shape": assessment.shape,
        "why": assessment.reason,
        "language_model": {
            **where,
            "attribute": attribute,
            "how": lm.how,
            "assigned_at": assigned,
            "declares_eagle3": bool(lm.cls and declares_eagle3(index, lm.cls)),
        },
        "lm_decoder": locate(index, assessment.decoder).to_json() if assessment.decoder else None,
        "forward": {
            "path": index.path_of(assessment.forward_owner),
            "line": assessment.forward_line,
            "returns": assessment.forward_returns,
        },
        "covers": [c.name for c in covered],
    }
    if capable is not None and lm.cls is None:
        evidence["works_with"] = capable
    family = "" if covered == [ref] else f" (base of {', '.join(c.name for c in covered)})"
    if lm.cls is None:
        summary = (
            f"multimodal {ref.name}{family} builds {attribute} from the checkpoint's "
            f"text_config at run time and hands back {assessment.forward_returns}; "
            f"SupportsEagle3 would work when that is one of {len(capable or [])} EAGLE-3 "
            "capable language models, so it is reported, not proposed"
        )
    else:
        state = (
            "declares SupportsEagle3"
            if evidence["language_model"]["declares_eagle3"]
            else ("is EAGLE-3 ready")
        )
        summary = (
            f"multimodal {ref.name}{family} wraps {lm.cls.name} ({attribute}, {lm.how}), which "
            f"{state}, and hands back {assessment.forward_returns}, but does not declare "
            "SupportsEagle3 itself"
        )
    return class_finding(NAME, index, ref, entries, evidence, summary)


RECIPE = Eagle3Wrapper()
