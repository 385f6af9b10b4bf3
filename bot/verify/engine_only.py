"""`bot engine PLAN_DIR...`: only the engine check, for a batch of plans in one engine process.

Each plan's model files are copied from a scratch worktree before and after its patch (only a
patch the confinement check accepts is run); then one harness process per engine version runs
them all. The engine check goes into each plan's recorded verification: beside the other
checks when they were recorded for this very patch (the evidence check and the verdict are
derived again), else alone, in a verification that is not passed (run `bot verify`).
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from bot.content_hash import patch_hash
from bot.errors import BotError
from bot.plan import READY, PlanDir, read_plan_dir
from bot.subprocess_env import refuse_beside_credentials
from bot.tree.worktree import scratch_worktree
from bot.verify import runtime, scratch, smoke
from bot.verify.checks import Check
from bot.verify.confine import confinement_check
from bot.verify.engine_env import Engine
from bot.verify.evidence import evidence_check
from bot.verify.verification import GpuRun


def engine_plans(
    plan_dirs: list[Path],
    journal: bool = False,
    engine: Engine | None = None,
    core: Path | None = None,
) -> list[Check]:
    """The engine check of every plan (recorded in its plan.json), in order; ``engine``
    overrides the one each plan's release gets (:func:`bot.verify.engine_env.engine_for`);
    ``core``, a core plan made on the engine's own release, is applied to a copy of the
    engine's package first (:mod:`bot.verify.core_overlay`): the plans run on the fixed core."""
    refuse_beside_credentials("bot engine")
    loaded = [read_plan_dir(plan_dir) for plan_dir in plan_dirs]
    for item in loaded:
        if item.plan.status != READY or not item.patch.strip():
            raise BotError(f"{item.plan.class_name or 'a plan'}: not a ready plan with a patch")
    core_plan = read_plan_dir(core) if core is not None else None
    if core_plan is not None and (core_plan.plan.status != READY or not core_plan.patch.strip()):
        raise BotError("--with-core: not a ready core plan with a patch")
    stages = [_prepared(item, engine) for item in loaded]
    with tempfile.TemporaryDirectory(prefix="bot-engine-") as work:
        if core_plan is not None:
            _with_core(stages, core_plan, Path(work) / "core")
        checks = runtime.run_engine_batch(stages, Path(work))
    for plan_dir, item, check in zip(plan_dirs, loaded, checks, strict=True):
        _record(plan_dir, item, check, journal)
    return checks


def _with_core(stages: list[runtime.RuntimeStage], core: PlanDir, work: Path) -> None:
    """Every stage's engine runs the engine's package with the core plan's patch."""
    from bot.verify.core_overlay import core_overlay

    overlays: dict[str, Engine] = {}
    name = f"{core.plan.recipe}:{core.plan.class_name} (proposed on {core.plan.vllm_version})"
    for stage in stages:
        if stage.engine is None:
            continue
        version = stage.engine.version
        if core.plan.vllm_version != version:
            raise BotError(
                f"--with-core: the core plan was made on vLLM {core.plan.vllm_version}, the "
                f"engine runs {version}: make it on the engine's release"
            )
        if version not in overlays:
            overlay = core_overlay(stage.engine, core.patch, work / version, name)
            overlays[version] = dataclasses.replace(stage.engine, core=overlay)
        stage.engine = dataclasses.replace(overlays[version], release=stage.engine.release)


def _prepared(loaded: PlanDir, engine: Engine | None = None) -> runtime.RuntimeStage:
    plan = loaded.plan
    stage = runtime.RuntimeStage(plan, None, "", smoke_target=smoke.target_of(plan))
    if engine is not None and isinstance(stage.smoke_target, smoke.SmokeTarget):
        stage.engine, stage.engine_case = engine, ""
    else:
        stage.engine_case = stage.prepare_engine(True)
    if stage.engine is None:
        return stage
    repo_path = scratch.resolve_repo(plan.repo_path, plan.vllm_version, plan.base_commit)
    with (
        tempfile.TemporaryDirectory(prefix="bot-engine-patch-") as tmp,
        scratch_worktree(repo_path, plan.base_commit) as tree,
    ):
        patch_file = Path(tmp) / "patch.diff"
        patch_file.write_text(loaded.patch, encoding="utf-8")
        files = scratch.touched_files(tree, patch_file)
        confined = confinement_check(loaded, tree, patch_file, files)
        if confined.passed is not True:
            stage.engine_case = f"the patch is not run: {confined.detail}"
            return stage
        stage.engine_before(tree, patch_file)
        failure = scratch.apply_patch(tree, patch_file)
        if failure:
            stage.engine_case = f"the patch does not apply: {failure}"
            return stage
        stage.engine_after(tree)
    return stage


def _record(plan_dir: Path, loaded: PlanDir, check: Check, journal: bool) -> None:
    from bot.verify.run import _record as record_verification
    from bot.verify.run import _verdict
    from bot.verify.verification import runner_identity

    recorded = loaded.plan.verification
    digest = patch_hash(loaded.patch)
    if recorded is not None and recorded.patch_hash == digest:
        kept = [c for c in recorded.checks if c.name not in ("engine", "evidence")]
        checks = [*kept, check]
        if (evidence := evidence_check(loaded.plan.recipe, checks)) is not None:
            checks.append(evidence)
        gpu = recorded.gpu or GpuRun("skip", "skipped")
        ok = all(c.passed is not False for c in checks)
        # One person ran every check only if the recorded ones were theirs too.
        now = runner_identity()
        ran_by = now if recorded.ran_by == now else None
        asks_gpu = bool(loaded.plan.tests.get("gpu"))
        verification = _verdict(checks, gpu, ok, digest, ran_by, asks_gpu=asks_gpu)
    else:
        verification = dataclasses.replace(
            _verdict([check], GpuRun("skip", "not_run"), True, digest, runner_identity()),
            passed=False,
            local_passed=False,
            message="only the engine check ran; run `bot verify` for the rest",
        )
    record_verification(plan_dir, loaded, verification, journal)
