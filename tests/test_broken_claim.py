"""eagle3-broken-claim: classes that declare SupportsEagle3 but would fail when used.

Synthetic trees hold one shape each (broken and fine side by side); the real 0.34.0 tree checks
the reports against its own source lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.drafts import load_catalogue
from bot.recipes.base import PlanContext
from bot.recipes.eagle3_broken_claim.recipe import (
    FORWARD_DROPS,
    NAME,
    NO_CAPTURE,
    NO_MIXIN,
)
from bot.recipes.eagle3_enable.detection import candidates
from bot.recipes.eagle3_enable.recipe import broken_claims_fixed
from bot.recipes.wrapper_analysis import protocol_defaults, protocol_follows_language_model
from bot.scan.findings import scan
from bot.tree.fetch import release_tree
from tests.synthetic import READY_DECODER, make_tree

TEXT = "_TEXT_GENERATION_MODELS"
MM = "_MULTIMODAL_MODELS"
HEADER = """
from torch import nn

from .interfaces import EagleModelMixin, SupportsEagle3, SupportsMultiModal, SupportsPP
"""
PLAIN_DECODER = """
class {name}(nn.Module):
    def forward(self, input_ids, positions):
        return input_ids
"""


def target(name: str, decoder: str, forward: str = "return self.model(input_ids, positions)",
           bases: str = "nn.Module, SupportsPP, SupportsEagle3") -> str:  # fmt: skip
    return f"""
class {name}({bases}):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = {decoder}(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions):
        {forward}
"""


def claims(tmp_path: Path, source: str, classes: list[str], mm: list[str] = ()) -> list[dict]:
    registry = {TEXT: {name: ("foo", name) for name in classes}}
    if mm:
        registry[MM] = {name: ("foo", name) for name in mm}
    make_tree(tmp_path, {"model_executor/models/foo.py": HEADER + source}, registry)
    found = [f.to_json() for f in scan(tmp_path, use_cache=False).findings]
    return [f for f in found if f["recipe"] == NAME]


def line_of(tmp_path: Path, text: str) -> int:
    source = (tmp_path / "vllm/model_executor/models/foo.py").read_text().splitlines()
    return next(i for i, line in enumerate(source, 1) if text in line)


def test_decoder_without_the_mixin_is_reported_with_its_evidence(tmp_path: Path) -> None:
    source = (
        PLAIN_DECODER.format(name="PlainModel")
        + target("BrokenForCausalLM", "PlainModel")
        + READY_DECODER.format(name="GoodModel")
        + target("GoodForCausalLM", "GoodModel")
    )
    found = claims(tmp_path, source, ["BrokenForCausalLM", "GoodForCausalLM"])
    assert [(f["class"], f["evidence"]["broken"]) for f in found] == [
        ("BrokenForCausalLM", NO_MIXIN)
    ]
    ev = found[0]["evidence"]
    assert ev["declared"]["line"] == line_of(tmp_path, "class BrokenForCausalLM(")
    assert not ev["declared"]["inherited"]
    assert ev["decoder"]["name"] == "PlainModel"
    assert ev["decoder"]["line"] == line_of(tmp_path, "class PlainModel(")
    assert ev["decoder"]["reached_as"] == "self.model"
    assert ev["decoder"]["assigned_at"]["line"] == line_of(tmp_path, "self.model = PlainModel(")
    assert ev["interface"]["path"] == "vllm/model_executor/models/interfaces.py"
    assert "lacks EagleModelMixin" in found[0]["summary"]


def test_decoder_with_the_mixin_but_no_capture_is_reported(tmp_path: Path) -> None:
    decoder = """
class NoCaptureModel(nn.Module, EagleModelMixin):
    def forward(self, input_ids, positions):
        for layer in self.layers:
            input_ids = layer(input_ids)
        return input_ids
"""
    found = claims(tmp_path, decoder + target("NcForCausalLM", "NoCaptureModel"), ["NcForCausalLM"])
    assert [(f["class"], f["evidence"]["broken"]) for f in found] == [("NcForCausalLM", NO_CAPTURE)]
    forward = found[0]["evidence"]["decoder_forward"]
    assert forward["line"] == line_of(tmp_path, "def forward(self, input_ids, positions):")


@pytest.mark.parametrize(
    "decoder",
    [
        # hands its answer to the parent's forward, which captures
        READY_DECODER.format(name="ParentModel")
        + """
class ChildModel(ParentModel):
    def forward(self, input_ids, positions):
        return super().forward(input_ids, positions)
