"""The cases of report ``eagle3-broken-claim`` (bot/recipes/cases.py): it plans no fix, so its
cases are trees it reports and trees it must leave alone.

``Broken`` declares ``SupportsEagle3`` over a decoder without ``EagleModelMixin``: vLLM's
default ``set_aux_hidden_state_layers`` would fail its assert when EAGLE-3 is configured.
"""

from __future__ import annotations

from bot.recipes.cases import Quiet, RecipeCases, SyntheticTree, Valid, capturing_decoder

MODEL = "vllm/model_executor/models/foo.py"

IMPORTS = (
    "from torch import nn\n\nfrom .interfaces import EagleModelMixin, SupportsEagle3, SupportsPP\n"
)
PLAIN_DECODER = """

class FooModel(nn.Module):
    def forward(self, input_ids, positions):
        return input_ids
"""
TARGET = """

class FooForCausalLM(nn.Module, SupportsPP, SupportsEagle3):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = FooModel(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
"""
READY_DECODER = capturing_decoder("FooModel")


def foo_tree(decoder: str) -> SyntheticTree:
    return SyntheticTree(
        files={MODEL: IMPORTS + decoder + TARGET},
        registry={"_TEXT_GENERATION_MODELS": {"FooForCausalLM": ("foo", "FooForCausalLM")}},
    )


CASES = RecipeCases(
    valid=(
        Valid(
            "the interface declared over a decoder without EagleModelMixin",
            foo_tree(PLAIN_DECODER),
            "FooForCausalLM",
            reports="lacks EagleModelMixin",
        ),
    ),
    quiet=(
        Quiet(
            "the interface declared over a decoder that has the mixin and the capture",
            foo_tree(READY_DECODER),
            "FooForCausalLM",
        ),
    ),
)
