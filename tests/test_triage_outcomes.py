"""Triage of issues as users write them (our own texts, vLLM 0.34.0): names, outcomes, ties."""

from __future__ import annotations

import pytest

from bot.tree.fetch import release_tree
from bot.triage.issue import triage_issue
from bot.triage.text import (
    drop_noise,
    method_request,
    model_tokens,
    normalise_method,
    spaced_phrases,
)

pytestmark = pytest.mark.vllm_tree

ERROR = "RuntimeError: Model does not support EAGLE3 interface"


def _issue(body: str, title: str = "[Bug]: server dies at startup", **extra) -> dict:
    return {"number": 7, "title": title, "body": body, "state": "open", **extra}


def _triage(body: str, **kwargs):
    return triage_issue(_issue(body, **kwargs), release_tree("0.34.0"))


# --- names as users write them ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # no organisation, in prose
        (f"Trying eagle3 on Step-3.5-Flash on 8xH200.\n{ERROR}", "Step3p5ForCausalLM"),
        # no separators where the tree has them
        (f"EAGLE-3 with GLM4.7-Flash fails:\n{ERROR}", "Glm4MoeLiteForCausalLM"),
        # a local path with a quantisation suffix, outside any --model flag
        (f"weights live in /srv/ckpt/GLM-4.7-Flash-AWQ-W4A16\n{ERROR}", "Glm4MoeLiteForCausalLM"),
        # a model-hub URL
        (
            f"Model: https://hub.example/zai-org/GLM-4.7-Flash/tree/main\n{ERROR}",
            "Glm4MoeLiteForCausalLM",
        ),
        # only inside the draft's name
        (
            "vllm serve /models/target --speculative-config "
            f'\'{{"method": "eagle3", "model": "someone/EAGLE3-Step-3.5-Flash"}}\'\n{ERROR}',
            "Step3p5ForCausalLM",
        ),
        # only in vLLM's error text, as the model_type
        (f"ValueError: ... (model_type=step3p5) {ERROR}", "Step3p5ForCausalLM"),
        # the class the error names, which the registry files under another key
        (f"{ERROR} (Glm4MoeLiteForCausalLM)", "Glm4MoeLiteForCausalLM"),
    ],
)
def test_names_resolve_to_the_class(body: str, expected: str) -> None:
    result = _triage(body)
    assert (result.outcome, result.architecture) == ("propose", expected), result.reasons


def test_a_name_written_as_words_resolves_only_exactly() -> None:
    result = _triage("could you wire up dflash for the step 3.5 flash model?", title="question")
    assert (result.outcome, result.architecture) == ("propose", "Step3p5ForCausalLM")
    assert spaced_phrases("GLM-4.7-Air-FP8 fails") == []  # one token: no words inside it
    vague = _triage(f"it broke after the upgrade to release 3 of our stack\n{ERROR}")
    assert vague.architecture is None and vague.outcome == "ask"


def test_a_mixture_of_experts_name_picks_the_family_moe_class() -> None:
    result = _triage(f"We serve Qwen2-57B-A14B-Instruct with eagle3.\n{ERROR}")
    assert result.architecture == "Qwen2MoeForCausalLM"
    assert any("mixture of experts" in r for r in result.reasons)


def test_working_models_named_for_contrast_are_set_aside() -> None:
    body = (
        "EAGLE-3 works for Qwen/Qwen3-30B-A3B and meta-llama/Llama-3.1-8B-Instruct, but "
        f"zai-org/GLM-4.7-Flash dies:\n{ERROR}"
    )
    result = _triage(body)
    assert (result.outcome, result.architecture) == ("propose", "Glm4MoeLiteForCausalLM")
    assert any(r.startswith("set aside") for r in result.reasons)


def test_supported_architectures_dump_and_commented_lines_are_noise() -> None:
    dump = "Supported architectures: dict_keys(['LlamaForCausalLM', 'Qwen3MoeForCausalLM'])"
    body = (
        "```\n# vllm serve Qwen/Qwen3-30B-A3B\nvllm serve stepfun-ai/Step-3.5-Flash "
        f'--speculative-config \'{{"method": "eagle3", "model": "/d"}}\'\n```\n'
        f"{ERROR}\n{dump}"
    )
    result = _triage(body)
    assert result.architectures == ("Step3p5ForCausalLM",)
    assert not any("Qwen3" in m or "Llama" in m for m in result.model_mentions)
    assert "Qwen3-30B" not in drop_noise("# vllm serve Qwen/Qwen3-30B-A3B\n")
    assert "### Your current environment" in drop_noise("### Your current environment\n")


def test_a_docker_image_is_not_a_model() -> None:
    body = (
        "docker run --gpus all vllm/vllm-openai:v0.34.0 --model stepfun-ai/Step-3.5-Flash\n"
        f"also tried myorg/vllm-cu128:nightly_0.34 and\ndocker pull myorg/serve-cu129\n{ERROR}"
    )
    result = _triage(body)
    assert result.architecture == "Step3p5ForCausalLM"
    assert not any("vllm" in m or "cu12" in m for m in result.model_mentions)
    assert model_tokens("see vllm/vllm-openai:v0.34.0 and Qwen3-8B") == ["Qwen3-8B"]


@pytest.mark.parametrize(
    ("written", "method"),
    [("eagle-3", "eagle3"), ("EAGLE3", "eagle3"), ("Dflash2", "dflash"), ("dspark", "dspark")],
)
def test_method_spellings(written: str, method: str) -> None:
    assert normalise_method(written) == method
    assert method_request("", f"Please add {written} support for my model.").method == method


# --- three outcomes -----------------------------------------------------------------------------


