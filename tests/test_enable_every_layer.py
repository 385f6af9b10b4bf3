"""eagle3-enable on a decoder loop over every layer with no stage bounds (Zamba2, Zaya).

``make_layers`` decoders running ``for layer in self.layers`` are rewritten to this stage's
slice (GraniteMoeHybrid). A decoder that keeps no ``self.start_layer`` / ``self.end_layer`` has
no slice to write; when its target does not declare ``SupportsPP`` no pipeline stage ever
splits it, so the loop is the one stage and the capture counts from ``0`` with
``enumerate(self.layers)``, the form of upstream's own ``nn.ModuleList`` decoders
(``MBartDecoderNoPos``). A target that declares ``SupportsPP`` over such a decoder stays
refused. Zaya stays refused for what its forward does: the stream is float32 between layers and
the final norm is returned unnamed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.codemods.base import CodemodRefused
from bot.recipes.base import PublishedEdit
from bot.recipes.eagle3_enable.detection import candidates
from bot.recipes.eagle3_enable.publish import PUBLISH_RULES
from bot.recipes.eagle3_enable.recipe import _edits
from bot.tree.fetch import release_tree
from tests.cli import propose_class, run_bot
from tests.synthetic import make_tree
from tests.test_enable_replays import _patched, published_edit
from tests.test_enable_shapes import (
    HEADER,
    LAYER_ONE,
    PLAIN_NORM,
    TARGET,
    _ctx,
    _enable_findings,
    decoder,
)

EVERY_LAYER_ALIAS = (
    "        for layer in self.layers:\n"
    "            layer_outputs = layer(positions, hidden_states)\n"
    "            hidden_states = layer_outputs\n"
)


def _no_stage_tree(tmp_path: Path, loop: str, target_pp: bool, before_loop: str = "") -> Path:
    source = decoder(loop, PLAIN_NORM, init_residual=False).replace(
        "self.start_layer, self.end_layer, self.layers = make_layers(\n"
        "            4, lambda prefix: Layer(prefix=prefix), prefix=prefix\n"
        "        )",
        "self.layers = nn.ModuleList([Layer() for _ in range(4)])",
    )
    source = source.replace("        for layer in", before_loop + "        for layer in", 1)
    target = TARGET if target_pp else TARGET.replace("(nn.Module, SupportsPP)", "(nn.Module)")
    text = HEADER + LAYER_ONE + "\n\n" + source + "\n\n" + target
    registry = {"_TEXT_GENERATION_MODELS": {"DemoForCausalLM": ("demo", "DemoForCausalLM")}}
    return make_tree(tmp_path, {"model_executor/models/demo.py": text}, registry)


def test_every_layer_without_pipeline_parallelism_is_captured_from_zero(tmp_path: Path) -> None:
    tree = _no_stage_tree(tmp_path, EVERY_LAYER_ALIAS, target_pp=False)
    (finding,) = _enable_findings(tree)
    assert finding.evidence.refused is None
    shape = finding.evidence.shape
    assert (shape.loop, shape.residual, shape.stream) == (
        "every",
        "no-residual",
        "hidden_states",
    )
    ctx = _ctx(tree, finding)
    (candidate,) = candidates(ctx.scan)
    # absolute=True (the tree's convention, were it to count from self.start_layer): an
    # `every` loop still counts from 0, the decoder having no self.start_layer
    (edit,) = _edits(ctx, finding, candidate, candidate.verdict, absolute=True)
    assert edit.kind == "enable-decoder-and-declare"
    source = (tree / edit.path).read_text()
    patched = edit.apply(source)
    assert candidate.decoder.name == "DemoModel"
    assert "aux_hidden_states = self._maybe_add_hidden_state([], 0, hidden_states, None)" in patched
    assert "for idx, layer in enumerate(self.layers):" in patched
    # the capture follows the alias: the stream after the layer, by its own name
    assert (
        "            hidden_states = layer_outputs\n"
        "            self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, None)"
    ) in patched
    assert "start_layer" not in patched  # the decoder has no such attribute
    assert edit.apply(patched) == patched
    compile(patched, "demo.py", "exec")


def test_every_layer_under_a_pipeline_parallel_target_stays_refused(tmp_path: Path) -> None:
    (finding,) = _enable_findings(_no_stage_tree(tmp_path, EVERY_LAYER_ALIAS, target_pp=True))
    assert "keeps no self.start_layer / self.end_layer" in finding.evidence.refused
    assert "though its target declares SupportsPP" in finding.evidence.refused


def test_a_float32_stream_is_named(tmp_path: Path) -> None:
    cast = "        hidden_states = hidden_states.to(torch.float32)\n"
    tree = _no_stage_tree(tmp_path, EVERY_LAYER_ALIAS, target_pp=False, before_loop=cast)
    (finding,) = _enable_findings(tree)
    assert "the stream is float32 between layers (line" in finding.evidence.refused


@pytest.fixture(scope="module")
def zamba2(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, str, Path]:
    """The bot's Zamba2 plan on 0.34.0: plan.json, zamba2.py before and after, the plan dir."""
    tree = release_tree("0.34.0")
    out = tmp_path_factory.mktemp("zamba2") / "plan"
    result = propose_class(tree, "Zamba2ForCausalLM", out)
    assert result.returncode == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["status"] == "ready", plan["reason"]
    path = "vllm/model_executor/models/zamba2.py"
    return (
        plan,
        (tree / path).read_text(),
        _patched(tree, (out / "patch.diff").read_text(), path),
        out,
    )


