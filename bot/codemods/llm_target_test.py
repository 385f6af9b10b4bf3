"""Codemod: the regression test through ``LLM`` that a tree with ``tests/AGENTS.md`` asks for.

0.34.0's ``tests/AGENTS.md``: real constructors (no ``SimpleNamespace``, ``MagicMock``, private
attributes or patched methods), "a fix to user-visible behavior needs at least one regression
test through ``LLM`` (``vllm_runner``)", and a CI step that selects it. A target without
``SupportsEagle3`` is refused at load time, so the fix is user-visible.

One file, ``tests/v1/spec_decode/test_eagle3_targets.py`` (the "V1 Spec Decode" step runs
``v1/spec_decode``), holds one parametrized test whose list of fixed architectures grows member
by member (``TARGETS``). Each case builds the registry's example model through ``vllm_runner``
the way ``tests/models/test_initialization.py`` does (``load_format="dummy"``,
``dummy_hf_overrides``: one layer), once without speculation and once with
``extract_hidden_states`` (a speculative method that needs the interface and no draft
checkpoint), and asserts:

- the load succeeds (before the fix: "Model does not support EAGLE3 interface");
- greedy output with speculation equals the output without it;
- where the fix wrote the decoder's capture (``TARGETS[arch]`` names the decoder's final norm),
  the state captured after the last layer, through that norm, is the decoder's output: a
  capture that drops the residual (or captures another layer) gives another value. A forward
  hook on the model records what the model returned (``LLM.apply_model``); nothing is patched.
"""

from __future__ import annotations

import ast

import libcst as cst

from bot.codemods.base import Case, CodemodRefused, parse, require_identifier, shown
from bot.codemods.layout import insert_element
from bot.tree.layout import LLM_TEST_PATH

LLM_TEST_FUNCTION = "test_eagle3_target_extracts_hidden_states"
TARGETS_NAME = "TARGETS"

_HEADER = '''\
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""EAGLE-3 targets through `LLM`, with `extract_hidden_states` (no draft checkpoint).

Each target loads with a speculative method that needs `SupportsEagle3` and keeps its
greedy output; where its decoder's capture is checked, the state captured after the last
layer is the stream the decoder's final norm reads.
"""

from functools import partial

import pytest
import torch

from tests.models.registry import HF_EXAMPLE_MODELS
from tests.models.utils import dummy_hf_overrides
from vllm.model_executor.models.interfaces import EagleModelMixin

'''

