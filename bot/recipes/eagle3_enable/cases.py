"""The cases of recipe ``eagle3-enable`` and its publish rules (bot/recipes/cases.py).

``Demo`` is the standard shape: layers returning ``(hidden_states, residual)``, a loop over
this stage's layers, the fused final norm. Its plan gives the decoder ``EagleModelMixin`` and
the aux capture, declares ``SupportsEagle3`` on the target, extends the package's regression
test and contributes the forward test (a new file). In ``shared_tree`` three targets build that
decoder (``DemoNgramModel`` inherits its forward from another file): one plan, led by the
first by name, fixes them together.
"""

from __future__ import annotations

from bot.recipes.cases import (
    INTERFACES,
    MODEL_REGISTRY,
    PACKAGE_TEST_TEXT,
    SUPPORTS_EAGLE3_HELPER,
    Invalid,
    Quiet,
    RecipeCases,
    SyntheticTree,
    Valid,
    with_agents_rules,
)
from bot.tree.layout import LLM_TEST_PATH, REGISTRY_TEST

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


def demo_tree(model: str) -> SyntheticTree:
    return SyntheticTree(
        files={
            MODEL: model,
            "vllm/models/__init__.py": "",
            "tests/models/__init__.py": "",
            PACKAGE_TEST: PACKAGE_TEST_TEXT,
            "tests/model_executor/__init__.py": "",
        },
        registry={TEXT: {"DemoForCausalLM": ("demo", "DemoForCausalLM")}},
    )


NGRAM = "vllm/model_executor/models/demo_ngram.py"
NGRAM_SOURCE = (
    "from torch import nn\n\nfrom .demo import DemoModel\nfrom .interfaces import SupportsPP\n\n"
    "\nclass DemoNgramModel(DemoModel):\n"
    '    def __init__(self, *, vllm_config, prefix=""):\n'
    "        super().__init__(vllm_config=vllm_config, prefix=prefix)\n"
    "        self.ngram = None\n"
    + TARGET.replace("DemoForCausalLM", "DemoNgramForCausalLM").replace(
        "DemoModel(", "DemoNgramModel("
    )
)
REGISTRY_TEST_TEXT = """import pytest

from vllm.model_executor.models.registry import ModelRegistry


@pytest.mark.parametrize("model_arch", ["DemoForCausalLM"])
def test_registry_imports(model_arch):
    assert ModelRegistry._try_load_model_cls(model_arch) is not None
"""
# The registry test loads classes by architecture: the skeleton's registry gains the loader.
LOADER = """

class _ModelRegistry:
    def _try_load_model_cls(self, model_arch):
        return None


ModelRegistry = _ModelRegistry()
"""


