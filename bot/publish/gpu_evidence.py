"""What a GPU run must be, on GitHub's word, before ``bot publish`` lets a PR leave draft.

The plan directory names a ``gpu-verify`` run (its id and request id); the artifact could name
any green run. So the run is read from GitHub and must be the bot repository's gpu-verify
workflow, dispatched (``workflow_dispatch``) after the commit it tests was made, finished with
success, and its title, which GitHub renders from the dispatch inputs (``run-name:`` in
``gpu-verify.yml``), must be exactly the one for

* the request id the plan records (a fresh uuid4: 32 hex digits);
* the head of the plan's branch as this run pushed it (the fail-before run: its first parent);
* the smoke target and the GPU tests re-derived here, never read from the plan: the class the
  declaring edit changes (:func:`bot.publish.smoke_target.target_of`, whose edits publish's
  rules have checked) and the registry test of the one entry the patch adds.

Everything about the run is bound to what ``bot verify`` dispatched: a writer of the bot
repository could dispatch gpu-verify.yml from a branch of their own whose workflow reports
success without testing anything, with exactly the plan's inputs (so exactly its title), even
reusing the request id a real run shows. So a run counts only when it ran the bot repository's
*default branch* (its ``head_branch``, and a ``head_sha`` that branch contains, as GitHub
compares them), and it is the only run on that branch carrying the request id. Runs from other
branches count for nothing, in either direction.

The newest completed run of this commit on the default branch decides: a later failed or
cancelled run takes the PR back to draft.
"""

from __future__ import annotations

import ast
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

    def workflow_runs(
        self, repo: str, workflow_file: str, created_after: datetime, marker: str | None
    ) -> list[dict[str, Any]]: ...

    def default_branch(self, repo: str | None = None) -> str: ...

    def branch_contains(self, repo: str, branch: str, sha: str) -> bool: ...


@dataclass(frozen=True)
class TestedCommit:
    """What a GPU run must have tested: re-derived at publish, never read from the plan."""

    head: str  # the plan branch's head, as this run pushed it
    first_parent: str  # the base the fix was built on (the fail-before run's commit)
    made_at: datetime  # the head commit's committer date
    smoke_target: str  # module:Class, or "" when the recipe has no smoke check
    gpu_tests: tuple[str, ...]
    # "<target> <method>=<draft>" of the registry entry the patch adds, or ""
    engine_checkpoints: str = ""

    def title(self, request_id: str, sha: str) -> str:
        """``gpu-verify.yml``'s ``run-name:`` for these inputs (the two must agree)."""
        tests = " ".join(self.gpu_tests)
        return run_title(request_id, sha, self.smoke_target, self.engine_checkpoints, tests)


def run_title(request_id: str, sha: str, smoke_target: str, checkpoints: str, tests: str) -> str:
    return f"gpu-verify {request_id} {sha} {smoke_target} {checkpoints} -- {tests}"


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


def engine_checkpoints_of_patch(registry_before: str | None, registry_after: str | None) -> str:
    """The engine checkpoints of the one registry entry the patch adds: its target (first
    argument), its draft (``speculative_model=``) and the method its key names; "" for none."""
    from bot.codemods.base import CodemodRefused
    from bot.recipes.registry_edit import only_one_new_entry
    from bot.recipes.registry_plan import engine_checkpoints, method_of_key

    if registry_before is None or registry_after is None or registry_before == registry_after:
        return ""
    try:
        key, call = only_one_new_entry(registry_before, registry_after)
    except (CodemodRefused, SyntaxError, ValueError):
        return ""
    target = call.args[0].value if call.args and isinstance(call.args[0], ast.Constant) else None
    draft = next(
        (
            k.value.value
            for k in call.keywords
            if k.arg == "speculative_model" and isinstance(k.value, ast.Constant)
        ),
        None,
    )
    return engine_checkpoints(target, method_of_key(key), draft)


def smoke_target_of(plan: Plan) -> str:
    from bot.publish.smoke_target import SmokeTarget, target_of

    target = target_of(plan)
    return str(target) if isinstance(target, SmokeTarget) else ""


def confirmed(gpu: dict[str, Any], tested: TestedCommit, client: RunReader, bot_repo: str) -> bool:
    """Whether GitHub confirms the dispatch result ``gpu`` (as ``bot verify`` recorded it)."""
    request_id = gpu.get("request_id")
    if not tested.gpu_tests or not (isinstance(request_id, str) and _REQUEST_ID.match(request_id)):
        return False
    try:
        runs = _Runs(client, bot_repo, client.default_branch(bot_repo), tested)
    except BotError:
        return False
    after = runs.get(gpu.get("run_id"))
    if not _is(after, tested, tested.title(request_id, tested.head), "success"):
        return False
    if not runs.bound(after) or not runs.only_one_with(request_id, after):
        return False
    before = gpu.get("before")
    if isinstance(before, dict) and before.get("run_id") is not None:
        # A recorded fail-before run must be one of this plan's, on the base, and have failed.
        ran = runs.get(before.get("run_id"))
        if not _is(ran, tested, None, "failure") or not runs.bound(ran):
            return False
        title = str(ran.get("display_title") or "") if ran else ""
        if not title.startswith("gpu-verify ") or f" {tested.first_parent} " not in title:
            return False
    # The newest completed run of this commit decides (a later failure puts it back to draft).
    newest = runs.newest_completed()
    return newest is not None and newest.get("conclusion") == "success"


class _Runs:
    """The bot repository's gpu-verify runs as GitHub reports them, read once each."""

    def __init__(self, client: RunReader, repo: str, branch: str, tested: TestedCommit) -> None:
        self.client, self.repo, self.branch, self.tested = client, repo, branch, tested
        self._contains: dict[str, bool] = {}

    def get(self, run_id: object) -> dict[str, Any] | None:
        if not isinstance(run_id, int) or isinstance(run_id, bool):
            return None
        try:
            return self.client.get_workflow_run(self.repo, run_id)
        except BotError:
            return None

    def bound(self, run: dict[str, Any] | None) -> bool:
        """The run ran the default branch's workflow: its branch, and a commit on it."""
        if run is None or run.get("head_branch") != self.branch:
            return False
        sha = str(run.get("head_sha") or "")
        if not re.fullmatch(r"[0-9a-f]{40}", sha):
            return False
        if sha not in self._contains:
            try:
                self._contains[sha] = self.client.branch_contains(self.repo, self.branch, sha)
            except BotError:
                self._contains[sha] = False
        return self._contains[sha]

    def listed(self, marker: str) -> list[dict[str, Any]]:
        since = self.tested.made_at - _CLOCK_SKEW
        try:
            return self.client.workflow_runs(self.repo, WORKFLOW_FILE, since, marker)
        except BotError:
            return []

    def only_one_with(self, request_id: str, run: dict[str, Any]) -> bool:
        """No other run of the default branch carries the request id (it is ``run``'s)."""
        same = [r for r in self.listed(f" {request_id} ") if r.get("head_branch") == self.branch]
        return [r.get("id") for r in same] == [run.get("id")]

    def newest_completed(self) -> dict[str, Any] | None:
        """The newest completed run of the default branch that tested ``tested.head``."""
        for run in self.listed(f" {self.tested.head} "):
            if run.get("status") == "completed" and self.bound(run):
                return run
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


def _timestamp(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None