_BODY = """

PROMPTS = ["The capital of France is", "1 2 3 4 5 6"]
MAX_TOKENS = 8

# What the model returned with aux hidden states requested, in the process running it.
_CAPTURED: list[tuple[list, list]] = []


def _hf_overrides(hf_config, *, model_arch, exist_overrides):
    hf_config = dummy_hf_overrides(
        hf_config, model_arch=model_arch, exist_overrides=exist_overrides
    )
    # Per-layer metadata must match the layer count (the draft's config copies it).
    text_config = hf_config.get_text_config()
    if layer_types := getattr(text_config, "layer_types", None):
        num_layers = text_config.num_hidden_layers
        text_config.update({"layer_types": layer_types[:num_layers]})
    return hf_config


def _record_captured_stream(norm_name, model):
    _CAPTURED.clear()
    (decoder,) = [m for m in model.modules() if isinstance(m, EagleModelMixin)]
    norm = getattr(decoder, norm_name)

    def record(module, args, output):
        if isinstance(output, tuple):
            hidden_states, aux_hidden_states = output
            normed = norm(aux_hidden_states[-1])
            if isinstance(normed, tuple):
                normed = normed[0]
            # (as lists: what the engine's process sends back is serialized)
            _CAPTURED.append((normed.tolist(), hidden_states.tolist()))

    model.register_forward_hook(record)


def _captured(model):
    return list(_CAPTURED)


@pytest.mark.parametrize("model_arch", sorted(TARGETS))
def test_eagle3_target_extracts_hidden_states(vllm_runner, monkeypatch, model_arch):
    # LLM.apply_model sends the functions above to the engine's process.
    monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    model_info = HF_EXAMPLE_MODELS.get_hf_info(model_arch)
    model_info.check_available_online(on_fail="skip")
    model_info.check_transformers_version(on_fail="skip")
    kwargs = dict(
        tokenizer_name=model_info.tokenizer or model_info.default,
        tokenizer_mode=model_info.tokenizer_mode,
        revision=model_info.revision,
        trust_remote_code=model_info.trust_remote_code,
        load_format="dummy",
        hf_overrides=partial(
            _hf_overrides,
            model_arch=model_arch,
            exist_overrides=model_info.hf_overrides,
        ),
        max_model_len=256,
        enforce_eager=True,
        dtype="float32",
    )
    with vllm_runner(model_info.default, **kwargs) as llm:
        expected = llm.generate_greedy(PROMPTS, max_tokens=MAX_TOKENS)
        num_layers = llm.llm.llm_engine.model_config.get_total_num_hidden_layers()

    norm_name = TARGETS[model_arch]
    with vllm_runner(
        model_info.default,
        speculative_config={
            "method": "extract_hidden_states",
            "num_speculative_tokens": 1,
            "draft_model_config": {
                "hf_config": {"eagle_aux_hidden_state_layer_ids": [num_layers]}
            },
        },
        **kwargs,
    ) as llm:
        if norm_name is not None:
            llm.llm.apply_model(partial(_record_captured_stream, norm_name))
        outputs = llm.generate_greedy(PROMPTS, max_tokens=MAX_TOKENS)
        (captured,) = llm.llm.apply_model(_captured)

    assert outputs == expected
    if norm_name is not None:
        # The state captured after the last layer is the stream the final norm reads.
        assert captured
        for normed, output in captured:
            torch.testing.assert_close(torch.tensor(normed), torch.tensor(output))
"""

_TARGETS_COMMENT = (
    "# Each target, and its decoder's final norm where its aux-state capture is checked\n"
    "# (None: the decoder's capture is not this test's, only the interface is).\n"
)


def target_entry_source(arch: str, norm: str | None) -> str:
    require_identifier(arch, "architecture")
    if norm is not None:
        require_identifier(norm, "final norm attribute")
    return f'"{arch}": None' if norm is None else f'"{arch}": "{norm}"'


def new_llm_test_file(targets: dict[str, str | None]) -> str:
    """The whole file for ``targets`` (arch -> the decoder's final norm, or None)."""
    if not targets:
        raise CodemodRefused("no target architecture for the LLM test")
    lines = "".join(
        f"    {target_entry_source(arch, norm)},\n" for arch, norm in sorted(targets.items())
    )
    return f"{_HEADER}{_TARGETS_COMMENT}{TARGETS_NAME} = {{\n{lines}}}\n{_BODY}"


def add_llm_targets(source: str, targets: dict[str, str | None]) -> str:
    """Create the test (``source`` empty: a new file) or add ``targets`` to its ``TARGETS``.

    An architecture already listed keeps its entry if the norm agrees (no change), and is
    refused if it disagrees: the file says something else about that target."""
    if not source.strip():
        return new_llm_test_file(targets)
    _require_the_test(source)
    tree = parse(source)
    for index, statement in enumerate(tree.body):
        literal = _targets_literal(statement)
        if literal is None:
            continue
        listed = _listed(literal)
        for arch, norm in sorted(targets.items()):
            target_entry_source(arch, norm)  # checks the identifiers
            if arch in listed:
                if listed[arch] != norm:
                    raise CodemodRefused(
                        f"{TARGETS_NAME} already lists {arch} with {shown(listed[arch])}"
                    )
                continue
            names = list(listed)
            position = sum(1 for name in names if name < arch)
            element = cst.parse_expression(f"{{{target_entry_source(arch, norm)}}}").elements[0]
            literal = insert_element(literal, position, element, "lbrace", "rbrace")
            listed = _listed(literal)
        assert isinstance(statement, cst.SimpleStatementLine)
        assign = statement.body[0]
        body = list(tree.body)
        body[index] = statement.with_changes(body=[assign.with_changes(value=literal)])
        return tree.with_changes(body=body).code
    raise CodemodRefused(f"{LLM_TEST_PATH} has no module-level {TARGETS_NAME} dict literal")