""",
        # hands it to a helper method that captures
        """
class ChildModel(nn.Module, EagleModelMixin):
    def forward(self, input_ids, positions):
        return self._stock_forward(input_ids, positions)

    def _stock_forward(self, input_ids, positions):
        aux_hidden_states = []
        for idx, layer in enumerate(self.layers):
            if idx in self.aux_hidden_state_layers:
                aux_hidden_states.append(input_ids)
        return input_ids, aux_hidden_states
""",
        # its layers module collects and hands the aux states back
        """
class ChildModel(nn.Module, EagleModelMixin):
    def forward(self, input_ids, positions):
        hidden_states, aux_hidden_states = self.layers(input_ids, positions)
        if aux_hidden_states:
            return hidden_states, aux_hidden_states
        return hidden_states
""",
    ],
    ids=["super-forward", "helper-method", "layers-module"],
)
def test_capture_reached_through_delegation_is_not_reported(tmp_path: Path, decoder: str) -> None:
    assert (
        claims(tmp_path, decoder + target("DgForCausalLM", "ChildModel"), ["DgForCausalLM"]) == []
    )


def test_a_base_forward_that_never_calls_the_decoder_is_reported_on_the_subclass(
    tmp_path: Path,
) -> None:
    source = READY_DECODER.format(name="ReadyModel") + (
        target(
            "BaseForCausalLM",
            "ReadyModel",
            forward="return self.embed(input_ids)",
        )
        + """
class SubForCausalLM(BaseForCausalLM):
    pass
"""
    )
    found = claims(tmp_path, source, ["SubForCausalLM"])
    assert [(f["class"], f["evidence"]["broken"]) for f in found] == [
        ("SubForCausalLM", FORWARD_DROPS)
    ]
    ev = found[0]["evidence"]
    assert ev["declared"] == {
        "name": "BaseForCausalLM",
        "path": "vllm/model_executor/models/foo.py",
        "line": line_of(tmp_path, "class BaseForCausalLM("),
        "inherited": True,
    }
    assert ev["forward"]["name"] == "BaseForCausalLM.forward"
    # the template's forward is five lines below its class line
    assert ev["forward"]["line"] == line_of(tmp_path, "class BaseForCausalLM(") + 5
    assert "never calls self.model" in ev["why"]


def test_a_forward_that_reworks_the_output_is_left_unjudged(tmp_path: Path) -> None:
    # It may handle the tuple (vLLM has such forwards): a report here would be a guess.
    source = READY_DECODER.format(name="ReadyModel") + target(
        "ReworkForCausalLM",
        "ReadyModel",
        forward="out = self.model(input_ids, positions)\n        return self.norm(out)",
    )
    assert claims(tmp_path, source, ["ReworkForCausalLM"]) == []


def test_overridden_protocol_methods_are_not_judged(tmp_path: Path) -> None:
    source = PLAIN_DECODER.format(name="PlainModel") + target("OwnForCausalLM", "PlainModel")
    source += """
    def set_aux_hidden_state_layers(self, layers):
        self.model.taps = layers

    def get_eagle3_default_aux_hidden_state_layers(self):
        return (1,)
"""
    assert claims(tmp_path, source, ["OwnForCausalLM"]) == []


WRAPPER = """
class {name}(nn.Module, SupportsMultiModal, SupportsEagle3):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.language_model = {lm}(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions):
        return self.language_model.model(input_ids, positions)


class {name}Sub({name}):
    pass
