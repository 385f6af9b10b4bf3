"""What a GPU run must be, on GitHub's word, before ``bot publish`` lets a PR leave draft.

The plan directory names a ``gpu-verify`` run (its id and request id); the artifact could name
any green run. So the run is read from GitHub and must be the bot repository's gpu-verify
workflow, dispatched (``workflow_dispatch``) after the commit it tests was made, finished with
success, and its title, which GitHub renders from the dispatch inputs (``run-name:`` in
``gpu-verify.yml``), must be exactly the one for

* the request id the plan records (a fresh uuid4: 32 hex digits);
* the head of the plan's branch as this run pushed it (the fail-before run: its first parent);
* the smoke target and the GPU tests re-derived here, never read from the plan: the class the
  declaring edit changes (:func:`bot.verify.smoke_target.target_of`, whose edits publish's
  rules have checked) and the registry test of the one entry the patch adds.

The newest completed run of this commit decides: a later failed or cancelled run takes the
PR back to draft.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from bot.errors import BotError
from bot.github.workflows import GPU_WORKFLOW as WORKFLOW_FILE
from bot.plan import Plan

_REQUEST_ID = re.compile(r"^[0-9a-f]{32}$")
# Runner and GitHub clocks differ a little; a run cannot predate the commit by more than this.
_CLOCK_SKEW = timedelta(minutes=2)


class RunReader(Protocol):
    def get_workflow_run(self, repo: str, run_id: int) -> dict[str, Any]: ...

    def find_workflow_run(
        self, repo: str, workflow_file: str, created_after: datetime, marker: str | None
    ) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class TestedCommit:
    """What a GPU run must have tested: re-derived at publish, never read from the plan."""

    head: str  # the plan branch's head, as this run pushed it
    first_parent: str  # the base the fix was built on (the fail-before run's commit)
    made_at: datetime  # the head commit's committer date
    smoke_target: str  # module:Class, or "" when the recipe has no smoke check
    gpu_tests: tuple[str, ...]

    def title(self, request_id: str, sha: str) -> str:
        """``gpu-verify.yml``'s ``run-name:`` for these inputs (the two must agree)."""
        return run_title(request_id, sha, self.smoke_target, " ".join(self.gpu_tests))


def run_title(request_id: str, sha: str, smoke_target: str, tests: str) -> str:
    return f"gpu-verify {request_id} {sha} {smoke_target} -- {tests}"


def gpu_tests_of(registry_before: str | None, registry_after: str | None) -> tuple[str, ...]:
    """The GPU test of the one registry entry the patch adds (none when it adds none)."""
    from bot.codemods.base import CodemodRefused
    from bot.recipes.registry_edit import only_one_new_entry
    from bot.recipes.registry_plan import gpu_test_for

    if registry_before is None or registry_after is None or registry_before == registry_after:
        return ()
    try:
        key, _call = only_one_new_entry(registry_before, registry_after)
    except (CodemodRefused, SyntaxError, ValueError):
        return ()
    return (gpu_test_for(key),) if isinstance(key, str) and key.isprintable() else ()


def smoke_target_of(plan: Plan) -> str:
    from bot.verify.smoke_target import SmokeTarget, target_of

    target = target_of(plan)
    return str(target) if isinstance(target, SmokeTarget) else ""


def confirmed(gpu: dict[str, Any], tested: TestedCommit, client: RunReader, bot_repo: str) -> bool:
    """Whether GitHub confirms the dispatch result ``gpu`` (as ``bot verify`` recorded it)."""
    request_id = gpu.get("request_id")
    if not tested.gpu_tests or not (isinstance(request_id, str) and _REQUEST_ID.match(request_id)):
        return False
    after = _run(client, bot_repo, gpu.get("run_id"))
    if not _is(after, tested, tested.title(request_id, tested.head), "success"):
        return False
    before = gpu.get("before")
    if isinstance(before, dict) and before.get("run_id") is not None:
        # A recorded fail-before run must be one of this plan's, on the base, and have failed.
        ran = _run(client, bot_repo, before.get("run_id"))
        if not _is(ran, tested, None, "failure"):
            return False
        title = str(ran.get("display_title") or "") if ran else ""
        if not title.startswith("gpu-verify ") or f" {tested.first_parent} " not in title:
            return False
    # The newest completed run of this commit decides (a later failure puts it back to draft).
    newest = _newest_for(client, bot_repo, tested)
    return newest is None or newest.get("conclusion") == "success"


def _run(client: RunReader, bot_repo: str, run_id: object) -> dict[str, Any] | None:
    if not isinstance(run_id, int) or isinstance(run_id, bool):
        return None
    try:
        return client.get_workflow_run(bot_repo, run_id)
    except BotError:
        return None


def _is(
    run: dict[str, Any] | None, tested: TestedCommit, title: str | None, conclusion: str
) -> bool:
    if run is None:
        return False
    created = _timestamp(run.get("created_at"))
    return (
        run.get("status") == "completed"
        and run.get("conclusion") == conclusion
        and run.get("event") == "workflow_dispatch"
        and str(run.get("path") or "").endswith(f"/{WORKFLOW_FILE}")
        and (title is None or run.get("display_title") == title)
        and created is not None
        and created >= tested.made_at - _CLOCK_SKEW
    )


def _newest_for(client: RunReader, bot_repo: str, tested: TestedCommit) -> dict[str, Any] | None:
    """The newest completed gpu-verify run that tested ``tested.head``, if any."""
    try:
        run = client.find_workflow_run(
            bot_repo, WORKFLOW_FILE, tested.made_at - _CLOCK_SKEW, f" {tested.head} "
        )
    except BotError:
        return None
    return run if run is not None and run.get("status") == "completed" else None


def _timestamp(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None
