"""Recipe ``eagle3-wrapper``: a multimodal wrapper over an EAGLE-3-capable language model.

The wrapper is what vLLM loads; ``SupportsEagle3`` on the wrapper routes through
``get_language_model()``. The fix shape differs from ``eagle3-interface`` (the wrapper may need
``get_eagle3_default_aux_hidden_state_layers`` forwarding), so these are reported, not patched yet.
"""

from __future__ import annotations

from bot.recipes.base import Finding, ScanContext
from bot.recipes.eagle3_analysis import constructed, declares_eagle3, locate
from bot.recipes.eagle3_interface import eagle3_ready_decoder, is_multimodal, registered_targets

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
            for attribute in _LANGUAGE_MODEL_ATTRIBUTES:
                language = [
                    c
                    for c in constructed(ctx.index, ref, attribute)
                    if declares_eagle3(ctx.index, c.cls)
                    or eagle3_ready_decoder(ctx.index, c.cls) is not None
                ]
                if not language:
                    continue
                construction = language[0]
                where = locate(ctx.index, ref)
                lm = locate(ctx.index, construction.cls)
                declared = declares_eagle3(ctx.index, construction.cls)
                state = "declares SupportsEagle3" if declared else "is EAGLE-3 ready"
                findings.append(
                    Finding(
                        recipe=NAME,
                        class_name=ref.name,
                        module=ref.module,
                        path=where.path,
                        line=where.line,
                        architectures=tuple(sorted({e.arch for e in entries})),
                        evidence={
                            "class": where.to_json(),
                            "language_model": {
                                **lm.to_json(),
                                "attribute": f"self.{attribute}",
                                "assigned_at": {
                                    "path": ctx.index.path_of(construction.owner),
                                    "line": construction.line,
                                },
                                "declares_eagle3": declared,
                            },
                        },
                        summary=(
                            f"multimodal {ref.name} wraps {construction.cls.name} "
                            f"(self.{attribute}), which {state}, but does not declare "
                            "SupportsEagle3 itself"
                        ),
                    )
                )
                break
        return findings


RECIPE = Eagle3Wrapper()
