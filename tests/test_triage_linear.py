"""The linear-time readers of issue text keep their meaning (issue 25: a hostile issue must
not make triage quadratic; the speed itself is `benchmarks/triage.py --hostile`)."""

from __future__ import annotations

from bot.triage.mentions import _inside, _outside, speculative_spans
from bot.triage.text import drop_noise, is_container_image, method_request, spaced_phrases


def test_an_architectures_dump_is_dropped_and_an_unclosed_one_is_not() -> None:
    dumped = "before Supported architectures: dict_keys(['LlamaForCausalLM', 'X']) after"
    assert drop_noise(dumped) == "before   after"
    unclosed = "dict_keys([ 'A', " * 1000 + "Qwen3-8B"
    assert drop_noise(unclosed) == unclosed  # nothing closes it: nothing is dropped
    far = "dict_keys([" + "x" * 200_001 + "] Qwen3-8B"
    assert drop_noise(far) == far  # the `]` is beyond the dump's bound


def test_overlapping_speculative_configs_are_one_span_and_blanked_once() -> None:
    text = 'a speculative_config={"model": "x/y"} b speculative_config={"model": "z/w"} c'
    spans = speculative_spans(text)
    assert len(spans) == 2
    blanked = _outside(text, spans)
    assert len(blanked) == len(text) and "x/y" not in blanked and "z/w" not in blanked
    assert blanked.startswith("a ") and blanked.endswith(" c") and " b " in blanked
    assert _inside(text.index("x/y"), spans) and not _inside(text.index(" b "), spans)
    nested = 'speculative_config={"model": "a/b", speculative_config=("c/d") }'
    merged = speculative_spans(nested)
    assert len(merged) == 1 and _inside(nested.index("c/d"), merged)


def test_a_container_image_on_a_line_longer_than_the_window() -> None:
    line = "docker run --gpus all " + "-e X=1 " * 40 + "vllm/vllm-openai:v0.34.0"
    assert is_container_image(line, line.index("vllm/"), len(line))
    long_prose = "word " * 20_000 + "org/Model-7B"
    assert not is_container_image(long_prose, long_prose.index("org/"), len(long_prose))


def test_the_request_sentence_and_spaced_names_are_found_past_a_flood() -> None:
    flood = "a\n" * 50_000 + "x. " * 10_000
    request = method_request("", flood + "Please add EAGLE-3 support for Step 3.5 Flash.")
    assert request is not None and request.sentence.startswith("Please add EAGLE-3 support")
    assert "Step-3.5-Flash" in spaced_phrases(flood + "we run Step 3.5 Flash here\n")


def test_yaml_speculative_blocks_end_where_their_indentation_ends() -> None:
    text = (
        "engine:\n  model: a/target\n  speculative_config:\n    method: eagle3\n"
        "    model: d/draft\n  max_model_len: 8192\n"
    )
    spans = speculative_spans(text)
    assert len(spans) == 1
    assert _inside(text.index("d/draft"), spans) and not _inside(text.index("a/target"), spans)
    assert not _inside(text.index("max_model_len"), spans)
    flood = "speculative_config:\n" * 20_000 + "  model: d/draft\n"
    assert speculative_spans(flood) == [(len(flood) - 37, len(flood) - 1)]  # the last key only
    prose = "we set speculative_config:\n  model: x/y\n"  # a key inside a sentence is no YAML
    assert speculative_spans(prose) == []
