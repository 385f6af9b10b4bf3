"""The cases of recipe ``eagle3-enable`` and its publish rules (bot/recipes/cases.py).

``Demo`` is the standard shape: layers returning ``(hidden_states, residual)``, a loop over
this stage's layers, the fused final norm. Its plan gives the decoder ``EagleModelMixin`` and
the aux capture, declares ``SupportsEagle3`` on the target, extends the package's regression
test and contributes the forward test (a new file).
"""

from __future__ import annotations

from bot.recipes.cases import Invalid, Quiet, RecipeCases, SyntheticTree, Valid

MODEL = "vllm/model_executor/models/demo.py"
PACKAGE_TEST = "tests/models/demo/test_eagle3.py"
FORWARD_TEST = "tests/model_executor/test_demo_eagle3.py"
TEXT = "_TEXT_GENERATION_MODELS"

HEADER = """from itertools import islice

import torch
from torch import nn

from vllm.distributed import get_pp_group
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.sequence import IntermediateTensors

from .interfaces import SupportsPP
from .utils import make_layers
"""
LAYER = """

class Layer(nn.Module):
    def forward(self, positions, hidden_states, residual):
        if residual is None:
            residual = hidden_states
        hidden_states = self.mlp(hidden_states)
        return hidden_states, residual
"""
DECODER = """

class DemoModel(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.start_layer, self.end_layer, self.layers = make_layers(
            4, lambda prefix: Layer(prefix=prefix), prefix=prefix
        )
        self.norm = RMSNorm(8)

    def forward(self, input_ids, positions, intermediate_tensors=None):
        hidden_states = self.embed_tokens(input_ids)
        residual = None
        for layer in islice(self.layers, self.start_layer, self.end_layer):
            hidden_states, residual = layer(positions, hidden_states, residual)
        if not get_pp_group().is_last_rank:
            return IntermediateTensors({"hidden_states": hidden_states})
        hidden_states, _ = self.norm(hidden_states, residual)
        return hidden_states
"""
TARGET = """

class DemoForCausalLM(nn.Module, SupportsPP):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = DemoModel(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions, intermediate_tensors=None):
        return self.model(input_ids, positions, intermediate_tensors)
"""
EXISTING_TEST = (
    "from vllm.model_executor.models.interfaces import supports_eagle3\n\n\n"
    "def test_helper_exists():\n"
    "    assert supports_eagle3 is not None\n"
)
SUPPORTS_EAGLE3_HELPER = """

def supports_eagle3(model):
    return getattr(model, "supports_eagle3", False)
"""


def demo_tree(model: str) -> SyntheticTree:
    return SyntheticTree(
        files={
            MODEL: model,
            "vllm/models/__init__.py": "",
            "tests/models/__init__.py": "",
            PACKAGE_TEST: EXISTING_TEST,
            "tests/model_executor/__init__.py": "",
        },
        registry={TEXT: {"DemoForCausalLM": ("demo", "DemoForCausalLM")}},
        interfaces=SUPPORTS_EAGLE3_HELPER,
    )


CAPTURE_FIRST = (
    "        aux_hidden_states = self._maybe_add_hidden_state([], 0, hidden_states, residual)"
)
# As the tree's ruff (line length 88) leaves them.
LAYER_CALL = "            hidden_states, residual = layer(positions, hidden_states, residual)\n"
CAPTURE_IN_LOOP = (
    "            self._maybe_add_hidden_state(\n"
    "                aux_hidden_states, idx + 1, hidden_states, residual\n"
    "            )\n"
)

STANDARD = Valid(
    "layers return the pair, the fused final norm: mixin, capture, interface, two tests",
    demo_tree(HEADER + LAYER + DECODER + TARGET),
    "DemoForCausalLM",
    reports="DemoModel",
    adds=(
        "from .interfaces import EagleModelMixin, SupportsEagle3, SupportsPP",
        "class DemoModel(nn.Module, EagleModelMixin):",
        "class DemoForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
        CAPTURE_FIRST,
        "                aux_hidden_states, idx + 1, hidden_states, residual",
        "        if len(aux_hidden_states) > 0:",
        "            return hidden_states, aux_hidden_states",
        "    assert supports_eagle3(DemoForCausalLM)",
        "def test_demo_for_causal_lm_collects_aux_hidden_states(monkeypatch, taps):",
    ),
)

CASES = RecipeCases(
    valid=(STANDARD,),
    invalid=(
        Invalid(
            "the mixin added to the decoder, its import missing",
            STANDARD,
            MODEL,
            (
                "from .interfaces import EagleModelMixin, SupportsEagle3, SupportsPP",
                "from .interfaces import SupportsEagle3, SupportsPP",
            ),
            refuses="uses EagleModelMixin, which is not imported",
        ),
        Invalid(
            "the capture at the wrong place: before the layer call instead of after it",
            STANDARD,
            MODEL,
            (LAYER_CALL + CAPTURE_IN_LOOP, CAPTURE_IN_LOOP + LAYER_CALL),
            refuses="is not the mixin and the aux capture the recipe writes",
        ),
        Invalid(
            "the capture dropped from the loop",
            STANDARD,
            MODEL,
            (CAPTURE_IN_LOOP, ""),
            refuses="is not the mixin and the aux capture the recipe writes",
        ),
        Invalid(
            "the decoder without the mixin",
            STANDARD,
            MODEL,
            ("class DemoModel(nn.Module, EagleModelMixin):", "class DemoModel(nn.Module):"),
            refuses="is not the mixin and the aux capture the recipe writes",
        ),
        Invalid(
            "the target left undeclared",
            STANDARD,
            MODEL,
            (
                "class DemoForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
                "class DemoForCausalLM(nn.Module, SupportsPP):",
            ),
            refuses="is more than adding SupportsEagle3",
        ),
        Invalid(
            "a weakened forward test: the aux values no longer compared",
            STANDARD,
            FORWARD_TEST,
            (
                "            torch.testing.assert_close(hidden, torch.full((2, 8), 7.0 + tap))\n",
                "            pass\n",
            ),
            refuses="the forward test is not the one the recipe writes",
        ),
        Invalid(
            "a weakened forward test: no taps asked for",
            STANDARD,
            FORWARD_TEST,
            (
                '@pytest.mark.parametrize("taps", [(), (0, 1, 3)])',
                '@pytest.mark.parametrize("taps", [()])',
            ),
            refuses="the forward test is not the one the recipe writes",
        ),
        Invalid(
            "a weakened regression test",
            STANDARD,
            PACKAGE_TEST,
            ("    assert supports_eagle3(DemoForCausalLM)", "    assert DemoForCausalLM"),
            refuses="is not the regression test the recipe writes",
        ),
    ),
    quiet=(
        Quiet(
            "registered for embedding only: never a generation target",
            SyntheticTree(
                files={MODEL: HEADER + LAYER + DECODER + TARGET},
                registry={"_EMBEDDING_MODELS": {"DemoForCausalLM": ("demo", "DemoForCausalLM")}},
            ),
            "DemoForCausalLM",
        ),
    ),
)
