"""Error signatures read from real vLLM trees' raise sites, and from small synthetic sources."""

from __future__ import annotations

import pytest

from bot.tree.fetch import release_tree
from bot.tree.signatures import error_signatures, match_signature, signatures_in_source

LONG = "Model does not support EAGLE3 interface but aux_hidden_state_outputs was requested"
SHORT = "Model does not support EAGLE3 interface"


@pytest.mark.vllm_tree
def test_0_23_0_has_both_raise_sites() -> None:
    found = {(s.message_prefix, s.path) for s in error_signatures(release_tree("0.23.0"))}
    assert found == {
        (LONG, "vllm/v1/worker/gpu_model_runner.py"),
        (SHORT, "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"),
    }


@pytest.mark.vllm_tree
def test_0_34_0_has_one_raise_site() -> None:
    (only,) = error_signatures(release_tree("0.34.0"))
    assert (only.message_prefix, only.path) == (
        SHORT,
        "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
    )
    assert only.line > 0


def test_implicit_concatenation_and_fstrings_keep_literal_parts() -> None:
    source = (
        "def f(model):\n"
        "    raise RuntimeError(\n"
        "        'Model ' 'does not support EAGLE3 '\n"
        "        f'for {model}, see docs'\n"
        "    )\n"
        "def g(x):\n"
        "    raise ValueError(f'Unsupported model_type {x} for Eagle3 speculator')\n"
        "def h():\n"
        "    raise RuntimeError('Expected model instance for EAGLE3 configuration')\n"
    )
    (signature,) = signatures_in_source(source, "vllm/x.py")
    assert signature.message_prefix == "Model does not support EAGLE3 for "
    assert signature.fragments == ("Model does not support EAGLE3 for ", ", see docs")
    assert signature.location == "vllm/x.py:2"
    text = "RuntimeError: Model does not support EAGLE3 for Foo, see docs"
    assert match_signature(text, [signature]) == signature
    assert match_signature("Model does not support EAGLE3 for Foo", [signature]) is None


@pytest.mark.vllm_tree
def test_the_most_specific_signature_wins() -> None:
    signatures = error_signatures(release_tree("0.23.0"))
    assert match_signature(f"RuntimeError: {LONG}", signatures).message_prefix == LONG
    assert match_signature(f"RuntimeError: {SHORT}", signatures).message_prefix == SHORT
    assert match_signature("CUDA out of memory", signatures) is None
