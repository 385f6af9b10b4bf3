"""The cases of recipe ``eagle3-wrapper`` and its publish rules (bot/recipes/cases.py).

``VL`` is a multimodal wrapper whose language model (named in the registry call) already
declares ``SupportsEagle3`` over a decoder that collects the aux hidden states; this tree's
protocol follows ``get_language_model()``, so declaring the interface on the wrapper is the
whole fix. ``RuntimeVL`` builds its language model from the checkpoint's ``text_config``: it
gets the protocol's two methods behind the clear-error guard of the tree's own wrapper
(``GuardVL``, Pixtral's shape), and the contributed test that calls them on stand-ins.
"""

from __future__ import annotations

from bot.recipes.cases import (
    INTERFACES,
    PACKAGE_TEST_TEXT,
    Invalid,
    Quiet,
    RecipeCases,
    SyntheticTree,
    Valid,
    capturing_decoder,
    with_agents_rules,
)
from bot.tree.layout import LLM_TEST_PATH

LM_FILE = "vllm/model_executor/models/lm.py"
MODEL = "vllm/model_executor/models/vl.py"
PACKAGE_TEST = "tests/models/vl/test_eagle3.py"
GUARD_FILE = "vllm/model_executor/models/guard_vl.py"
RUNTIME_FILE = "vllm/model_executor/models/runtime_vl.py"
RUNTIME_PACKAGE_TEST = "tests/models/runtime_vl/test_eagle3.py"
FORWARDING_TEST = "tests/model_executor/test_runtime_vl_eagle3.py"

