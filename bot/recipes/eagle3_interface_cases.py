"""The cases of recipe ``eagle3-interface`` and its publish rules (bot/recipes/cases.py).

``Foo`` is the gap the recipe exists for: its decoder has ``EagleModelMixin`` and collects the
aux hidden states, the model loaded for generation lacks ``SupportsEagle3``, and the model
package has a test file that already imports ``supports_eagle3`` (the regression test goes
there).
"""

from __future__ import annotations

from bot.recipes.cases import Invalid, Quiet, RecipeCases, SyntheticTree, Valid

MODEL = "vllm/model_executor/models/foo.py"
PACKAGE_TEST = "tests/models/foo/test_eagle3.py"
TEXT = "_TEXT_GENERATION_MODELS"

READY_DECODER = """

class FooModel(nn.Module, EagleModelMixin):
    def forward(self, input_ids, positions):
        hidden_states, residual = input_ids, None
        aux_hidden_states = self._maybe_add_hidden_state([], 0, hidden_states, residual)
        for idx, layer in enumerate(self.layers):
            hidden_states, residual = layer(positions, hidden_states, residual)
            self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, residual)
        if aux_hidden_states:
            return hidden_states, aux_hidden_states
        return hidden_states
"""
TARGET = """

class FooForCausalLM(nn.Module, SupportsPP):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = FooModel(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
"""
IMPORTS = "from torch import nn\n\nfrom .interfaces import EagleModelMixin, SupportsPP\n"
EXISTING_TEST = (
    "from vllm.model_executor.models.interfaces import supports_eagle3\n\n\n"
    "def test_helper_exists():\n"
    "    assert supports_eagle3 is not None\n"
)
SUPPORTS_EAGLE3_HELPER = """

def supports_eagle3(model):
    return getattr(model, "supports_eagle3", False)
"""


def foo_tree(model: str) -> SyntheticTree:
    return SyntheticTree(
        files={
            MODEL: model,
            "vllm/models/__init__.py": "",
            "tests/models/__init__.py": "",
            PACKAGE_TEST: EXISTING_TEST,
        },
        registry={TEXT: {"FooForCausalLM": ("foo", "FooForCausalLM")}},
        interfaces=SUPPORTS_EAGLE3_HELPER,
    )


GAP = Valid(
    "a ready decoder under a model that lacks the declaration",
    foo_tree(IMPORTS + READY_DECODER + TARGET),
    "FooForCausalLM",
    reports="FooModel",
    adds=(
        "from .interfaces import EagleModelMixin, SupportsEagle3, SupportsPP",
        "class FooForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
        "    assert supports_eagle3(FooForCausalLM)",
    ),
)

CASES = RecipeCases(
    valid=(GAP,),
    invalid=(
        Invalid(
            "the interface declared, its import missing",
            GAP,
            MODEL,
            (
                "from .interfaces import EagleModelMixin, SupportsEagle3, SupportsPP",
                "from .interfaces import EagleModelMixin, SupportsPP",
            ),
            refuses="uses SupportsEagle3, which is not imported",
        ),
        Invalid(
            "the import added, the class left undeclared",
            GAP,
            MODEL,
            (
                "class FooForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
                "class FooForCausalLM(nn.Module, SupportsPP):",
            ),
            refuses="is more than adding SupportsEagle3",
        ),
        Invalid(
            "the interface put first among the bases",
            GAP,
            MODEL,
            (
                "class FooForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
                "class FooForCausalLM(SupportsEagle3, nn.Module, SupportsPP):",
            ),
            refuses="is more than adding SupportsEagle3",
        ),
        Invalid(
            "something else imported beside the interface",
            GAP,
            MODEL,
            ("from torch import nn\n", "import os\nfrom torch import nn\n"),
            refuses="the patch imports os",
        ),
        Invalid(
            "a weakened regression test: it asserts nothing about the class",
            GAP,
            PACKAGE_TEST,
            ("    assert supports_eagle3(FooForCausalLM)", "    assert FooForCausalLM"),
            refuses="is not the regression test the recipe writes",
        ),
    ),
    quiet=(
        Quiet(
            "the decoder collects no aux hidden states: the declaration alone would not work",
            foo_tree(
                IMPORTS
                + READY_DECODER.replace(
                    "        aux_hidden_states = self._maybe_add_hidden_state("
                    "[], 0, hidden_states, residual)\n",
                    "        aux_hidden_states = []\n",
                ).replace(
                    "            self._maybe_add_hidden_state(aux_hidden_states, idx + 1, "
                    "hidden_states, residual)\n",
                    "",
                )
                + TARGET
            ),
            "FooForCausalLM",
        ),
    ),
)