"""


def test_wrapper_is_judged_by_its_language_models_decoder(tmp_path: Path) -> None:
    source = (
        READY_DECODER.format(name="ReadyModel")
        + target("ReadyLm", "ReadyModel", bases="nn.Module, SupportsPP")
        + PLAIN_DECODER.format(name="PlainModel")
        + target("PlainLm", "PlainModel", bases="nn.Module, SupportsPP")
        + WRAPPER.format(name="GoodVL", lm="ReadyLm")
        + WRAPPER.format(name="BadVL", lm="PlainLm")
    )
    found = claims(tmp_path, source, [], mm=["GoodVLSub", "BadVLSub"])
    assert [(f["class"], f["evidence"]["broken"]) for f in found] == [("BadVLSub", NO_MIXIN)]
    ev = found[0]["evidence"]
    assert ev["declared"]["name"] == "BadVL" and ev["declared"]["inherited"]
    assert ev["decoder"]["reached_as"] == "self.language_model.model"
    assert ev["language_model"]["name"] == "PlainLm"
    assert ev["language_model"]["assigned_at"]["line"] == line_of(
        tmp_path, "self.language_model = PlainLm("
    )


def test_the_tree_says_how_its_defaults_unwrap() -> None:
    old, new = protocol_defaults(release_tree("0.23.0")), protocol_defaults(release_tree("0.34.0"))
    assert old is not None and new is not None
    assert (old.unwrap, new.unwrap) == ("required", "optional")
    assert old.follows_get_language_model and new.follows_get_language_model
    interfaces = release_tree("0.34.0") / "vllm/model_executor/models/interfaces.py"
    assert "EagleModelMixin" in interfaces.read_text().splitlines()[new.assert_line - 1]


def test_one_parse_of_the_protocol_answers_both_recipes(tmp_path: Path) -> None:
    # The wrapper recipe asks whether both default methods follow get_language_model(); the
    # broken-claim recipe how set_aux_hidden_state_layers finds the decoder. One parse.
    root = make_tree(tmp_path / "tree", {}, {})
    both = protocol_defaults(root)
    assert both is not None and both.methods_follow_get_language_model
    assert (both.unwrap, both.follows_get_language_model) == ("optional", True)
    assert protocol_follows_language_model(root)
    interfaces = root / "vllm/model_executor/models/interfaces.py"
    text = interfaces.read_text()
    default_layers = text.index("def get_eagle3_default_aux_hidden_state_layers")
    rest = text[default_layers:].replace("self.get_language_model()", "self.language_model", 1)
    interfaces.write_text(text[:default_layers] + rest)
    one = protocol_defaults(root)
    assert one is not None and not one.methods_follow_get_language_model
    assert (one.unwrap, one.line) == (both.unwrap, both.line)  # the set_aux defaults, unchanged
    assert not protocol_follows_language_model(root)


def test_real_reports_on_0_34_0_point_at_the_lines_they_name() -> None:
    root = release_tree("0.34.0")
    found = [f for f in scan(root).findings if f.recipe == NAME]
    kinds = {(f.class_name, f.evidence.broken) for f in found}
    # Read by hand (see the report): each decoder named lacks the mixin, or MiMoModel's forward
    # overrides Qwen2Model's without the capture.
    assert kinds == {
        ("CohereCompassForConditionalGeneration", NO_MIXIN),
        ("Exaone4_5_ForConditionalGeneration", NO_MIXIN),
        ("Qwen4ExpForConditionalGeneration", NO_MIXIN),
        ("MiMoForCausalLM", NO_CAPTURE),
    }
    for finding in found:
        ev = finding.evidence.to_json()
        declared = _line(root, ev["declared"]["path"], ev["declared"]["line"])
        assert declared.startswith(f"class {ev['declared']['name']}(")
        decoder = _line(root, ev["decoder"]["path"], ev["decoder"]["line"])
        assert decoder.startswith(f"class {ev['decoder']['name']}(")
        assert "EagleModelMixin" not in decoder or ev["broken"] != NO_MIXIN
        interface = _line(root, ev["interface"]["path"], ev["interface"]["line"])
        assert "EagleModelMixin" in interface


def _line(root: Path, path: str, line: int) -> str:
    return (root / path).read_text(encoding="utf-8").splitlines()[line - 1].strip()


# A decoder the enable recipe can patch (tests/test_enable_shapes.py's islice / residual-stream
# shape), without the mixin.
ENABLEABLE = """
from itertools import islice


class PairLayer(nn.Module):
    def forward(self, positions, hidden_states, residual):
        if residual is None:
            residual = hidden_states
        hidden_states = self.mlp(hidden_states)
        return hidden_states, residual


class PairModel(nn.Module):
    def __init__(self, *, vllm_config, prefix=''):
        super().__init__()
        self.start_layer, self.end_layer, self.layers = make_layers(
            4, lambda prefix: PairLayer(prefix=prefix), prefix=prefix
        )
        self.embed_tokens = VocabParallelEmbedding(8, 8)
        self.norm = RMSNorm(8)

    def forward(self, input_ids, positions, intermediate_tensors=None):
        hidden_states = self.embed_tokens(input_ids)
        residual = None
        for layer in islice(self.layers, self.start_layer, self.end_layer):
            hidden_states, residual = layer(positions, hidden_states, residual)
        hidden_states, _ = self.norm(hidden_states, residual)
        return hidden_states