def _require_the_test(source: str) -> None:
    names = {node.name for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}
    if LLM_TEST_FUNCTION not in names:
        raise CodemodRefused(f"{LLM_TEST_PATH} exists without {LLM_TEST_FUNCTION}")


def _targets_literal(statement: cst.CSTNode) -> cst.Dict | None:
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return None
    assign = statement.body[0]
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1):
        return None
    target = assign.targets[0].target
    if isinstance(target, cst.Name) and target.value == TARGETS_NAME:
        if not isinstance(assign.value, cst.Dict):
            raise CodemodRefused(f"{TARGETS_NAME} is not a dict literal")
        return assign.value
    return None


def _listed(literal: cst.Dict) -> dict[str, str | None]:
    """The dict's entries, each a string key and a string or None value."""
    listed: dict[str, str | None] = {}
    for element in literal.elements:
        if not isinstance(element, cst.DictElement):
            raise CodemodRefused(f"{TARGETS_NAME} holds a ** expansion")
        key, value = element.key, element.value
        if not isinstance(key, cst.SimpleString) or not isinstance(key.evaluated_value, str):
            raise CodemodRefused(f"{TARGETS_NAME} has a key that is not a string")
        if isinstance(value, cst.Name) and value.value == "None":
            listed[key.evaluated_value] = None
        elif isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
            listed[key.evaluated_value] = value.evaluated_value
        else:
            raise CodemodRefused(f"{TARGETS_NAME}[{key.evaluated_value!r}] is not a name or None")
    return listed


def targets_of(source: str) -> dict[str, str | None]:
    """The architectures (and norms) the file's ``TARGETS`` lists."""
    for statement in parse(source).body:
        literal = _targets_literal(statement)
        if literal is not None:
            return _listed(literal)
    raise CodemodRefused(f"no module-level {TARGETS_NAME} dict literal")


def llm_test_node_id(arch: str) -> str:
    require_identifier(arch, "architecture")
    return f"{LLM_TEST_PATH}::{LLM_TEST_FUNCTION}[{arch}]"


_ONE = new_llm_test_file({"Qwen2MoeForCausalLM": "norm"})
_TWO = _ONE.replace(
    '    "Qwen2MoeForCausalLM": "norm",\n',
    '    "Glm4ForCausalLM": None,\n    "Qwen2MoeForCausalLM": "norm",\n',
)

CASES: list[Case] = [
    Case(
        "a new file: the test with its one target",
        lambda s: add_llm_targets(s, {"Qwen2MoeForCausalLM": "norm"}),
        "",
        _ONE,
    ),
    Case(
        "a later fix adds its target in sorted order (a declaration: no value check)",
        lambda s: add_llm_targets(s, {"Glm4ForCausalLM": None}),
        _ONE,
        _TWO,
    ),
    Case(
        "the target already listed with the same norm: no change",
        lambda s: add_llm_targets(s, {"Qwen2MoeForCausalLM": "norm"}),
        _TWO,
    ),
    Case(
        "the target listed with another norm: refused",
        lambda s: add_llm_targets(s, {"Qwen2MoeForCausalLM": "final_norm"}),
        _TWO,
        refuses="already lists Qwen2MoeForCausalLM",
    ),
    Case(
        "a file of that name without the test: refused",
        lambda s: add_llm_targets(s, {"Glm4ForCausalLM": None}),
        "def test_other():\n    pass\n",
        refuses="exists without",
    ),
    Case(
        "a norm that is not an identifier: refused",
        lambda s: add_llm_targets(s, {"Glm4ForCausalLM": "norm; import os"}),
        _ONE,
        refuses="not a Python identifier",
    ),
]
