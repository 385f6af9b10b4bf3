"""Triage of issue text against real vLLM trees: names, signatures, drafts, hostile input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.drafts import DraftCatalogue, load_catalogue
from bot.scan.findings import scan_context
from bot.tree.fetch import release_tree
from bot.tree.known_models import load_known_models
from bot.triage.issue import triage_issue
from bot.triage.names import core_name
from bot.triage.thread import MAX_PART_CHARS
from bot.triage_outcome import THRESHOLD

pytestmark = pytest.mark.vllm_tree

EXAMPLE = Path(__file__).resolve().parents[1] / "bot" / "data" / "example_issue.json"
ERROR = "RuntimeError: Model does not support EAGLE3 interface"


def _issue(body: str, title: str = "[Bug]: crash with speculative decoding", **extra) -> dict:
    return {"number": 1, "title": title, "body": body, "html_url": "https://x/1", **extra}


def _serve(name: str) -> dict:
    return _issue(
        f"```\nvllm serve {name} --speculative-config "
        f'\'{{"method": "eagle3", "model": "/d/draft"}}\'\n{ERROR}\n```'
    )


@pytest.mark.parametrize("version", ["0.23.0", "0.34.0"])
def test_example_issue(version: str) -> None:
    result = triage_issue(json.loads(EXAMPLE.read_text()), release_tree(version))
    assert result.architecture == "Qwen3NextForCausalLM"
    assert result.method == "eagle3"
    assert result.confident and result.missing == ()
    assert "/model-download/Qwen3-Next-80B-A3B-Instruct-FP8" in result.model_mentions
    assert result.draft == "z-lab/Qwen3-Coder-Next-DFlash"
    assert any("Qwen/Qwen3-Next-80B-A3B-Instruct" in r for r in result.reasons)
    if version == "0.23.0":
        assert result.crash_site.startswith("vllm/v1/worker/gpu_model_runner.py:")
        assert "aux_hidden_state_outputs" in result.signature["message_prefix"]
    else:
        assert result.crash_site == "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:19"
    assert result.to_json()["confident"] is True


NAMES = [
    # (as written in an issue, expected architecture or None when the bot must ask)
    ("/model-download/Qwen3-Next-80B-A3B-Instruct-FP8", "Qwen3NextForCausalLM"),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen3NextForCausalLM"),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "Qwen3NextForCausalLM"),
    ("RedHatAI/Qwen3-Next-80B-A3B-Instruct-NVFP4", "Qwen3NextForCausalLM"),
    ("/data/Qwen3-Coder-Next-FP8", "Qwen3NextForCausalLM"),  # via the draft catalogue
    ("~/models/Qwen3-30B-A3B-Instruct-2507-AWQ", "Qwen3MoeForCausalLM"),
    ("meta-llama/Llama-3.1-8B-Instruct", "LlamaForCausalLM"),
    ("/mnt/Meta-Llama-3.1-70B-Instruct-GPTQ-Int4", "LlamaForCausalLM"),
    ("deepseek-ai/DeepSeek-V3", "DeepseekV3ForCausalLM"),
    ("./gemma-3-27b-it-qat", "Gemma3ForConditionalGeneration"),
    ("Qwen3NextForCausalLM", "Qwen3NextForCausalLM"),
    ("/models/my-finetune", None),
    ("acme-labs/Zorblax-9-FP8", None),
    # a known name with a word added, the version kept: GLM-4.5-Air is a GLM-4.5
    ("zai-org/GLM-4.5-Air-FP8", "Glm4MoeForCausalLM"),
    # versions written `3_5`, `3.5`: not the `3` family's class
    ("nm-testing/Phi-3.5-MoE-instruct-FP8", "PhiMoEForCausalLM"),
    ("/models/InternVL3_5-38B", "InternVLChatModel"),
]


@pytest.mark.parametrize(("name", "expected"), NAMES)
@pytest.mark.parametrize("version", ["0.23.0", "0.34.0"])
def test_model_names_map_to_architectures(version: str, name: str, expected: str | None) -> None:
    result = triage_issue(_serve(name), release_tree(version))
    if expected is None:
        assert not result.confident
        assert result.architecture is None
        assert any(name in question for question in result.missing)
    else:
        assert (result.architecture, result.confident) == (expected, True)


def test_ambiguous_names_score_down_and_ask_which() -> None:
    # Step-3.6 is no release the tree knows: its family's 3.5 and 3.7 are different classes,
    # and neither is chosen for a version the user did not write.
    result = triage_issue(_serve("stepfun-ai/Step-3.6-Flash"), release_tree("0.34.0"))
    assert result.outcome == "ask" and result.confidence < THRESHOLD
    assert {result.architecture, *result.alternatives} == {
        "Step3p5ForCausalLM",
        "Step3p7ForConditionalGeneration",
    }
    assert any(r.startswith("other candidate architectures") for r in result.reasons)


def test_classes_that_already_have_the_interface_are_not_ours() -> None:
    result = triage_issue(
        _serve("mistralai/Mistral-Small-3.1-24B-Instruct-2503"), release_tree("0.34.0")
    )
    assert result.outcome == "silent" and result.missing == ()
    assert any(r.startswith("not ours: already fixed") for r in result.reasons)


def test_a_release_the_tree_does_not_list_is_asked_about_not_called_fixed() -> None:
    # Mistral-Small-3.2 matches the 3.1 checkpoint's class (which has the interface) only by
    # major version: nothing-to-fix would be a guess, so the bot asks the one question.
    result = triage_issue(
        _serve("mistralai/Mistral-Small-3.2-24B-Instruct-2506"), release_tree("0.34.0")
    )
    assert result.outcome == "ask"
    assert result.missing == (
        "Can you confirm your model's config.json `architectures` is "
        "`Mistral3ForConditionalGeneration`?",
    )
    assert not any(r.startswith("not ours") for r in result.reasons)


def test_nothing_to_go_on_is_not_ours_and_stays_silent() -> None:
    result = triage_issue(_issue("It crashes. Please help."), release_tree("0.34.0"))
    assert (result.architecture, result.confidence, result.signature) == (None, 0.0, None)
    assert (result.outcome, result.missing) == ("silent", ())
    assert any(r.startswith("not ours") for r in result.reasons)


def test_our_error_without_a_model_asks_one_question_naming_what_is_missing() -> None:
    result = triage_issue(_issue(f"It crashes:\n{ERROR}"), release_tree("0.34.0"))
    assert result.outcome == "ask"
    assert result.missing == (
        "Which model were you serving (the `--model` argument), and which model architecture "
        "(config.json `architectures`) does it use?",
    )


def test_public_draft_in_the_issue_is_kept_and_names_its_target() -> None:
    body = (
        "python -m vllm.entrypoints.openai.api_server --model /srv/ckpt "
        '--speculative-config \'{"method": "dflash", "model": "z-lab/Qwen3-Coder-Next-DFlash"}\''
    )
    result = triage_issue(_issue(body), release_tree("0.34.0"))
    assert result.draft == "z-lab/Qwen3-Coder-Next-DFlash"
    assert result.method == "dflash"
    assert result.architecture == "Qwen3NextForCausalLM"
    assert "z-lab/Qwen3-Coder-Next-DFlash" not in result.model_mentions


def test_no_draft_for_the_architecture_is_explained() -> None:
    empty = DraftCatalogue(())
    result = triage_issue(_serve("deepseek-ai/DeepSeek-V3"), release_tree("0.34.0"), empty)
    assert result.draft is None
    assert any("no public draft model for DeepseekV3ForCausalLM" in r for r in result.reasons)


def test_comments_are_read() -> None:
    issue = _issue(
        f"{ERROR}",
        comments_list=[
            {"body": "I use `--model Qwen/Qwen3-Next-80B-A3B-Instruct`", "user": {"login": "u"}}
        ],
    )
    result = triage_issue(issue, release_tree("0.34.0"))
    assert result.architecture == "Qwen3NextForCausalLM"


# --- hostile text ---------------------------------------------------------------------------------


def test_names_inside_html_comments_are_ignored() -> None:
    body = (
        "<!-- vllm serve deepseek-ai/DeepSeek-V3 -->\nvllm serve Qwen/Qwen3-Next-80B-A3B-Instruct\n"
    )
    result = triage_issue(_issue(body + ERROR), release_tree("0.34.0"))
    assert result.architecture == "Qwen3NextForCausalLM"
    assert not any("DeepSeek" in m for m in result.model_mentions)
    unterminated = triage_issue(
        _issue("<!-- vllm serve deepseek-ai/DeepSeek-V3"), release_tree("0.34.0")
    )
    assert unterminated.architecture is None


def test_bidi_controls_are_stripped_before_matching() -> None:
    name = "Qwen/Qwen3-\u202eNext\u202c-80B-A3B-\u2066Instruct\u2069"
    result = triage_issue(_serve(name), release_tree("0.34.0"))
    assert result.architecture == "Qwen3NextForCausalLM"
    assert not any(ch in json.dumps(result.to_json(), ensure_ascii=False) for ch in "\u202e\u2066")


def test_markup_shell_and_templates_do_not_leak_into_the_result() -> None:
    body = (
        "vllm serve $(rm -rf ~)`reboot` ; echo {{ config.__class__ }} {% for x in y %}\n"
        "<script>alert(1)</script><img src=x onerror=alert(1)>\n"
        "--model <b>Qwen/Qwen3-Next-80B-A3B-Instruct</b>\n" + ERROR
    )
    result = triage_issue(_issue(body, title="{{ 7*7 }} <script>"), release_tree("0.34.0"))
    dumped = json.dumps(result.to_json())
    for dangerous in ("<script", "{{", "{%", "$(", "`reboot`", "onerror"):
        assert dangerous not in " ".join(result.model_mentions)
    assert "<script" not in dumped and "{{" not in dumped
    assert result.architecture == "Qwen3NextForCausalLM"


def test_a_megabyte_body_is_capped_and_said_so() -> None:
    filler = ("lorem ipsum <b>x</b> <!-- y --> " * 40_000)[: 1024 * 1024]
    body = "vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct\n" + ERROR + "\n" + filler
    body += "\nvllm serve deepseek-ai/DeepSeek-V3\n"  # beyond the cap: not read
    many = [{"body": filler, "user": {"login": "u"}}] * 60
    root = release_tree("0.34.0")
    triage_issue(_issue("warm-up"), root)  # loads the tree's facts once
    result = triage_issue(_issue(body, comments_list=many), root)
    assert result.architecture == "Qwen3NextForCausalLM" and result.confident
    assert any(f"is longer than {MAX_PART_CHARS} characters" in r for r in result.reasons)
    assert any("only the first 50 of 60 comments" in r for r in result.reasons)


def test_non_string_fields_are_tolerated() -> None:
    issue = {"number": 2, "title": None, "body": 12, "comments_list": [None, {"body": ["x"]}]}
    assert triage_issue(issue, release_tree("0.34.0")).architecture is None


def test_core_name_strips_variant_suffixes() -> None:
    assert core_name("Qwen3-Next-80B-A3B-Instruct-FP8") == "qwen3-next-80b-a3b"
    assert core_name("Qwen3-30B-A3B-Thinking-2507-AWQ") == "qwen3-30b-a3b"
    assert core_name("Llama-2-7b-chat-hf") == "llama-2-7b"
    assert core_name("Meta-Llama-3.1-8B-Instruct-W4A16") == "llama-3.1-8b"


def test_known_models_give_ids_and_entry_kwargs() -> None:
    known = load_known_models(release_tree("0.23.0"))
    assert "Qwen/Qwen3-Next-80B-A3B-Instruct" in known.hf_ids("Qwen3NextForCausalLM")
    assert known.entry_kwargs("Qwen3NextForCausalLM")["min_transformers_version"] == "4.56.3"
    newest = load_known_models(release_tree("0.34.0"))
    assert "Qwen/Qwen3-Next-80B-A3B-Instruct" in newest.doc_examples["Qwen3NextForCausalLM"]
    spec = [e for e in newest.examples if e.arch == "DFlashQwen3NextDraftModel"]
    assert spec[0].kwargs["speculative_model"] == "z-lab/Qwen3-Coder-Next-DFlash"
    assert spec[0].section == "DFlash"


def test_default_catalogue_is_the_shipped_one() -> None:
    assert load_catalogue(include_user=False).find("z-lab/Qwen3-Coder-Next-DFlash") is not None


def test_triage_reads_the_scan_it_is_given_not_a_second_one_of_the_path() -> None:
    # The path is 0.34.0, where Qwen3-Next has the interface; the scan handed in is 0.23.0's,
    # where it lacks it. What triage says about the interface comes from the scan it is given.
    issue = _serve("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert triage_issue(issue, release_tree("0.34.0")).outcome == "silent"
    given = scan_context(release_tree("0.23.0"))
    result = triage_issue(issue, release_tree("0.34.0"), scan=given)
    assert (result.outcome, result.architecture) == ("propose", "Qwen3NextForCausalLM")
