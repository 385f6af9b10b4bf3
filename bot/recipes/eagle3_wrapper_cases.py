"""The cases of recipe ``eagle3-wrapper`` and its publish rules (bot/recipes/cases.py).

``VL`` is a multimodal wrapper whose language model (named in the registry call) already
declares ``SupportsEagle3`` over a decoder that collects the aux hidden states; this tree's
protocol follows ``get_language_model()``, so declaring the interface on the wrapper is the
whole fix.
"""

from __future__ import annotations

from bot.recipes.cases import Invalid, Quiet, RecipeCases, SyntheticTree, Valid

LM_FILE = "vllm/model_executor/models/lm.py"
MODEL = "vllm/model_executor/models/vl.py"
PACKAGE_TEST = "tests/models/vl/test_eagle3.py"

IMPORTS = """from torch import nn

from .interfaces import EagleModelMixin, SupportsEagle3, SupportsMultiModal, SupportsPP
from .utils import init_vllm_registered_model
"""
LM = (
    IMPORTS
    + """

class LmModel(nn.Module, EagleModelMixin):
    def forward(self, input_ids, positions):
        hidden_states, residual = input_ids, None
        aux_hidden_states = self._maybe_add_hidden_state([], 0, hidden_states, residual)
        for idx, layer in enumerate(self.layers):
            hidden_states, residual = layer(positions, hidden_states, residual)
            self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, residual)
        if aux_hidden_states:
            return hidden_states, aux_hidden_states
        return hidden_states


class LmForCausalLM(nn.Module, SupportsPP, SupportsEagle3):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = LmModel(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
"""
)
WRAPPER = """from torch import nn

from .interfaces import SupportsMultiModal
from .utils import init_vllm_registered_model


class VLForConditionalGeneration(nn.Module, SupportsMultiModal):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.language_model = init_vllm_registered_model(
            vllm_config=vllm_config,
            hf_config=vllm_config.text_config,
            architectures=["LmForCausalLM"],
        )

    def forward(self, input_ids, positions):
        hidden_states = self.language_model.model(input_ids, positions)
        return hidden_states
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


def vl_tree(wrapper: str) -> SyntheticTree:
    return SyntheticTree(
        files={
            LM_FILE: LM,
            MODEL: wrapper,
            "vllm/models/__init__.py": "",
            "tests/models/__init__.py": "",
            PACKAGE_TEST: EXISTING_TEST,
        },
        registry={
            "_TEXT_GENERATION_MODELS": {"LmForCausalLM": ("lm", "LmForCausalLM")},
            "_MULTIMODAL_MODELS": {
                "VLForConditionalGeneration": ("vl", "VLForConditionalGeneration")
            },
        },
        interfaces=SUPPORTS_EAGLE3_HELPER,
    )


DECLARED = "class VLForConditionalGeneration(nn.Module, SupportsMultiModal, SupportsEagle3):"
INTERFACE_ONLY = Valid(
    "the language model is EAGLE-3 capable and the protocol follows get_language_model()",
    vl_tree(WRAPPER),
    "VLForConditionalGeneration",
    reports="LmForCausalLM",
    adds=(
        "from .interfaces import SupportsEagle3, SupportsMultiModal",
        DECLARED,
        "    assert supports_eagle3(VLForConditionalGeneration)",
    ),
)

CASES = RecipeCases(
    valid=(INTERFACE_ONLY,),
    invalid=(
        Invalid(
            "the interface declared on the wrapper, its import missing",
            INTERFACE_ONLY,
            MODEL,
            (
                "from .interfaces import SupportsEagle3, SupportsMultiModal",
                "from .interfaces import SupportsMultiModal",
            ),
            refuses="uses SupportsEagle3, which is not imported",
        ),
        Invalid(
            "a method slipped into the wrapper beside the declaration",
            INTERFACE_ONLY,
            MODEL,
            (
                DECLARED + "\n",
                DECLARED + "\n    def load_weights(self, weights):\n        return set()\n\n",
            ),
            refuses="is more than adding SupportsEagle3",
        ),
        Invalid(
            "a weakened regression test",
            INTERFACE_ONLY,
            PACKAGE_TEST,
            (
                "    assert supports_eagle3(VLForConditionalGeneration)",
                "    assert VLForConditionalGeneration",
            ),
            refuses="is not the regression test the recipe writes",
        ),
    ),
    quiet=(
        Quiet(
            "the wrapper post-processes what its language model returns",
            vl_tree(
                WRAPPER.replace(
                    "        return hidden_states\n", "        return hidden_states * 2\n"
                )
            ),
            "VLForConditionalGeneration",
        ),
    ),
)
