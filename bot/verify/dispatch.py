"""The GPU test on the self-hosted runner: dispatch gpu-verify.yml, wait (bounded), collect."""

from __future__ import annotations

import io
import time
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from bot.errors import BotError
from bot.github.workflows import GPU_WORKFLOW
from bot.verify.junit import TestRun, parse_junit

WORKFLOW_FILE = GPU_WORKFLOW
JUNIT_ARTIFACT = "junit"
# GitHub's `created` filter has second resolution and runner clocks drift; the request id,
# not the time, is what identifies our run.
_CLOCK_SKEW = timedelta(minutes=2)


class ActionsClient(Protocol):
    def dispatch_workflow(
        self, repo: str, workflow_file: str, ref: str, inputs: dict[str, str]
    ) -> None: ...

    def workflow_runs(
        self, repo: str, workflow_file: str, created_after: datetime, marker: str | None
    ) -> list[dict[str, Any]]: ...

    def get_workflow_run(self, repo: str, run_id: int) -> dict[str, Any]: ...

    def download_run_artifact(self, repo: str, run_id: int, name: str) -> bytes: ...


@dataclass(frozen=True)
class PollSettings:
    interval: float = 30.0
    timeout: float = 3 * 3600.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)


@dataclass(frozen=True)
class GpuTarget:
    bot_repo: str  # where gpu-verify.yml lives and runs
    workflow_ref: str  # the bot repository's branch to run the workflow from
    repository: str  # the vLLM repository holding the commit to test
    sha: str
    branch: str  # the bot's branch the plan publishes: the runner's guard tests only its commits
    smoke_target: str = ""  # module:Class for the runner's CPU smoke check before the GPU tests
    # "<target> <method>=<draft>": the registry entry's real checkpoints for the engine check
    engine_checkpoints: str = ""


@dataclass
class PendingRun:
    request_id: str
    created_after: datetime
    target: GpuTarget
    run: dict[str, Any] | None = None


def start_gpu_run(client: ActionsClient, target: GpuTarget, node_ids: list[str]) -> PendingRun:
    request_id = uuid.uuid4().hex
    created_after = datetime.now(UTC) - _CLOCK_SKEW
    inputs = {
        "repository": target.repository,
        "sha": target.sha,
        "branch": target.branch,
        "tests": " ".join(node_ids),
        "request_id": request_id,
    }
    if target.smoke_target:
        inputs["smoke_target"] = target.smoke_target
    if target.engine_checkpoints:
        inputs["engine_checkpoints"] = target.engine_checkpoints
    client.dispatch_workflow(target.bot_repo, WORKFLOW_FILE, target.workflow_ref, inputs)
    return PendingRun(request_id, created_after, target)


def wait_for_run(
    client: ActionsClient, pending: PendingRun, poll: PollSettings, deadline: float
) -> dict[str, Any]:
    """Poll until the run completes or ``deadline`` (on ``poll.clock``) passes; a result dict.

    The run is the one on the branch the workflow was dispatched from that carries the request
    id; a run from another branch is never taken (anyone who can dispatch can copy the visible
    id), and two on that branch are no result at all."""
    repo = pending.target.bot_repo
    while True:
        if pending.run is None:
            mine = _runs_of(client, pending)
            if len(mine) > 1:
                return _result(pending, "error", _AMBIGUOUS.format(len(mine)))
            pending.run = mine[0] if mine else None
        else:
            pending.run = client.get_workflow_run(repo, int(pending.run["id"]))
        if pending.run is not None and pending.run.get("status") == "completed":
            count = len(_runs_of(client, pending))
            if count > 1:
                return _result(pending, "error", _AMBIGUOUS.format(count))
            return _collect(client, pending)
        remaining = deadline - poll.clock()
        if remaining <= 0:
            return _timed_out(pending, poll)
        poll.sleep(min(poll.interval, remaining))


_AMBIGUOUS = "{} runs of the dispatched branch carry this request id: none is taken as the result"


def _runs_of(client: ActionsClient, pending: PendingRun) -> list[dict[str, Any]]:
    """The runs of the dispatched branch whose title carries the request id."""
    branch = pending.target.workflow_ref.removeprefix("refs/heads/")
    runs = client.workflow_runs(
        pending.target.bot_repo, WORKFLOW_FILE, pending.created_after, f" {pending.request_id} "
    )
    return [run for run in runs if run.get("head_branch") == branch]


def _result(pending: PendingRun, conclusion: str, excerpt: str) -> dict[str, Any]:
    run = pending.run or {}
    return {
        "mode": "dispatch",
        "conclusion": conclusion,
        "run_url": run.get("html_url"),
        "run_id": run.get("id"),
        "request_id": pending.request_id,
        "repository": pending.target.repository,
        "sha": pending.target.sha,
        "log_excerpt": excerpt,
    }


def _timed_out(pending: PendingRun, poll: PollSettings) -> dict[str, Any]:
    if pending.run is None:
        detail = f"no run of {WORKFLOW_FILE} appeared within {poll.timeout:g}s of the dispatch"
    else:
        status = pending.run.get("status") or "unknown"
        detail = f"the run was still {status} after {poll.timeout:g}s; it was not cancelled"
    return _result(pending, "timed_out", detail)


def _collect(client: ActionsClient, pending: PendingRun) -> dict[str, Any]:
    assert pending.run is not None
    conclusion = str(pending.run.get("conclusion") or "unknown")
    try:
        archive = client.download_run_artifact(
            pending.target.bot_repo, int(pending.run["id"]), JUNIT_ARTIFACT
        )
    except BotError as exc:
        return _result(pending, conclusion, f"no JUnit report: {exc}")
    report = junit_from_zip(archive)
    result = _result(pending, conclusion, report.log_excerpt)
    result["tests"] = {
        "tests": report.tests,
        "failures": report.failures,
        "errors": report.errors,
        "skipped": report.skipped,
    }
    return result


def junit_from_zip(archive: bytes) -> TestRun:
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as bundle:
            names = [n for n in bundle.namelist() if not n.endswith("/")]
            if not names:
                return TestRun(conclusion="error", log_excerpt="the JUnit artifact is empty")
            # One report per run; bounded read so a hostile archive cannot exhaust memory.
            with bundle.open(names[0]) as handle:
                data = handle.read(16 * 1024 * 1024)
    except zipfile.BadZipFile:
        return TestRun(conclusion="error", log_excerpt="the JUnit artifact is not a zip archive")
    return parse_junit(data)
