"""The scan on real vLLM releases: the seed gap before and after upstream's fix."""

from __future__ import annotations

import pytest

from bot.pipeline import scan
from bot.tree.fetch import release_tree

pytestmark = pytest.mark.vllm_tree

POOLING_WORDS = ("Embedding", "Reward", "Rank", "SequenceClassification", "TokenClassification")


@pytest.fixture(scope="module")
def findings_by_version() -> dict[str, list[dict]]:
    return {v: [f.to_json() for f in scan(release_tree(v)).findings] for v in ("0.23.0", "0.24.0")}


def interface_gaps(findings: list[dict]) -> set[tuple[str, str]]:
    return {(f["class"], f["path"]) for f in findings if f["recipe"] == "eagle3-interface"}


def test_seed_gap_is_found_before_upstreams_fix(findings_by_version: dict) -> None:
    seed = ("Qwen3NextForCausalLM", "vllm/model_executor/models/qwen3_next.py")
    assert seed in interface_gaps(findings_by_version["0.23.0"])
    finding = next(f for f in findings_by_version["0.23.0"] if f["class"] == seed[0])
    evidence = finding["evidence"]
    assert evidence["decoder"]["name"] == "Qwen3NextModel"
    assert evidence["mixin"]["name"] == "Qwen3NextModel"
    assert evidence["decoder"]["attribute"] == "self.model"
    assert evidence["aux"]["helper_lines"]
    assert evidence["sibling"] is not None
    assert "Qwen3NextForCausalLM" in finding["architectures"]


def test_seed_gap_is_gone_after_upstreams_fix(findings_by_version: dict) -> None:
    assert "Qwen3NextForCausalLM" not in {
        c for c, _ in interface_gaps(findings_by_version["0.24.0"])
    }


def test_no_pooling_models_reported(findings_by_version: dict) -> None:
    for findings in findings_by_version.values():
        for finding in findings:
            assert not any(word in finding["class"] for word in POOLING_WORDS), finding["class"]


def test_newest_release_gaps_include_a_platform_variant() -> None:
    findings = [f.to_json() for f in scan(release_tree("0.34.0")).findings]
    gaps = interface_gaps(findings)
    # The amd variant of KimiLinearForCausalLM lacks what the nvidia variant declares.
    assert ("KimiLinearForCausalLM", "vllm/models/kimi_k3/amd/linear.py") in gaps
    assert ("KimiLinearForCausalLM", "vllm/models/kimi_k3/nvidia/model.py") not in gaps
    kimi = next(f for f in findings if f["path"] == "vllm/models/kimi_k3/amd/linear.py")
    assert kimi["evidence"]["sibling"]["path"] == "vllm/models/kimi_k3/nvidia/model.py"