def shared_tree() -> SyntheticTree:
    chat = TARGET.replace("DemoForCausalLM", "DemoChatForCausalLM")
    return SyntheticTree(
        files={
            MODEL: HEADER + LAYER + DECODER + TARGET + chat,
            NGRAM: NGRAM_SOURCE,
            "vllm/models/__init__.py": "",
            "tests/models/__init__.py": "",
            REGISTRY_TEST: REGISTRY_TEST_TEXT,
            "tests/model_executor/__init__.py": "",
        },
        registry={
            TEXT: {
                name: (module, name)
                for module, name in (
                    ("demo", "DemoForCausalLM"),
                    ("demo", "DemoChatForCausalLM"),
                    ("demo_ngram", "DemoNgramForCausalLM"),
                )
            }
        },
        appended={INTERFACES: SUPPORTS_EAGLE3_HELPER, MODEL_REGISTRY: LOADER},
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

SHARED = Valid(
    "three targets sharing one decoder: one plan for the set",
    shared_tree(),
    "DemoChatForCausalLM",
    adds=(
        "class DemoModel(nn.Module, EagleModelMixin):",
        "class DemoChatForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
        "class DemoForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
        "class DemoNgramForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
    ),
)

# GPT-2's form: the decoder at self.transformer, its layers at self.h. The target gets the
# interface's two methods reaching them (the defaults reach only self.model.layers).
ELSEWHERE_DECODER = DECODER.replace("self.layers", "self.h")
ELSEWHERE_TARGET = TARGET.replace("self.model", "self.transformer")
REACHES_DECODER = "        self.transformer._set_aux_hidden_state_layers(layers)"
ELSEWHERE = Valid(
    "the decoder at self.transformer with its layers at self.h: the target's two methods",
    demo_tree(HEADER + LAYER + ELSEWHERE_DECODER + ELSEWHERE_TARGET),
    "DemoForCausalLM",
    reports="DemoModel",
    adds=(
        "class DemoModel(nn.Module, EagleModelMixin):",
        "class DemoForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
        "    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:",
        REACHES_DECODER,
        "        num_layers = len(self.transformer.h)",
        "    target.transformer = model",
        "    model.h = torch.nn.ModuleList(StreamLayer() for _ in range(4))",
    ),
)


# The decoder's own capture, as decoders wrote it before EagleModelMixin.
LEGACY_INIT = "        self.norm = RMSNorm(8)\n"
LEGACY_CHECK = (
    "            if idx in self.aux_hidden_state_layers:\n"
    "                aux_hidden_states.append(hidden_states + residual)\n"
)
LEGACY_DECODER = (
    DECODER.replace(
        LEGACY_INIT, LEGACY_INIT + "        self.aux_hidden_state_layers: tuple[int, ...] = ()\n"
    )
    .replace(
        "        for layer in islice(self.layers, self.start_layer, self.end_layer):\n",
        "        aux_hidden_states = []\n"
        "        for idx, layer in enumerate(\n"
        "            islice(self.layers, self.start_layer, self.end_layer),\n"
        "            start=self.start_layer,\n"
        "        ):\n" + LEGACY_CHECK,
    )
    .replace(
        "        hidden_states, _ = self.norm(hidden_states, residual)\n",
        "        hidden_states, _ = self.norm(hidden_states, residual)\n"
        "        if aux_hidden_states:\n"
        "            return hidden_states, aux_hidden_states\n",
    )
)
LEGACY = Valid(
    "a decoder collecting the aux states itself, as before EagleModelMixin: the mixin's capture "
    "replaces its own",
    demo_tree(HEADER + LAYER + LEGACY_DECODER + TARGET),
    "DemoForCausalLM",
    reports="DemoModel",
    adds=(
        "class DemoModel(nn.Module, EagleModelMixin):",
        "class DemoForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
        CAPTURE_IN_LOOP.splitlines()[1],
        "        if len(aux_hidden_states) > 0:",
    ),
    omits=("aux_hidden_states = []", "in self.aux_hidden_state_layers"),
)


def inheriting_tree() -> SyntheticTree:
    """Two targets of one decoder, the second a subclass of the first."""
    chat = "\n\nclass DemoChatForCausalLM(DemoForCausalLM):\n    pass\n"
    shared = shared_tree()
    return SyntheticTree(
        files={
            **{path: text for path, text in shared.files.items() if path != NGRAM},
            MODEL: HEADER + LAYER + DECODER + TARGET + chat,
        },
        registry={
            TEXT: {name: ("demo", name) for name in ("DemoForCausalLM", "DemoChatForCausalLM")}
        },
        appended=shared.appended,
    )


SUBCLASS = Valid(
    "a target subclassing another target of the set inherits its declaration",
    inheriting_tree(),
    "DemoChatForCausalLM",
    adds=(
        "class DemoModel(nn.Module, EagleModelMixin):",
        "class DemoForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
    ),
    omits=("class DemoChatForCausalLM(",),
)


LLM_TEST = LLM_TEST_PATH
# A tree with tests/AGENTS.md: no forward test on stand-ins; the test through LLM, with the
# decoder's final norm for the check of the captured stream (and, for the set, each member).
THROUGH_LLM = Valid(
    "tests/AGENTS.md: the test through LLM checks the captured stream through the final norm",
    with_agents_rules(
        demo_tree(HEADER + LAYER + DECODER + TARGET), {"DemoForCausalLM": "example/demo"}
    ),
    "DemoForCausalLM",
    adds=('    "DemoForCausalLM": "norm",', "    assert supports_eagle3(DemoForCausalLM)"),
)
SHARED_THROUGH_LLM = Valid(
    "tests/AGENTS.md, three targets sharing one decoder: each in the test through LLM",
    with_agents_rules(
        shared_tree(),
        {
            "DemoChatForCausalLM": "example/demo-chat",
            "DemoForCausalLM": "example/demo",
            "DemoNgramForCausalLM": "example/demo-ngram",
        },
    ),
    "DemoChatForCausalLM",
    adds=(
        '    "DemoChatForCausalLM": "norm",',
        '    "DemoForCausalLM": "norm",',
        '    "DemoNgramForCausalLM": "norm",',
    ),
)

# OPT's and ChatGLM's form: the decoder hands a child decoder's output back whole, the child
# has the loop, a final norm under a flag of its config, and the return. The child takes the
# mixin and collects; the target's two methods reach it (self.model.decoder).
ONE_LAYER = """

class OneLayer(nn.Module):
    def forward(self, positions, hidden_states):
        hidden_states = self.mlp(hidden_states)
        return hidden_states
"""
CHILD_DECODER = """

class DemoDecoder(nn.Module):
    def __init__(self, config, prefix=""):
        super().__init__()
        self.start_layer, self.end_layer, self.layers = make_layers(
            4, lambda prefix: OneLayer(prefix=prefix), prefix=prefix
        )
        self.final_norm = RMSNorm(8) if config.final_norm else None

    def forward(self, input_ids, positions, intermediate_tensors=None):
        hidden_states = self.embed_tokens(input_ids)
        for layer in islice(self.layers, self.start_layer, self.end_layer):
            hidden_states = layer(positions, hidden_states)
        if not get_pp_group().is_last_rank:
            return IntermediateTensors({"hidden_states": hidden_states})
        if self.final_norm is not None:
            hidden_states = self.final_norm(hidden_states)
        return hidden_states


class DemoModel(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.decoder = DemoDecoder(vllm_config.model_config.hf_config, prefix=prefix)

    def forward(self, input_ids, positions, intermediate_tensors=None):
        return self.decoder(input_ids, positions, intermediate_tensors)
"""
REACHES_CHILD = "        self.model.decoder._set_aux_hidden_state_layers(layers)"
CHILD = Valid(
    "tests/AGENTS.md, a child decoder handed back whole: the child collects, the target reaches it",
    with_agents_rules(
        demo_tree(HEADER + ONE_LAYER + CHILD_DECODER + TARGET), {"DemoForCausalLM": "example/demo"}
    ),
    "DemoForCausalLM",
    reports="DemoModel",
    adds=(
        "class DemoDecoder(nn.Module, EagleModelMixin):",
        "class DemoForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
        "                aux_hidden_states, idx + 1, hidden_states, None",
        REACHES_CHILD,
        "        num_layers = len(self.model.decoder.layers)",
        # the final norm runs only under a flag: the test checks the output, not the norm
        '    "DemoForCausalLM": None,',
    ),
    omits=("class DemoModel(nn.Module, EagleModelMixin):",),
)

CASES = RecipeCases(
    valid=(STANDARD, SHARED, SUBCLASS, LEGACY, ELSEWHERE, THROUGH_LLM, SHARED_THROUGH_LLM, CHILD),
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
            "the mixin's capture added beside the decoder's own, which is left in place",
            LEGACY,
            MODEL,
            (LAYER_CALL, LEGACY_CHECK + LAYER_CALL),
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
            "the target's method reaching another module than its decoder",
            ELSEWHERE,
            MODEL,
            (REACHES_DECODER, "        self.h._set_aux_hidden_state_layers(layers)"),
            refuses="the two methods reaching self.transformer the recipe writes",
        ),
        Invalid(
            "a child decoder's target reaching the parent, not the child that collects",
            CHILD,
            MODEL,
            (REACHES_CHILD, "        self.model._set_aux_hidden_state_layers(layers)"),
            refuses="the two methods reaching self.model.decoder the recipe writes",
        ),
        Invalid(
            "the child decoder that collects left without the mixin",
            CHILD,
            MODEL,
            (
                "class DemoDecoder(nn.Module, EagleModelMixin):",
                "class DemoDecoder(nn.Module):",
            ),
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
        Invalid(
            "one target of the set left undeclared",
            SHARED,
            MODEL,
            (
                "class DemoForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
                "class DemoForCausalLM(nn.Module, SupportsPP):",
            ),
            refuses="is not what the recipe writes for the set",
        ),
        Invalid(
            "the other module's target declared without its import",
            SHARED,
            NGRAM,
            (
                "from .interfaces import SupportsEagle3, SupportsPP",
                "from .interfaces import SupportsPP",
            ),
            refuses="is not what the recipe writes for the set",
        ),
        Invalid(
            "the registry test leaves one member of the set out",
            SHARED,
            REGISTRY_TEST,
            (
                '["DemoChatForCausalLM", "DemoForCausalLM", "DemoNgramForCausalLM"]',
                '["DemoChatForCausalLM", "DemoForCausalLM"]',
            ),
            refuses="does not add exactly the set's architectures",
        ),
        Invalid(
            "the test through LLM no longer checks the captured stream",
            THROUGH_LLM,
            LLM_TEST,
            ('    "DemoForCausalLM": "norm",', '    "DemoForCausalLM": None,'),
            refuses="the LLM test is not the one the recipe writes",
        ),
        Invalid(
            "the set's test through LLM leaves a member out",
            SHARED_THROUGH_LLM,
            LLM_TEST,
            ('    "DemoNgramForCausalLM": "norm",\n', ""),
            refuses="the LLM test is not the one the recipe writes",
        ),
        Invalid(
            "the test through LLM greedy-compares nothing",
            THROUGH_LLM,
            LLM_TEST,
            ("    assert outputs == expected\n", ""),
            refuses="the LLM test is not the one the recipe writes",
        ),
        Invalid(
            "the inheriting module's forward test patches the wrong pipeline group",
            SHARED,
            "tests/model_executor/test_demo_ngram_eagle3.py",
            (
                'monkeypatch.setattr(demo, "get_pp_group"',
                'monkeypatch.setattr(demo_ngram, "get_pp_group"',
            ),
            refuses="the forward test is not the one the recipe writes",
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