def test_an_explicit_request_without_the_error_is_ours() -> None:
    result = _triage(
        "Is there any plan to support eagle-3 for Step-3.5-Flash?",
        title="[Feature]: speculative decoding for Step 3.5",
    )
    assert (result.outcome, result.architecture) == ("propose", "Step3p5ForCausalLM")


@pytest.mark.parametrize(
    "body",
    [
        # speculative decoding, a model, but a performance report: not an interface gap
        "EAGLE3 acceptance rate is only 20% on Step-3.5-Flash after 2000 requests; "
        "throughput drops.",
        # an unrelated crash naming a model
        "vllm serve stepfun-ai/Step-3.5-Flash crashes with CUDA out of memory at TP=2.",
        # nothing at all
        "Please help, it does not start.",
    ],
)
def test_unrelated_issues_are_silent_with_no_question(body: str) -> None:
    result = _triage(body)
    assert (result.outcome, result.missing) == ("silent", ())
    assert any(r.startswith("not ours") for r in result.reasons)


def test_an_affirmative_support_sentence_is_not_a_request() -> None:
    assert method_request("", "EAGLE-3 is supported for this model and it works.") is None
    assert method_request("", "EAGLE-3 is not supported for this model.") is not None


def test_ours_but_unknown_model_asks_exactly_one_question() -> None:
    result = _triage(f"vllm serve /data/inhouse-ckpt\n{ERROR}")
    assert result.outcome == "ask" and len(result.missing) == 1
    assert "/data/inhouse-ckpt" in result.missing[0]


def test_closed_issues_are_skipped_unless_reopened() -> None:
    body = f"vllm serve stepfun-ai/Step-3.5-Flash\n{ERROR}"
    closed = _triage(body, state="closed", state_reason="completed")
    assert (closed.outcome, closed.missing) == ("silent", ())
    assert any("closed" in r for r in closed.reasons)
    reopened = _triage(body, state="open", state_reason="reopened")
    assert reopened.outcome == "propose"
    assert "the issue was reopened" in reopened.reasons
    # A snapshot's state may be older than its timeline: the latest event decides.
    events = [{"event": "closed"}, {"event": "labeled"}, {"event": "reopened"}]
    assert _triage(body, state="closed", events=events).outcome == "propose"
    assert _triage(body, state="open", events=events[:2]).outcome == "silent"


# --- "already fixed" only on every platform variant ---------------------------------------------


def test_a_class_with_the_interface_on_every_variant_is_already_fixed() -> None:
    result = _triage(f"EAGLE3 for moonshotai/Kimi-K3 please, it says\n{ERROR}")
    assert result.architecture == "KimiK3ForConditionalGeneration"
    assert result.outcome == "silent"
    fixed = [r for r in result.reasons if "already fixed" in r]
    assert fixed and "nvidia" in fixed[0] and "amd" in fixed[0]


def test_a_class_fixed_on_one_platform_only_is_still_a_finding() -> None:
    result = _triage(f"ROCm MI300X: vllm serve moonshotai/Kimi-Linear-48B-A3B-Instruct\n{ERROR}")
    assert (result.outcome, result.architecture) == ("propose", "KimiLinearForCausalLM")
    assert any("vllm/models/kimi_k3/amd/linear.py" in r for r in result.reasons)
    assert not any("already fixed" in r for r in result.reasons)


def test_explain_names_the_variant_still_missing() -> None:
    from bot.recipes.eagle3_interface.recipe import RECIPE
    from bot.scan.findings import scan_context

    ctx = scan_context(release_tree("0.34.0"))
    assert RECIPE.explain("KimiLinearForCausalLM", ctx).startswith("not fixed on every platform")
    assert RECIPE.explain("KimiK3ForConditionalGeneration", ctx).startswith("already fixed")


# --- text or multimodal -------------------------------------------------------------------------

SHARED = "google/gemma-3n-E2B-it"  # the example checkpoint of a text and a multimodal class
TEXT, MULTIMODAL = "Gemma3nForCausalLM", "Gemma3nForConditionalGeneration"


def test_words_about_images_pick_the_multimodal_class() -> None:
    result = _triage(f"vllm serve {SHARED} with image_url inputs in every request\n{ERROR}")
    assert result.architectures == (MULTIMODAL,)
    assert result.outcome == "propose"


def test_text_only_serving_picks_the_text_class() -> None:
    result = _triage(f"vllm serve {SHARED} --language-model-only\n{ERROR}")
    assert result.architectures == (TEXT,)


def test_an_even_tie_where_both_lack_the_interface_covers_both() -> None:
    result = _triage(f"vllm serve {SHARED}\n{ERROR}")
    assert result.outcome == "propose"
    assert set(result.architectures) == {TEXT, MULTIMODAL}
    assert result.architecture == result.architectures[0]


def test_an_even_tie_asks_which_when_only_one_lacks_it() -> None:
    lacking = frozenset({TEXT})
    result = triage_issue(
        _issue(f"vllm serve {SHARED}\n{ERROR}"), release_tree("0.34.0"), lacking=lacking
    )
    assert result.outcome == "ask"
    assert len(result.missing) == 1 and "text only" in result.missing[0]


def test_the_checkpoint_known_architecture_breaks_the_tie() -> None:
    # The draft catalogue records which class the shared checkpoint itself declares.
    result = _triage(f"vllm serve stepfun-ai/Step-5-Preview\n{ERROR}")
    assert result.architectures == ("Step5ForCausalLM",)
    assert any("the checkpoint's architecture is Step5ForCausalLM" in r for r in result.reasons)


def test_architectures_are_in_the_json() -> None:
    data = _triage(f"vllm serve {SHARED}\n{ERROR}").to_json()
    assert data["outcome"] == "propose" and len(data["architectures"]) == 2
