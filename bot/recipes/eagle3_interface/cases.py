"""The cases of recipe ``eagle3-interface`` and its publish rules (bot/recipes/cases.py).

``Foo`` is the gap the recipe exists for: its decoder has ``EagleModelMixin`` and collects the
aux hidden states, the model loaded for generation lacks ``SupportsEagle3``, and the model
package has a test file that already imports ``supports_eagle3`` (the regression test goes
there). ``Qwen3`` is the same gap under an architecture the draft catalogue has a published
EAGLE-3 draft for (bot/data/drafts.json), so its plan also adds the test registry's entry.
"""

from __future__ import annotations

from bot.recipes.cases import (
    PACKAGE_TEST_TEXT,
    Invalid,
    Quiet,
    RecipeCases,
    SyntheticTree,
    Valid,
    capturing_decoder,
    with_agents_rules,
)
from bot.tree.layout import LLM_TEST_PATH, TEST_REGISTRY_PATH

MODEL = "vllm/model_executor/models/foo.py"
PACKAGE_TEST = "tests/models/foo/test_eagle3.py"
TEXT = "_TEXT_GENERATION_MODELS"

READY_DECODER = capturing_decoder("FooModel")
TARGET = """

class FooForCausalLM(nn.Module, SupportsPP):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = FooModel(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
"""
IMPORTS = "from torch import nn\n\nfrom .interfaces import EagleModelMixin, SupportsPP\n"


def foo_tree(model: str) -> SyntheticTree:
    return SyntheticTree(
        files={
            MODEL: model,
            "vllm/models/__init__.py": "",
            "tests/models/__init__.py": "",
            PACKAGE_TEST: PACKAGE_TEST_TEXT,
        },
        registry={TEXT: {"FooForCausalLM": ("foo", "FooForCausalLM")}},
    )


TEST_REGISTRY = TEST_REGISTRY_PATH
TEST_REGISTRY_TEXT = """class _HfExamplesInfo:
    def __init__(self, default, **kwargs):
        self.default = default


_TEXT_GENERATION_EXAMPLE_MODELS = {
    # [Decoder-only]
    "Qwen3ForCausalLM": _HfExamplesInfo("Qwen/Qwen3-8B"),
}

_SPECULATIVE_DECODING_EXAMPLE_MODELS = {
    # [Eagle]
    "EagleLlamaForCausalLM": _HfExamplesInfo(
        "meta-llama/Meta-Llama-3-8B-Instruct",
        speculative_model="yuhuili/EAGLE-LLaMA3-Instruct-8B",
        trust_remote_code=True,
    ),
    "Eagle3LlamaForCausalLM": _HfExamplesInfo(
        "meta-llama/Llama-3.1-8B-Instruct",
        speculative_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    ),
}
"""


def qwen3_tree() -> SyntheticTree:
    foo = foo_tree(IMPORTS + READY_DECODER + TARGET)
    files = {
        path.replace("foo", "qwen3"): text.replace("Foo", "Qwen3")
        for path, text in foo.files.items()
    }
    return SyntheticTree(
        files={**files, TEST_REGISTRY: TEST_REGISTRY_TEXT},
        registry={TEXT: {"Qwen3ForCausalLM": ("qwen3", "Qwen3ForCausalLM")}},
    )


WITH_ENTRY = Valid(
    "a gap with a published EAGLE-3 draft: the test registry gains its entry",
    qwen3_tree(),
    "Qwen3ForCausalLM",
    adds=(
        "class Qwen3ForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
        '    "Eagle3Qwen3DraftModel": _HfExamplesInfo(',
        '        speculative_model="AngelSlim/Qwen3-8B_eagle3",',
    ),
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

LLM_TEST = LLM_TEST_PATH
THROUGH_LLM = Valid(
    "tests/AGENTS.md: the declaration is also tested through LLM (no capture check: not ours)",
    with_agents_rules(foo_tree(IMPORTS + READY_DECODER + TARGET), {"FooForCausalLM": "a/foo"}),
    "FooForCausalLM",
    adds=(
        '    "FooForCausalLM": None,',
        "class FooForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
    ),
)

CASES = RecipeCases(
    valid=(GAP, WITH_ENTRY, THROUGH_LLM),
    invalid=(
        Invalid(
            "the test through LLM lists another architecture than the fixed one",
            THROUGH_LLM,
            LLM_TEST,
            ('    "FooForCausalLM": None,', '    "BarForCausalLM": None,'),
            refuses="the LLM test is not the one the recipe writes",
        ),
        Invalid(
            "the test through LLM claims a capture check the declaration does not make",
            THROUGH_LLM,
            LLM_TEST,
            ('    "FooForCausalLM": None,', '    "FooForCausalLM": "norm",'),
            refuses="the LLM test is not the one the recipe writes",
        ),
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
            refuses="the change to FooForCausalLM is not the edit the recipe makes",
        ),
        Invalid(
            "the interface put first among the bases",
            GAP,
            MODEL,
            (
                "class FooForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
                "class FooForCausalLM(SupportsEagle3, nn.Module, SupportsPP):",
            ),
            refuses="the change to FooForCausalLM is not the edit the recipe makes",
        ),
        Invalid(
            "the interface imported on a line of its own, not merged into the file's import",
            GAP,
            MODEL,
            (
                "from .interfaces import EagleModelMixin, SupportsEagle3, SupportsPP\n",
                "from .interfaces import EagleModelMixin, SupportsPP\n"
                "from .interfaces import SupportsEagle3\n",
            ),
            refuses="the change to the imports is not the edit the recipe makes",
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
        Invalid(
            "the registry entry trusts remote code its sibling does not",
            WITH_ENTRY,
            TEST_REGISTRY,
            (
                '        speculative_model="AngelSlim/Qwen3-8B_eagle3",\n',
                '        speculative_model="AngelSlim/Qwen3-8B_eagle3",\n'
                "        trust_remote_code=True,\n",
            ),
            refuses="sets trust_remote_code, which upstream's own entry",
        ),
        Invalid(
            "the registry entry names a draft the catalogue does not have",
            WITH_ENTRY,
            TEST_REGISTRY,
            ('"AngelSlim/Qwen3-8B_eagle3"', '"someone/Qwen3-8B_eagle3"'),
            refuses="is not in the bot's draft catalogue",
        ),
        Invalid(
            "the registry edit also changes an existing entry",
            WITH_ENTRY,
            TEST_REGISTRY,
            (
                'speculative_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"',
                'speculative_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-70B"',
            ),
            refuses="changes an existing registry entry",
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
