"""The contributed forward test never shadows the model module it imports, and a decoder whose
norm hands its residual back gets a norm stand-in that does too (both found by running the
tests of ready 0.34.0 plans: Flint's `vllm/models/flint/model.py`, Cohere's norm classes)."""

from __future__ import annotations

import ast

import pytest

from bot.codemods.aux_forward_test import aux_test_path, module_alias, new_aux_test_file

FLINT = dict(
    module="vllm.models.flint.model",
    decoder="FlintModel",
    target="FlintForCausalLM",
    residual="residual-stream",
    norm="norm",
)


def _imported_and_bound(text: str) -> tuple[set[str], set[str]]:
    tree = ast.parse(text)
    imported = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    bound = {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }
    return imported, bound


@pytest.mark.parametrize(
    "module",
    ["vllm.models.flint.model", "vllm.model_executor.models.mixtral", "vllm.models.x.target"],
)
def test_the_imported_module_is_never_a_name_the_test_binds(module: str) -> None:
    text = new_aux_test_file(**{**FLINT, "module": module})
    imported, bound = _imported_and_bound(text)
    assert module_alias(module) in imported
    assert not imported & bound, imported & bound


def test_a_module_named_model_is_imported_under_its_package_name() -> None:
    text = new_aux_test_file(**FLINT)
    assert "from vllm.models.flint import model as flint_model\n" in text
    assert "    model = flint_model.FlintModel.__new__(flint_model.FlintModel)\n" in text
    assert aux_test_path(FLINT["module"]) == "tests/model_executor/test_flint_model_eagle3.py"
    assert aux_test_path("vllm.model_executor.models.mixtral") == (
        "tests/model_executor/test_mixtral_eagle3.py"
    )


def test_a_full_stream_pairs_norm_hands_the_residual_back_untouched() -> None:
    text = new_aux_test_file(**{**FLINT, "residual": "full-stream-pair"})
    assert "            return hidden_states, residual\n" in text
    assert "    model.norm = KeepResidualNorm()\n" in text
    assert "AddNorm" not in text
    summed = new_aux_test_file(**FLINT)
    assert "            return hidden_states + residual, hidden_states + residual\n" in summed
    assert "    model.norm = AddNorm()\n" in summed
