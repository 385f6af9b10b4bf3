"""The write-up of an ``eagle3-enable`` plan: its template context and the lines the patch
changes that its evidence does not prove."""

from __future__ import annotations

from typing import Any

from bot.recipes.base import Finding, PlanContext
from bot.recipes.eagle3_analysis import EAGLE_MODEL_MIXIN
from bot.recipes.eagle3_enable.analysis import NEEDS_HUMAN, DecoderShape
from bot.recipes.eagle3_enable.detection import delegates
from bot.recipes.eagle3_enable.evidence import EnableEvidence
from bot.recipes.eagle3_enable.forward_reads import scaled_embedding
from bot.recipes.llm_test import AGENTS_RULES


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
    scaled = scaled_embedding(ctx.root / decoder.path, decoder.name)
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
                "text": "in bf16 the captured hidden_states + residual may differ in the last "
                "bits from a fused add-norm that adds in float32 (CPU tests run float32)",
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
            "the contributed test runs the model through LLM with one layer of the registry "
            f"example's config, dummy weights and no draft model; {compared}"
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
