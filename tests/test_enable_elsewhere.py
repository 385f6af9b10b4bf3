"""eagle3-enable on targets whose decoder is not ``self.model`` (``self.transformer``,
``self.backbone``), and the release's drafter loaders (:mod:`bot.tree.drafter_loader`).

The interface's two default methods reach the decoder through ``.model``: such a target gets
two methods of its own reaching ``self.transformer`` (and its layers under their own name), the
shape of the release's ``NemotronParse``. The loaders reach the decoder too: where they read
``target_language_model.model`` with no fallback (0.23.0 on, an ``AttributeError``), the
target is ready only *building on* the ``core-drafter-loader`` plan, which names those lines;
where something else refuses it too, every blocker is named.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.recipes.cases import INTERFACES, SUPPORTS_EAGLE3_HELPER
from bot.recipes.eagle3_analysis import constructed
from bot.recipes.eagle3_enable.analysis import DecoderShape
from bot.recipes.eagle3_enable.detection import candidates
from bot.scan.findings import scan, scan_context
from bot.tree.drafter_loader import DECODER, loader_sites
from bot.tree.fetch import release_tree
from tests.cli import propose_class
from tests.synthetic import make_tree
from tests.test_enable_shapes import (
    FUSED_NORM,
    HEADER,
    ISLICE,
    LAYER_PAIR,
    PAIR_CALL,
    TEXT,
    decoder,
)

CORE = "core-drafter-loader"
# The classes 0.34.0 loads for text generation whose decoder is self.transformer/self.backbone.
ELSEWHERE_0_34 = {
    "BloomForCausalLM": "transformer",
    "ChatGLMForCausalLM": "transformer",
    "DbrxForCausalLM": "transformer",
    "DoryForCausalLM": "backbone",
    "ExaoneForCausalLM": "transformer",
    "FalconForCausalLM": "transformer",
    "GPT2LMHeadModel": "transformer",
    "GPTJForCausalLM": "transformer",
    "Mamba2ForCausalLM": "backbone",
    "MambaForCausalLM": "backbone",
}
# ... and the ones something besides the loaders still refuses (named with the loader lines)
STILL_REFUSED_0_34 = {
    "DoryForCausalLM": "loops over layers 3 times",
}
LOADER_0_34 = "vllm/v1/worker/gpu/spec_decode/eagle/utils.py"


@pytest.mark.vllm_tree
@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (
            "0.34.0",
            [
                ("vllm/v1/worker/gpu/spec_decode/dspark/utils.py", "target_language_model.model"),
                (LOADER_0_34, "target_language_model.model"),
                (
                    "vllm/v1/worker/gpu/spec_decode/gemma4/speculator.py",
                    "target_language_model.model",
                ),
            ],
        ),
        (
            "0.23.0",
            [
                (
                    "vllm/v1/spec_decode/llm_base_proposer.py",
                    "getattr(target_language_model, 'model', None)",
                ),
                ("vllm/v1/spec_decode/llm_base_proposer.py", "target_language_model.model"),
                ("vllm/v1/spec_decode/llm_base_proposer.py", "target_language_model.model"),
                (LOADER_0_34, "target_language_model.model"),
                (
                    "vllm/v1/worker/gpu/spec_decode/gemma4/speculator.py",
                    "target_language_model.model",
                ),
            ],
        ),
    ],
)
def test_the_loader_sites_are_read_from_the_release(version: str, expected: list) -> None:
    tree = release_tree(version)
    sites = [s for s in loader_sites(tree).sites if s.kind == DECODER]
    assert [(s.path, s.code) for s in sites] == expected
    for site in sites:  # the line is the tree's own, not a guess
        line = (tree / site.path).read_text().splitlines()[site.line - 1]
        assert site.code.replace("'", '"') in line.replace("'", '"')


@pytest.mark.vllm_tree
def test_every_decoder_elsewhere_on_the_newest_release_names_the_loader_lines() -> None:
    ctx = scan_context(release_tree("0.34.0"))
    found = {c.ref.name: c for c in candidates(ctx) if c.attribute != "model"}
    assert {name: c.attribute for name, c in found.items()} == ELSEWHERE_0_34
    for name, candidate in found.items():
        assert candidate.loader is not None, name
        refusing, lift = candidate.loader
        assert lift is None, name  # the core plan serves every one of them
        assert f"{LOADER_0_34}:140" in {f"{s.path}:{s.line}" for s in refusing}, name
        if isinstance(candidate.verdict, DecoderShape):
            assert candidate.builds_on is not None and candidate.builds_on.recipe == CORE, name
            assert f"{LOADER_0_34}:140" in candidate.builds_on.why, name
        else:
            reason = str(candidate.verdict)
            assert f"{LOADER_0_34}:140" in reason and f"the {CORE} plan lifts that" in reason
            assert candidate.builds_on is None, name
        if name in STILL_REFUSED_0_34:
            assert STILL_REFUSED_0_34[name] in str(candidate.verdict), name
        # and the decoder really is there, not at .model, on the class the tree registers
        assert constructed(ctx.index, candidate.ref, candidate.attribute), name
        assert not constructed(ctx.index, candidate.ref, "model"), name


@pytest.mark.vllm_tree
def test_gptj_on_the_newest_release_builds_on_the_loader_plan(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    result = propose_class(release_tree("0.34.0"), "GPTJForCausalLM", out)
    assert result.returncode == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["status"] == "ready", plan["reason"]
    assert plan["finding"]["evidence"]["builds_on"]["recipe"] == CORE
    patch = (out / "patch.diff").read_text()
    assert "+        self.transformer._set_aux_hidden_state_layers(layers)" in patch
    assert "+        num_layers = len(self.transformer.h)" in patch
    # the loader lines (vllm/v1/...spec_decode/) are the core plan's, not this one's
    assert "+++ b/vllm/v1/" not in patch


TARGET_ELSEWHERE = """
class DemoForCausalLM(nn.Module, SupportsPP):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.transformer = DemoModel(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions, intermediate_tensors=None):
        return self.transformer(input_ids, positions, intermediate_tensors)