"""


def test_a_claim_broken_by_a_decoder_without_the_mixin_names_the_plan_that_repairs_it(
    tmp_path: Path,
) -> None:
    """Exaone4_5's shape: the wrapper's language model is a registered target whose enablement
    gives the decoder the mixin; without that registration, every blocker is named."""
    source = ENABLEABLE + target("PairLm", "PairModel", bases="nn.Module, SupportsPP")
    source += WRAPPER.format(name="PairVL", lm="PairLm")
    (found,) = claims(tmp_path / "registered", source, ["PairLm"], mm=["PairVLSub"])
    assert found["evidence"]["fix"] == {"ready": ["PairLm"]}
    assert "the eagle3-enable plan for PairLm repairs it" in found["summary"]
    (found,) = claims(tmp_path / "unregistered", source, [], mm=["PairVLSub"])
    assert found["evidence"]["fix"] == {
        "refused": "needs a human: no registered text-generation architecture builds PairModel "
        "as its .model, so there is no eagle3-enable target whose plan would give it the mixin "
        "and the capture"
    }


def test_a_claim_whose_decoder_is_refused_names_every_blocker(tmp_path: Path) -> None:
    source = PLAIN_DECODER.format(name="PlainModel") + target("BrokenForCausalLM", "PlainModel")
    (found,) = claims(tmp_path, source, ["BrokenForCausalLM"])
    refused = found["evidence"]["fix"]["refused"]
    assert refused.startswith("needs a human: no registered text-generation architecture builds")
    assert "; and PlainModel.forward has no loop over its layers" in refused


def test_a_forward_override_that_drops_the_capture_says_no_plan_adds_it_alone(
    tmp_path: Path,
) -> None:
    """MiMo's shape: the decoder inherits the mixin, its own forward (an explicit-add decoder
    the target norms) drops the capture. The shape is readable; what is missing is a plan that
    adds only the capture."""
    source = ENABLEABLE.replace(
        "class PairModel(nn.Module):", "class PairModel(nn.Module, EagleModelMixin):"
    )
    source = source.replace(
        "        hidden_states, _ = self.norm(hidden_states, residual)\n",
        "        hidden_states = hidden_states + residual\n",
    )
    (found,) = claims(
        tmp_path, source + target("PairForCausalLM", "PairModel"), ["PairForCausalLM"]
    )
    assert found["evidence"]["broken"] == NO_CAPTURE
    assert found["evidence"]["fix"] == {
        "refused": "needs a human: PairModel already has EagleModelMixin (through PairModel) and "
        "PairForCausalLM already declares the interface; eagle3-enable's plans add the mixin, the "
        "capture and the declaration together, and none adds the capture alone to a forward that "
        "dropped it"
    }


def test_a_claim_on_a_subclass_running_the_decoders_forward_names_that_decoders_plan(
    tmp_path: Path,
) -> None:
    """The wrapper's language model is not registered; its decoder subclasses a registered
    target's decoder and runs its forward: that target's enablement repairs the claim."""
    source = ENABLEABLE + "\n\nclass PairSubModel(PairModel):\n    pass\n"
    source += target("PairLm", "PairModel", bases="nn.Module, SupportsPP")
    source += target("PairSubLm", "PairSubModel", bases="nn.Module, SupportsPP")
    source += WRAPPER.format(name="PairVL", lm="PairSubLm")
    (found,) = claims(tmp_path / "inherits", source, ["PairLm"], mm=["PairVLSub"])
    assert found["evidence"]["fix"] == {"ready": ["PairLm"]}
    # ... and that plan resolves it (the re-scan must see it gone; the write-up cites it).
    result = scan(tmp_path / "inherits", use_cache=False)
    (lm,) = [c for c in candidates(result.context) if c.ref.name == "PairLm"]
    ctx = PlanContext(
        scan=result.context,
        group=(),
        findings=result.findings,
        arch="PairLm",
        catalogue=load_catalogue(include_user=False),
        preferred_draft=None,
        upstream="vllm-project/vllm",
        version=None,
        base_commit="0" * 40,
    )
    assert [f.class_name for f in broken_claims_fixed(ctx, lm)] == ["PairVLSub"]
    # A subclass with a forward of its own is not repaired by the base's capture.
    override = source.replace(
        "class PairSubModel(PairModel):\n    pass\n",
        "class PairSubModel(PairModel):\n"
        "    def forward(self, input_ids, positions):\n"
        "        return input_ids\n",
    )
    (found,) = claims(tmp_path / "overrides", override, ["PairLm"], mm=["PairVLSub"])
    assert "ready" not in found["evidence"]["fix"]
