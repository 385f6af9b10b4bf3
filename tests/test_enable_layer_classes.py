"""eagle3-enable reads the layer class through the ways vLLM builds its layers, and refuses a
decoder whose input embedding the release's drafter loader cannot share.

Layer classes: a ``layer_type: type[X] = X`` parameter called in ``make_layers``'s lambda
(InternLM2, HyperCLOVAX), and a nested ``get_layer`` helper picking the class (``layer_class =
A if attn else B``: Lfm2, Lfm2Moe; FalconH1), or a module-level dict of layer classes the helper
picks from by key (Jamba's ``ALL_DECODER_LAYER_TYPES``).

Embedding: every cached release's loader shares the target's input embedding with the drafter
from ``.model.embed_tokens`` or ``.model.embedding`` (read from ``vllm/v1``); InternLM2 keeps
it as ``tok_embeddings``, so a drafter without its own would get none: refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.recipes import Declined, fixer_named
from bot.recipes.eagle3_enable.analysis import DecoderShape
from bot.recipes.eagle3_enable.detection import candidates
from bot.scan.findings import scan, scan_context
from bot.tree.drafter_loader import loader_sites
from bot.tree.fetch import release_tree
from tests.cli import propose_class
from tests.synthetic import make_tree
from tests.test_enable_shapes import (
    FUSED_NORM,
    HEADER,
    ISLICE,
    LAYER_PAIR,
    PAIR_CALL,
    TARGET,
    TEXT,
    _ctx,
    decoder,
)

# 0.34.0: newly read layer classes and the shapes the analysis then names, from each layer's
# forward (read as a reviewer: FalconH1ParallelHybrid returns `residual + mlp(...)`, the whole
# stream; HyperCLOVAXDecoderLayer returns `(residual + h * m, residual)` and the decoder's norm
# takes one tensor; Lfm2's attention and short-conv layers both return the fused-norm pair).
NEWLY_READY_0_34 = {
    "FalconH1ForCausalLM": ("no-residual", ("FalconH1ParallelHybrid",)),
    "HyperCLOVAXForCausalLM": ("full-stream-pair", ("HyperCLOVAXDecoderLayer",)),
    "Lfm2ForCausalLM": (
        "residual-stream",
        ("Lfm2AttentionDecoderLayer", "Lfm2ShortConvDecoderLayer"),
    ),
    "Lfm2MoeForCausalLM": (
        "residual-stream",
        ("Lfm2MoeAttentionDecoderLayer", "Lfm2MoeShortConvDecoderLayer"),
    ),
    # both the attention and the mamba layer return the fused-norm pair
    "JambaForCausalLM": (
        "residual-stream",
        ("JambaAttentionDecoderLayer", "JambaMambaDecoderLayer"),
    ),
}


@pytest.mark.vllm_tree
def test_layer_classes_read_through_parameters_and_helpers_on_the_newest_release() -> None:
    ctx = scan_context(release_tree("0.34.0"))
    by_name = {c.ref.name: c for c in candidates(ctx)}
    for name, (residual, layers) in NEWLY_READY_0_34.items():
        shape = by_name[name].verdict
        assert isinstance(shape, DecoderShape), (name, shape)
        assert (shape.loop, shape.residual, shape.layer_classes) == ("islice", residual, layers)
    internlm2 = by_name["InternLM2ForCausalLM"]
    assert isinstance(internlm2.verdict, DecoderShape)  # ready, building on the loader plan
    assert internlm2.builds_on is not None
    assert internlm2.builds_on.recipe == "core-drafter-loader"
    assert "vllm/v1/worker/gpu/spec_decode/eagle/utils.py:87" in internlm2.builds_on.why


@pytest.mark.vllm_tree
@pytest.mark.parametrize("version", ["0.23.0", "0.34.0"])
def test_the_shared_embedding_names_are_read_from_the_release(version: str) -> None:
    tree = release_tree(version)
    found = loader_sites(tree).embedding_sites
    assert found
    for site in found:
        assert site.names[0] == "embed_tokens"
        line = (tree / site.path).read_text().splitlines()[site.line - 1]
        assert "embed_tokens" in line


PARAMETER_INIT = (
    "    def __init__(self, *, vllm_config, prefix='', layer_type: type[Layer] = Layer):\n"
    "        super().__init__()\n"
    "        self.embed_tokens = VocabParallelEmbedding(8, 8)\n"
    "        self.start_layer, self.end_layer, self.layers = make_layers(\n"
    "            4, lambda prefix: layer_type(prefix=prefix), prefix=prefix\n"
    "        )\n"
)
HELPER_INIT = (
    "    def __init__(self, *, vllm_config, prefix=''):\n"
    "        super().__init__()\n"
    "        self.embed_tokens = VocabParallelEmbedding(8, 8)\n\n"
    "        def get_layer(prefix):\n"
    "            layer_class = Layer if is_attention(prefix) else OtherLayer\n"
    "            return layer_class(prefix=prefix)\n\n"
    "        self.start_layer, self.end_layer, self.layers = make_layers(\n"
    "            4, get_layer, prefix=prefix\n"
    "        )\n"
)
CLASS_MAP_INIT = HELPER_INIT.replace(
    "Layer if is_attention(prefix) else OtherLayer", "LAYER_TYPES[kind_of(prefix)]"
)
CLASS_MAP = '\n\nLAYER_TYPES = {"attention": Layer, "conv": OtherLayer}\n'
OTHER_LAYER = LAYER_PAIR.replace("class Layer", "class OtherLayer")
OTHER_LAYER_ONE = (
    "\nclass OtherLayer(nn.Module):\n"
    "    def forward(self, positions, hidden_states, residual):\n"
    "        return hidden_states\n"
)
MAKE_LAYERS_INIT = (
    "    def __init__(self, *, vllm_config, prefix=''):\n"
    "        super().__init__()\n"
    "        self.start_layer, self.end_layer, self.layers = make_layers(\n"
    "            4, lambda prefix: Layer(prefix=prefix), prefix=prefix\n"
    "        )\n"
)


def _decoder_with(init: str) -> str:
    source = decoder(ISLICE + PAIR_CALL, FUSED_NORM)
    start = source.index("    def __init__")
    end = source.index("    def forward")
    return source[:start] + init + "        self.norm = RMSNorm(8)\n\n" + source[end:]


def _tree(root: Path, layers: str, init: str, loader: str | None = None) -> Path:
    source = HEADER + layers + "\n\n" + _decoder_with(init) + "\n\n" + TARGET
    models = {"model_executor/models/demo.py": source}
    if loader is not None:
        models["v1/worker/gpu/spec_decode/eagle/utils.py"] = loader
    return make_tree(root, models, {TEXT: {"DemoForCausalLM": ("demo", "DemoForCausalLM")}})


def _finding(tree: Path):  # noqa: ANN202
    (finding,) = [f for f in scan(tree, use_cache=False).findings if f.recipe == "eagle3-enable"]
    return finding


@pytest.mark.parametrize(
    ("layers", "init", "classes"),
    [
        (LAYER_PAIR, PARAMETER_INIT, ["Layer"]),
        (LAYER_PAIR + OTHER_LAYER, HELPER_INIT, ["Layer", "OtherLayer"]),
        (LAYER_PAIR + OTHER_LAYER + CLASS_MAP, CLASS_MAP_INIT, ["Layer", "OtherLayer"]),
    ],
    ids=["parameter-default", "helper-picks-one-of-two", "helper-picks-from-a-class-map"],
)
def test_a_layer_class_read_through_the_init(
    tmp_path: Path, layers: str, init: str, classes: list[str]
) -> None:
    finding = _finding(_tree(tmp_path, layers, init))
    assert finding.evidence.refused is None, finding.evidence.refused
    assert list(finding.evidence.shape.layer_classes) == classes
    assert finding.evidence.shape.residual == "residual-stream"


@pytest.mark.parametrize(
    ("layers", "init"),
    [
        (LAYER_PAIR + OTHER_LAYER_ONE, HELPER_INIT),
        (LAYER_PAIR + OTHER_LAYER_ONE + CLASS_MAP, CLASS_MAP_INIT),
    ],
    ids=["helper", "class-map"],
)
def test_a_helper_picking_layers_that_return_different_shapes_refuses(
    tmp_path: Path, layers: str, init: str
) -> None:
    tree = _tree(tmp_path, layers, init)
    finding = _finding(tree)
    assert "do not all return the same shape of output" in finding.evidence.refused
    planned = fixer_named("eagle3-enable").plan(finding, _ctx(tree, finding))  # type: ignore[union-attr]
    assert isinstance(planned, Declined)


LOADER = """
def load_eagle_model(target_model, vllm_config):
    target_language_model = target_model.get_language_model()
    target_inner = target_language_model.model
    embed = getattr(target_inner, "embed_tokens", None) or getattr(target_inner, "embedding", None)
    return embed
