"""The cases a recipe carries next to its code, Fixit-style (tests/test_recipe_cases.py runs them).

A :class:`Valid` case is a small synthetic vLLM tree where the recipe reports its class; for a
recipe that plans fixes, the plan is applied with propose's do-no-harm checks and each file the
patch changes must pass the recipe's publish rule for its edit kind. An :class:`Invalid` case
alters one file of a valid case's patched result (a missing import, a capture in the wrong
place, a weakened test) and the publish rule must refuse it with ``refuses`` in its reason.
A :class:`Quiet` case is a tree where the recipe must report nothing for the class (do no harm).

Trees are built on the test suite's skeleton of a vLLM checkout (tests/synthetic.py: an
interfaces module with the names the recipes look for, the model registry, a ruff setting); a
case names only what its recipe reads beyond that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bot.tree.layout import (
    AGENTS_RULES,
    INTERFACES_PATH,
    REGISTRY_PATH,
    SPEC_DECODE_TESTS,
    TEST_AREAS,
    TEST_REGISTRY_PATH,
)

Registry = Mapping[str, Mapping[str, tuple[str, str]]]


INTERFACES = INTERFACES_PATH
MODEL_REGISTRY = REGISTRY_PATH
# What a plan's regression test needs beyond the skeleton: the interfaces' helper it asserts
# with, and a model package test that already imports it (where the test goes).
SUPPORTS_EAGLE3_HELPER = """

def supports_eagle3(model):
    return getattr(model, "supports_eagle3", False)
"""
PACKAGE_TEST_TEXT = (
    "from vllm.model_executor.models.interfaces import supports_eagle3\n\n\n"
    "def test_helper_exists():\n"
    "    assert supports_eagle3 is not None\n"
)


def capturing_decoder(name: str) -> str:
    """A decoder class that inherits ``EagleModelMixin`` and collects the aux hidden states the
    way upstream's decoders do (the text a case's model file holds, after its imports)."""
    return f"""

class {name}(nn.Module, EagleModelMixin):
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


@dataclass(frozen=True)
class SyntheticTree:
    """``files`` by path from the tree root (whole texts); ``registry`` maps a registry dict
    (``_TEXT_GENERATION_MODELS``) to ``{arch: (module, class)}``; ``appended`` is text added
    to the end of a skeleton file, by path (the ``supports_eagle3`` helper a plan needs)."""

    files: Mapping[str, str]
    registry: Registry
    appended: Mapping[str, str] = field(
        default_factory=lambda: {INTERFACES: SUPPORTS_EAGLE3_HELPER}
    )


@dataclass(frozen=True)
class Valid:
    """The recipe reports ``class_name`` in ``tree`` (its summary holding ``reports``); a fixing
    recipe's plan applies, and its publish rules accept every file of the patch, whose added
    lines include each of ``adds`` and none of ``omits``."""

    name: str
    tree: SyntheticTree
    class_name: str
    reports: str = ""
    adds: tuple[str, ...] = ()
    omits: tuple[str, ...] = ()


@dataclass(frozen=True)
class Invalid:
    """``valid``'s patched ``path`` with ``replace[0]`` (found exactly once) turned into
    ``replace[1]``: the publish rule for that file's edit kind refuses, saying ``refuses``."""

    name: str
    valid: Valid
    path: str
    replace: tuple[str, str]
    refuses: str


@dataclass(frozen=True)
class Quiet:
    """The recipe reports nothing for ``class_name`` in ``tree``."""

    name: str
    tree: SyntheticTree
    class_name: str


@dataclass(frozen=True)
class RecipeCases:
    valid: tuple[Valid, ...]
    invalid: tuple[Invalid, ...] = ()
    quiet: tuple[Quiet, ...] = ()


# A tree with tests/AGENTS.md (0.34.0 and later): the fixing recipes contribute a test through
# LLM (bot/recipes/llm_test.py), placed where a CI step runs it.
AGENTS_RULES_TEXT = "# tests\n\n- Construct vLLM objects with their real constructors.\n"


def with_agents_rules(tree: SyntheticTree, examples: Mapping[str, str]) -> SyntheticTree:
    """``tree`` with tests/AGENTS.md, the test folder and its CI step, and an example model
    in tests/models/registry.py for each of ``examples`` (arch -> Hugging Face id)."""
    from bot.codemods.ci_step_dependency import SPEC_DECODE_AREA

    entries = "".join(f'    "{arch}": _HfExamplesInfo("{hf}"),\n' for arch, hf in examples.items())
    registry = (
        "class _HfExamplesInfo:\n    def __init__(self, default, **kwargs):\n"
        "        self.default = default\n\n\n"
        f"_TEXT_GENERATION_EXAMPLE_MODELS = {{\n    # [Decoder-only]\n{entries}}}\n"
    )
    files = {
        **tree.files,
        AGENTS_RULES: AGENTS_RULES_TEXT,
        TEST_REGISTRY_PATH: registry,
        "tests/v1/__init__.py": "",
        f"{SPEC_DECODE_TESTS}/__init__.py": "",
        f"{TEST_AREAS}/spec_decode.yaml": SPEC_DECODE_AREA,  # its V1 Spec Decode step
    }
    return SyntheticTree(files, tree.registry, tree.appended)