def _published(plan: dict, before: str, after: str) -> PublishedEdit:
    return published_edit(plan, before, after, "0.34.0", "models/zamba2.py")


@pytest.mark.vllm_tree
def test_zamba2_plan_and_publish_take_exactly_the_every_layer_capture(
    zamba2: tuple[dict, str, str, Path],
) -> None:
    plan, before, after, out = zamba2
    assert "for idx, layer in enumerate(self.layers):" in after
    assert "self._maybe_add_hidden_state([], 0, hidden_states, None)" in after
    # 0.34.0 has tests/AGENTS.md: the contributed test goes through LLM, with no stand-in
    test = (out / "patch.diff").read_text()
    assert "+++ b/tests/v1/spec_decode/test_eagle3_targets.py" in test
    assert '+    "Zamba2ForCausalLM": "final_layernorm",' in test
    assert "vllm_runner(" in test
    assert "get_pp_group" not in test and "SimpleNamespace" not in test
    # the write-up says why every layer is the one stage's
    assert "`Zamba2ForCausalLM` does not declare `SupportsPP`" in (out / "pr.md").read_text()
    PUBLISH_RULES["enable-decoder-and-declare"](_published(plan, before, after))
    for old, new in (
        ("enumerate(self.layers)", "enumerate(self.layers, start=1)"),
        ("([], 0, hidden_states, None)", "([], 1, hidden_states, None)"),
    ):
        assert old in after
        with pytest.raises(CodemodRefused, match="not the mixin and the aux capture"):
            PUBLISH_RULES["enable-decoder-and-declare"](
                _published(plan, before, after.replace(old, new, 1))
            )


@pytest.mark.vllm_tree
def test_zaya_is_refused_for_its_float32_stream_and_unnamed_return() -> None:
    result = run_bot("scan", str(release_tree("0.34.0")), "--json")
    assert result.returncode == 0, result.stderr
    (zaya,) = [f for f in json.loads(result.stdout) if f["class"] == "ZayaForCausalLM"]
    refused = zaya["evidence"]["refused"]
    assert "keeps no self.start_layer" not in refused  # no longer the (wrong) blocker
    assert "the stream is float32 between layers (line 527" in refused
    assert (
        "line 533 applies the final norm inside the return "
        "(`return self.norm(hidden_states.to(self.norm.weight.dtype))`)"
    ) in refused
    assert zaya["priority"]["fixable"] is False
