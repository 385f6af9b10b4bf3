"""eagle3-enable on targets whose decoder is not ``self.model`` (``self.transformer``,
``self.backbone``): refused, with the reason read from the release's own drafter loader.

The interface's two default methods reach the decoder through ``.model``, but they are not the
only road: every cached release's EAGLE drafter loader takes the target's decoder from
``target_language_model.model`` too (for the input embedding), by attribute (0.23.0 on, an
``AttributeError`` without it) or by ``getattr`` (0.19.1, then raising or skipping the shared
embedding). Two delegating methods on the target would pass a forward check and still fail to
load a drafter, so these targets are refused and never patched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.recipes import Declined, fixer_named
from bot.recipes.eagle3_analysis import constructed
from bot.recipes.eagle3_enable.recipe import candidates
from bot.scan.findings import scan, scan_context
from bot.tree.drafter_loader import decoder_reads
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
    _ctx,
    decoder,
)

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
LOADER_0_34 = "vllm/v1/worker/gpu/spec_decode/eagle/utils.py"


@pytest.mark.vllm_tree
@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.34.0", [(LOADER_0_34, "target_language_model.model")]),
        (
            "0.19.1",
            [
                ("vllm/v1/spec_decode/eagle.py", "getattr(target_language_model, 'model', None)"),
                (
                    "vllm/v1/worker/gpu/spec_decode/eagle/utils.py",
                    "getattr(target_language_model, 'model', None)",
                ),
            ],
        ),
    ],
)
def test_the_loader_sites_are_read_from_the_release(version: str, expected: list) -> None:
    tree = release_tree(version)
    sites = decoder_reads(tree)
    assert [(s.path, s.code) for s in sites] == expected
    for site in sites:  # the line is the tree's own, not a guess
        line = (tree / site.path).read_text().splitlines()[site.line - 1]
        assert site.code.replace("'", '"') in line.replace("'", '"')


@pytest.mark.vllm_tree
def test_every_decoder_elsewhere_on_the_newest_release_is_refused_with_the_loader_line() -> None:
    ctx = scan_context(release_tree("0.34.0"))
    found = {c.ref.name: c for c in candidates(ctx) if c.attribute != "model"}
    assert {name: c.attribute for name, c in found.items()} == ELSEWHERE_0_34
    for name, candidate in found.items():
        reason = str(candidate.verdict)
        assert reason.startswith("needs a human: the decoder is self."), name
        assert f"{LOADER_0_34}:" in reason, name
        assert "two delegating methods would not be enough" in reason, name
        # and the decoder really is there, not at .model, on the class the tree registers
        assert constructed(ctx.index, candidate.ref, candidate.attribute), name
        assert not constructed(ctx.index, candidate.ref, "model"), name


@pytest.mark.vllm_tree
def test_gpt2_on_the_newest_release_gets_no_patch(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    result = propose_class(release_tree("0.34.0"), "GPT2LMHeadModel", out)
    assert result.returncode == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["status"] != "ready"
    assert plan["reason"].startswith("needs a human: the decoder is self.transformer")
    assert LOADER_0_34 in plan["reason"]
    assert (out / "patch.diff").read_text() == ""


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
    target_language_model = target_model
    target_inner = {read}
    return target_inner
"""


def _elsewhere_tree(root: Path, loader: str | None) -> Path:
    source = HEADER + LAYER_PAIR + "\n\n" + decoder(ISLICE + PAIR_CALL, FUSED_NORM)
    models = {"model_executor/models/demo.py": source + "\n\n" + TARGET_ELSEWHERE}
    if loader is not None:
        models["v1/worker/gpu/spec_decode/eagle/utils.py"] = loader
    return make_tree(root, models, {TEXT: {"DemoForCausalLM": ("demo", "DemoForCausalLM")}})


@pytest.mark.parametrize(
    ("loader", "reason"),
    [
        (
            LOADER.format(read="target_language_model.model"),
            "vllm/v1/worker/gpu/spec_decode/eagle/utils.py:3: `target_language_model.model`",
        ),
        (
            LOADER.format(read='getattr(target_language_model, "model", None)'),
            "utils.py:3: `getattr(target_language_model, 'model', None)`",
        ),
        # a loader that never reaches .model: the delegating methods would do, but the
        # recipe does not write them (no tree needs them yet)
        (LOADER.format(read="target_language_model"), "which this recipe does not write yet"),
        (None, "which this recipe does not write yet"),
    ],
    ids=["attribute", "getattr", "loader-without-model", "no-loader"],
)
def test_a_decoder_elsewhere_is_refused_and_never_patched(
    tmp_path: Path, loader: str | None, reason: str
) -> None:
    tree = _elsewhere_tree(tmp_path, loader)
    (finding,) = [f for f in scan(tree, use_cache=False).findings if f.recipe == "eagle3-enable"]
    assert finding.evidence.decoder.attribute == "self.transformer"
    assert finding.evidence.shape is None
    refused = finding.evidence.refused
    assert refused.startswith("needs a human: the decoder is self.transformer, not self.model")
    assert reason in refused
    recipe = fixer_named("eagle3-enable")
    assert recipe is not None
    planned = recipe.plan(finding, _ctx(tree, finding))
    assert isinstance(planned, Declined)
    assert planned.reason == refused


def test_only_the_eagle_loader_counts(tmp_path: Path) -> None:
    """Another method's loader (dflash, dspark) reading .model says nothing about EAGLE's."""
    tree = _elsewhere_tree(tmp_path, None)
    other = tree / "vllm/v1/worker/gpu/spec_decode/dflash/utils.py"
    other.parent.mkdir(parents=True)
    other.write_text(LOADER.format(read="target_language_model.model"))
    assert decoder_reads(tree) == []