IMPORTS = """from torch import nn

from .interfaces import EagleModelMixin, SupportsEagle3, SupportsMultiModal, SupportsPP
from .utils import init_vllm_registered_model
"""
LM = (
    IMPORTS
    + capturing_decoder("LmModel")
    + """

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


RUNTIME = """from torch import nn

from .interfaces import SupportsMultiModal
from .utils import init_vllm_registered_model


class RuntimeVLForConditionalGeneration(nn.Module, SupportsMultiModal):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.language_model = init_vllm_registered_model(
            vllm_config=vllm_config, hf_config=vllm_config.text_config
        )

    def forward(self, input_ids, positions):
        hidden_states = self.language_model.model(input_ids, positions)
        return hidden_states
"""


# The tree's own guarded wrapper: the guard is what the recipe copies, word for word.
GUARDED = RUNTIME.replace(
    "from .interfaces import SupportsMultiModal\n",
    "from .interfaces import SupportsEagle3, SupportsMultiModal, supports_eagle3\n",
).replace(
    "class RuntimeVLForConditionalGeneration(nn.Module, SupportsMultiModal):",
    "class GuardVLForConditionalGeneration(nn.Module, SupportsMultiModal, SupportsEagle3):",
) + (
    "\n"
    "    def _require_language_model_eagle3(self) -> None:\n"
    "        if not supports_eagle3(self.language_model):\n"
    "            raise RuntimeError(\n"
    '                f"EAGLE-3 speculative decoding requires the language model to "\n'
    '                f"support EAGLE-3, but {type(self.language_model).__name__} does not."\n'
    "            )\n"
)


def vl_tree(wrapper: str) -> SyntheticTree:
    return SyntheticTree(
        files={
            LM_FILE: LM,
            MODEL: wrapper,
            "vllm/models/__init__.py": "",
            "tests/models/__init__.py": "",
            PACKAGE_TEST: PACKAGE_TEST_TEXT,
        },
        registry={
            "_TEXT_GENERATION_MODELS": {"LmForCausalLM": ("lm", "LmForCausalLM")},
            "_MULTIMODAL_MODELS": {
                "VLForConditionalGeneration": ("vl", "VLForConditionalGeneration")
            },
        },
    )


# A release whose SupportsEagle3 defaults the core-eagle3-forwarding plan cannot rewrite (the
# default layers do not follow get_language_model()): each wrapper gets the guard itself.
LEGACY_INTERFACES = """from typing import ClassVar, Literal, Protocol


class SupportsPP(Protocol):
    pass


class SupportsMultiModal(Protocol):
    def get_language_model(self):
        return self.language_model


class SupportsEagleBase(Protocol):
    pass


class EagleModelMixin:
    aux_hidden_state_layers: tuple[int, ...] = ()


class SupportsEagle3(SupportsEagleBase, Protocol):
    supports_eagle3: ClassVar[Literal[True]] = True

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.get_language_model().model._set_aux_hidden_state_layers(layers)

    def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
        num_layers = len(self.model.layers)
        return (2, num_layers // 2, num_layers - 3)


class VllmModelForPooling(Protocol):
    is_pooling_model: ClassVar[Literal[True]] = True
"""


def runtime_tree(guarded: str, interfaces: str | None = None) -> SyntheticTree:
    return SyntheticTree(
        files={
            **({INTERFACES: interfaces} if interfaces is not None else {}),
            LM_FILE: LM,
            GUARD_FILE: guarded,
            RUNTIME_FILE: RUNTIME,
            "vllm/models/__init__.py": "",
            "tests/models/__init__.py": "",
            RUNTIME_PACKAGE_TEST: PACKAGE_TEST_TEXT,
            "tests/model_executor/__init__.py": "",
        },
        registry={
            "_TEXT_GENERATION_MODELS": {"LmForCausalLM": ("lm", "LmForCausalLM")},
            "_MULTIMODAL_MODELS": {
                "GuardVLForConditionalGeneration": ("guard_vl", "GuardVLForConditionalGeneration"),
                "RuntimeVLForConditionalGeneration": (
                    "runtime_vl",
                    "RuntimeVLForConditionalGeneration",
                ),
            },
        },
    )


# The tree's own clear error for a model without the interface (what a written guard says).
TREE_ERROR_FILE = "vllm/v1/spec_decode/eagle3_utils.py"
TREE_ERROR = """from vllm.model_executor.models.interfaces import supports_eagle3


def set_eagle3_aux_hidden_state_layers(model, layers):
    if not supports_eagle3(model):
        raise RuntimeError("Model does not support EAGLE3 interface")
    model.set_aux_hidden_state_layers(layers)
"""


def unguarded_tree() -> SyntheticTree:
    """A run-time wrapper in a tree where no wrapper has a guard yet."""
    tree = runtime_tree(GUARDED)
    files = {path: text for path, text in tree.files.items() if path != GUARD_FILE}
    registry = {
        name: {arch: where for arch, where in entries.items() if "Guard" not in arch}
        for name, entries in tree.registry.items()
    }
    return SyntheticTree({**files, TREE_ERROR_FILE: TREE_ERROR}, registry, tree.appended)


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

GUARD_CALL = "        self._require_language_model_eagle3()\n"
# What every guarded plan adds: the declaration, the guard, the methods calling it, its test.
GUARDED_ADDS = (
    "class RuntimeVLForConditionalGeneration(nn.Module, SupportsMultiModal, SupportsEagle3):",
    "    def _require_language_model_eagle3(self) -> None:",
    "        if not supports_eagle3(self.language_model):",
    "            raise RuntimeError(",
    GUARD_CALL.rstrip("\n"),
    "        self.language_model.set_aux_hidden_state_layers(layers)",
    "    with pytest.raises(RuntimeError):",
)
BUILDS_ON_FORWARDING = Valid(
    "a language model chosen at run time: the declaration alone, building on the forwarding "
    "defaults the core-eagle3-forwarding plan writes",
    runtime_tree(GUARDED),
    "RuntimeVLForConditionalGeneration",
    reports="once the core-eagle3-forwarding plan is applied",
    adds=(
        "class RuntimeVLForConditionalGeneration(nn.Module, SupportsMultiModal, SupportsEagle3):",
        "    assert supports_eagle3(RuntimeVLForConditionalGeneration)",
    ),
)
BEHIND_THE_GUARD = Valid(
    "a language model chosen at run time, defaults the bot cannot rewrite: both methods "
    "behind the tree's own guard",
    runtime_tree(GUARDED, LEGACY_INTERFACES),
    "RuntimeVLForConditionalGeneration",
    reports="text_config",
    adds=GUARDED_ADDS,
)

WRITTEN_GUARD_MESSAGE = "Model does not support EAGLE3 interface: the language model "
BEHIND_A_WRITTEN_GUARD = Valid(
    "a language model chosen at run time in a tree without a guard: one written in the words of "
    "the tree's own missing-interface error",
    unguarded_tree(),
    "RuntimeVLForConditionalGeneration",
    reports="text_config",
    adds=(*GUARDED_ADDS, f'                "{WRITTEN_GUARD_MESSAGE}"'),
)

LLM_TEST = LLM_TEST_PATH
# tests/AGENTS.md: no forwarding test on a stand-in language model; the wrapper through LLM.
GUARD_THROUGH_LLM = Valid(
    "tests/AGENTS.md, defaults the bot cannot rewrite: the guarded wrapper is tested through LLM, "
    "no stand-in language model",
    with_agents_rules(
        runtime_tree(GUARDED, LEGACY_INTERFACES),
        {"RuntimeVLForConditionalGeneration": "example/runtime-vl"},
    ),
    "RuntimeVLForConditionalGeneration",
    adds=('    "RuntimeVLForConditionalGeneration": None,', GUARD_CALL.rstrip("\n")),
)

CASES = RecipeCases(
    valid=(
        INTERFACE_ONLY,
        BUILDS_ON_FORWARDING,
        BEHIND_THE_GUARD,
        BEHIND_A_WRITTEN_GUARD,
        GUARD_THROUGH_LLM,
    ),
    invalid=(
        Invalid(
            "the wrapper's test through LLM lists the language model instead",
            GUARD_THROUGH_LLM,
            LLM_TEST,
            ('    "RuntimeVLForConditionalGeneration": None,', '    "LmForCausalLM": None,'),
            refuses="the LLM test is not the one the recipe writes",
        ),
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
            refuses="the change to VLForConditionalGeneration is not the edit the recipe makes",
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
        Invalid(
            "a forwarder slipped beside a declaration that builds on the forwarding defaults",
            BUILDS_ON_FORWARDING,
            RUNTIME_FILE,
            (
                "class RuntimeVLForConditionalGeneration(nn.Module, SupportsMultiModal, "
                "SupportsEagle3):\n",
                "class RuntimeVLForConditionalGeneration(nn.Module, SupportsMultiModal, "
                "SupportsEagle3):\n"
                "    def set_aux_hidden_state_layers(self, layers):\n"
                "        self.language_model.set_aux_hidden_state_layers(layers)\n\n",
            ),
            refuses="is not the edit the recipe makes",
        ),
        Invalid(
            "the guard's helper imported by nobody: supports_eagle3 missing",
            BEHIND_THE_GUARD,
            RUNTIME_FILE,
            (
                "from .interfaces import SupportsEagle3, SupportsMultiModal, supports_eagle3",
                "from .interfaces import SupportsEagle3, SupportsMultiModal",
            ),
            refuses="uses supports_eagle3, which is not imported",
        ),
        Invalid(
            "a guard that no longer raises",
            BEHIND_THE_GUARD,
            RUNTIME_FILE,
            ("        if not supports_eagle3(self.language_model):\n", "        if False:\n"),
            refuses="expected `if not supports_eagle3(self.language_model):`, the patch has `if",
        ),
        Invalid(
            "a guard whose message is not the tree's own guard's, word for word",
            BEHIND_THE_GUARD,
            RUNTIME_FILE,
            ("support EAGLE-3, but {type(", "support EAGLE-3; {type("),
            refuses="the change to RuntimeVLForConditionalGeneration is not the edit the recipe",
        ),
        Invalid(
            "a written guard whose words are not the tree's own error's",
            BEHIND_A_WRITTEN_GUARD,
            RUNTIME_FILE,
            ("does not support EAGLE3 interface: the", "lacks EAGLE3: the"),
            refuses="the change to RuntimeVLForConditionalGeneration is not the edit the recipe",
        ),
        Invalid(
            "a method that skips the guard",
            BEHIND_THE_GUARD,
            RUNTIME_FILE,
            (
                GUARD_CALL + "        self.language_model.set_aux_hidden_state_layers(layers)\n",
                "        self.language_model.set_aux_hidden_state_layers(layers)\n",
            ),
            refuses="expected `self._require_language_model_eagle3()`, the patch has nothing",
        ),
        Invalid(
            "a weakened forwarding test: the guard's error no longer required",
            BEHIND_THE_GUARD,
            FORWARDING_TEST,
            (
                "    with pytest.raises(RuntimeError):\n"
                "        model.set_aux_hidden_state_layers((1, 3))\n",
                "",
            ),
            refuses="the forwarding test is not the one the recipe writes",
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
