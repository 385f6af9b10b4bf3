"""Recipe ``eagle3-wrapper``: a multimodal wrapper over an EAGLE-3-capable language model.

The wrapper is what vLLM loads; ``SupportsEagle3`` on the wrapper routes through
``get_language_model()``. The fix shape differs from ``eagle3-interface`` (the wrapper may need
``get_eagle3_default_aux_hidden_state_layers`` forwarding), so these are reported, not patched yet.
"""

from __future__ import annotations

from bot.recipes.base import Finding, ScanContext
from bot.recipes.eagle3_analysis import (
    Construction,
    class_finding,
    constructed,
    declares_eagle3,
    locate,
)
from bot.recipes.eagle3_interface import eagle3_ready_decoder, is_multimodal, registered_targets
from bot.tree.index import ClassIndex, ClassRef
from bot.tree.model_registry import RegistryEntry

NAME = "eagle3-wrapper"
_LANGUAGE_MODEL_ATTRIBUTES = ("language_model", "model", "text_model")


class Eagle3Wrapper:
    name = NAME
    description = "multimodal wrapper whose language model already supports EAGLE-3"

    def detect(self, ctx: ScanContext) -> list[Finding]:
        findings: list[Finding] = []
        for ref, entries in registered_targets(ctx).items():
            if not is_multimodal(ctx.index, ref) or declares_eagle3(ctx.index, ref):
                continue
            language = _capable_language_model(ctx.index, ref)
            if language is not None:
                findings.append(_finding(ctx.index, ref, entries, language))
        return findings


def _capable_language_model(index: ClassIndex, ref: ClassRef) -> Construction | None:
    """The first language model the wrapper builds that declares or is ready for EAGLE-3."""
    for attribute in _LANGUAGE_MODEL_ATTRIBUTES:
        for construction in constructed(index, ref, attribute):
            cls = construction.cls
            if declares_eagle3(index, cls) or eagle3_ready_decoder(index, cls) is not None:
                return construction
    return None


def _finding(
    index: ClassIndex, ref: ClassRef, entries: list[RegistryEntry], language: Construction
) -> Finding:
    declared = declares_eagle3(index, language.cls)
    state = "declares SupportsEagle3" if declared else "is EAGLE-3 ready"
    evidence = {
        "language_model": {
            **locate(index, language.cls).to_json(),
            "attribute": f"self.{language.attribute}",
            "assigned_at": {"path": index.path_of(language.owner), "line": language.line},
            "declares_eagle3": declared,
        }
    }
    summary = (
        f"multimodal {ref.name} wraps {language.cls.name} (self.{language.attribute}), "
        f"which {state}, but does not declare SupportsEagle3 itself"
    )
    return class_finding(NAME, index, ref, entries, evidence, summary)


RECIPE = Eagle3Wrapper()
