"""Triage of releases the tree does not list and of the forms a served model is given in
(issue 23's follow-up). Synthetic issue texts against vLLM 0.34.0; the releases
named are made up, so the tree's examples cannot list them."""

from __future__ import annotations

import pytest

from bot.tree.fetch import release_tree
from bot.triage.issue import triage_issue
from bot.triage.names import major_words
from bot.triage.release import loads_family_class, written_major

ERROR = "RuntimeError: Model does not support EAGLE3 interface"
# A model named only in prose that lacks the interface too: it competes unless the served
# model is recognised as served.
CONTRAST = "Earlier we ran mistralai/Mixtral-8x7B-Instruct-v0.1 the same way.\n"


def _triage(body: str, title: str = "[Bug]: eagle3 dies at startup"):
    issue = {"number": 9, "title": title, "body": body, "state": "open"}
    return triage_issue(issue, release_tree("0.34.0"))


def _serve(name: str):
    return _triage(
        f"```\nvllm serve {name} --speculative-config "
        f'\'{{"method": "eagle3", "model": "/d/draft"}}\'\n{ERROR}\n```'
    )


# --- the family's class naming, without a tree ---------------------------------------------------


def test_the_major_version_written_is_read_from_the_first_minor_version() -> None:
    assert written_major("internlm2.5") == "2"
    assert written_major("acme-widget-mini-1.7") == "1"
    assert written_major("deepseek-v2.5") == "2"
    assert written_major("gemma-2") is None  # no minor version: the family alone


@pytest.mark.parametrize(
    ("family", "archs", "known", "expected"),
    [
        # named by the major version alone, no release with a class of its own
        ("widget2.5", ["Widget2ForCausalLM"], ["Widget2ForCausalLM", "Widget3ForCausalLM"], True),
        # named by no version
        ("acme-widget-1.7", ["WidgetForCausalLM"], ["WidgetForCausalLM"], True),
        # the family gives a minor release its own class: this one may have one too
        ("widget4.7", ["Widget4ForCausalLM"], ["Widget4ForCausalLM", "Widget4_5_ForCG"], False),
        (
            "widget3.6",
            ["Widget3ForCausalLM"],
            ["Widget3ForCausalLM", "Widget3p5ForCausalLM"],
            False,
        ),
        ("acme-widget-1.7", ["WidgetForCausalLM"], ["WidgetForCausalLM", "Widget1_5Model"], False),
        # the class names another version than the major written
        ("widget3.6", ["Widget3_5ForCausalLM"], ["Widget3_5ForCausalLM"], False),
        ("widget2.5", ["Widget3ForCausalLM"], ["Widget3ForCausalLM"], False),
        # no minor version written: the family alone is never enough
        ("widget2", ["Widget2ForCausalLM"], ["Widget2ForCausalLM"], False),
    ],
)
def test_a_release_loads_its_family_class_only_when_the_naming_says_so(
    family: str, archs: list[str], known: list[str], expected: bool
) -> None:
    assert loads_family_class(family, archs, known) is expected


def test_a_family_written_in_another_word_order_is_one_family() -> None:
    assert major_words("Acme-Widget-Mini-1.7") == major_words("Acme-Widget-1.5-Mini")
    assert major_words("Acme-Widget-Mini-1.7") != major_words("Acme-Widget-2.5-Mini")
    assert major_words("widget2") == ""  # one word: the squashed lookups cover it


# --- on a real tree ------------------------------------------------------------------------------


@pytest.mark.vllm_tree
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("acme/Gemma-2.5-9b-it", "Gemma2ForCausalLM"),  # the class names the major version
        ("acme/Isaac-0.4-2B-Preview", "IsaacForConditionalGeneration"),  # the class names none
        ("acme/Ling-flash-3.2-FP8", "BailingMoeV3ForCausalLM"),  # `Ling-3.0-flash`'s words
    ],
)
def test_a_release_the_tree_does_not_list_is_proposed_for_its_family_class(
    name: str, expected: str
) -> None:
    result = _serve(name)
    assert (result.outcome, result.architectures) == ("propose", (expected,)), result.reasons
    assert any("a release the tree does not list" in r for r in result.reasons)


@pytest.mark.vllm_tree
def test_a_release_of_a_family_with_per_release_classes_is_asked_about() -> None:
    # EXAONE 4.5 has a class of its own in the tree: 4.7 may too.
    result = _serve("acme/EXAONE-4.7-32B-Instruct")
    assert result.outcome == "ask"
    assert not any("a release the tree does not list" in r for r in result.reasons)


@pytest.mark.vllm_tree
def test_a_guessed_release_whose_class_has_the_interface_is_asked_not_called_fixed() -> None:
    # OLMo 2's class declares SupportsEagle3; a 2.5 the tree does not list may be something else.
    result = _serve("acme/Olmo-2.5-7B-Instruct")
    assert result.outcome == "ask" and not result.confident
    assert result.missing == (
        "Can you confirm your model's config.json `architectures` is `Olmo2ForCausalLM`?",
    )
    assert not any(r.startswith("not ours") for r in result.reasons)


# --- the forms a served model is given in --------------------------------------------------------

SERVED = "acme/Gemma-2-9B-It-AWQ"


@pytest.mark.vllm_tree
@pytest.mark.parametrize(
    "command",
    [
        f"args:\n  - --model={SERVED}\n  - --tensor-parallel-size=2\n",
        f"python -m vllm.entrypoints.openai.api_server --model \\\n    {SERVED} --port 8000\n",
        f"python -m sglang_like.launch --model-path {SERVED}\n",
        f'engine:\n  model: "{SERVED}"\n  dtype: bfloat16\n',
        f"models:\n  - model: {SERVED}\n    replicas: 2\n",
        f'curl localhost:8000/v1/completions -d \'{{"model": "{SERVED}", "prompt": "hi"}}\'\n',
        f"INFO non-default args: {{'model': '{SERVED}', 'tensor_parallel_size': 2}}\n",
        f'llm = LLM(model_id="{SERVED}")\n',
    ],
)
def test_the_served_model_is_read_in_every_form_and_outranks_prose(command: str) -> None:
    result = _triage(command + CONTRAST + ERROR)
    assert (result.outcome, result.architectures) == ("propose", ("Gemma2ForCausalLM",))
    assert any(
        "named only outside the serve command: MixtralForCausalLM" in r for r in result.reasons
    )


@pytest.mark.vllm_tree
def test_a_model_key_in_prose_or_under_another_name_is_not_the_served_model() -> None:
    body = (
        "Which model: the big one. Our served_model_name: acme/Gemma-2-9B-It-AWQ\n"
        f"speculative_model: /d/draft\n{CONTRAST}{ERROR}"
    )
    result = _triage(body)
    assert not any("named only outside the serve command" in r for r in result.reasons)
    assert "the" not in result.model_mentions


@pytest.mark.vllm_tree
def test_a_yaml_speculative_block_holds_the_draft_not_the_target() -> None:
    body = (
        f"engine:\n  model: {SERVED}\n  speculative_config:\n    method: eagle3\n"
        f"    model: acme/Mixtral-8x7B-eagle3-head\n    num_speculative_tokens: 3\n"
        f"  max_model_len: 8192\n{ERROR}"
    )
    result = _triage(body)
    assert result.draft == "acme/Mixtral-8x7B-eagle3-head"
    assert result.architectures == ("Gemma2ForCausalLM",)