"""

LOADER = """
def load_eagle_model(target_model, vllm_config):
    target_language_model = target_model.get_language_model()
    target_inner = {read}
    return target_inner
"""


def _elsewhere_tree(root: Path, loader: str | None) -> Path:
    source = HEADER + LAYER_PAIR + "\n\n" + decoder(ISLICE + PAIR_CALL, FUSED_NORM)
    models = {"model_executor/models/demo.py": source + "\n\n" + TARGET_ELSEWHERE}
    if loader is not None:
        models["v1/worker/gpu/spec_decode/eagle/utils.py"] = loader
    tree = make_tree(root, models, {TEXT: {"DemoForCausalLM": ("demo", "DemoForCausalLM")}})
    interfaces = tree / INTERFACES
    interfaces.write_text(interfaces.read_text() + SUPPORTS_EAGLE3_HELPER)
    return tree


@pytest.mark.parametrize(
    ("loader", "builds_on"),
    [
        (
            LOADER.format(read="target_language_model.model"),
            "vllm/v1/worker/gpu/spec_decode/eagle/utils.py:3",  # the strict read
        ),
        # `getattr(..., None)` with nothing refusing on None: no loader line blocks it
        (LOADER.format(read='getattr(target_language_model, "model", None)'), None),
        (LOADER.format(read="target_language_model"), None),
        (None, None),
    ],
    ids=["attribute", "getattr", "loader-without-model", "no-loader"],
)
def test_a_decoder_elsewhere_is_ready_building_on_the_loader_plan(
    tmp_path: Path, loader: str | None, builds_on: str | None
) -> None:
    tree = _elsewhere_tree(tmp_path, loader)
    (finding,) = [f for f in scan(tree, use_cache=False).findings if f.recipe == "eagle3-enable"]
    assert finding.evidence.decoder.attribute == "self.transformer"
    assert finding.evidence.refused is None
    dependency = finding.evidence.builds_on
    if builds_on is None:
        assert dependency is None
    else:
        assert dependency is not None and dependency.recipe == CORE
        assert builds_on in dependency.why
    # its plan (the two methods on the target): eagle3-enable's case "a decoder at
    # self.transformer" runs it whole


def test_every_spec_decode_loader_counts(tmp_path: Path) -> None:
    """DFlash's and DSpark's loaders serve the same targets: a strict read there counts too."""
    tree = _elsewhere_tree(tmp_path, None)
    other = tree / "vllm/v1/worker/gpu/spec_decode/dflash/utils.py"
    other.parent.mkdir(parents=True)
    other.write_text(LOADER.format(read="target_language_model.model"))
    (site,) = loader_sites(tree).sites
    assert (site.path, site.code, site.function) == (
        "vllm/v1/worker/gpu/spec_decode/dflash/utils.py",
        "target_language_model.model",
        "load_eagle_model",
    )