"""


@pytest.mark.parametrize(
    ("init", "loader", "refused"),
    [
        (
            MAKE_LAYERS_INIT,
            LOADER,
            "this release's drafter loaders refuse it (vllm/v1/worker/gpu/spec_decode/eagle/"
            "utils.py:4: `getattr(target_inner, 'embed_tokens', None) or getattr(target_inner, "
            "'embedding', None)`): the bot finds 0 VocabParallelEmbedding built in DemoModel",
        ),
        (
            MAKE_LAYERS_INIT.replace(
                "prefix=''):\n",
                "prefix=''):\n        self.embedding = VocabParallelEmbedding(8, 8)\n",
            ),
            LOADER,
            None,
        ),  # noqa: E501
        (PARAMETER_INIT, LOADER, None),
        (MAKE_LAYERS_INIT, None, None),  # a release whose loader shares no embedding this way
        (
            MAKE_LAYERS_INIT.replace(
                "prefix=''):\n",
                "prefix=''):\n        self.word_embeddings = VocabParallelEmbedding(8, 8)\n",
            ),
            LOADER,
            None,
        ),  # BailingMoe's: ready, building on the core-drafter-loader plan
    ],
    ids=["no-embedding-attribute", "embedding", "embed_tokens", "no-loader", "word_embeddings"],
)
def test_a_decoder_whose_embedding_the_loader_cannot_share_refuses(
    tmp_path: Path, init: str, loader: str | None, refused: str | None
) -> None:
    tree = _tree(tmp_path, LAYER_PAIR, init, loader)
    finding = _finding(tree)
    if refused is None:
        assert finding.evidence.refused is None, finding.evidence.refused
        builds_on = finding.evidence.builds_on
        if "word_embeddings" in init:
            assert builds_on is not None and "eagle/utils.py:4" in builds_on.why
        else:
            assert builds_on is None
        return
    assert finding.evidence.refused.startswith(f"needs a human: {refused}")
    planned = fixer_named("eagle3-enable").plan(finding, _ctx(tree, finding))  # type: ignore[union-attr]
    assert isinstance(planned, Declined)
    assert planned.reason == finding.evidence.refused


@pytest.mark.vllm_tree
def test_nemotron_h_replay_matches_the_upstream_fix(tmp_path: Path) -> None:
    """NemotronH picks its layers from a dict of classes; upstream enabled it between 0.21.0
    and 0.22.0. From 0.19.1 the bot's plan has the capture, mixin, return and interface of
    0.23.0 (the next cached release), by the replays' own comparison."""
    from tests.test_enable_replays import MODELS, _patched, eagle_lines

    tree = release_tree("0.19.1")
    out = tmp_path / "plan"
    result = propose_class(tree, "NemotronHForCausalLM", out)
    assert result.returncode == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["status"] == "ready", plan["reason"]
    path = f"{MODELS}/nemotron_h.py"
    names = ("NemotronHModel", "NemotronHForCausalLM")
    ours = eagle_lines(_patched(tree, (out / "patch.diff").read_text(), path), *names)
    upstream = eagle_lines((release_tree("0.23.0") / path).read_text(), *names)
    assert eagle_lines((tree / path).read_text(), *names)["captures"] == []
    assert ours == upstream
