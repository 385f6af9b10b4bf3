"""A GPU run counts only on GitHub's word about *this* plan's commit, tests and smoke target.

The seed plan (vllm#33329, real 0.23.0 tree) is published against the GitHub stand-in; a
``gpu-verify`` run is dispatched with real PyGithub, the stand-in titles it from the inputs the
way ``gpu-verify.yml``'s ``run-name:`` does (read from the workflow file), and the plan records
it as ``bot verify --gpu dispatch`` would. A compromised unprivileged job may name any run.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from pathlib import Path

import git
import pytest
import yaml

from bot.github.client import GitHubClient
from bot.plan import read_plan_dir, update_plan
from bot.publish.pr import publish_plan
from bot.verify.dispatch import WORKFLOW_FILE
from bot.verify.engine import engine_checkpoints_of
from tests.attest import READS
from tests.claimed import claimed
from tests.conftest import FORK, UPSTREAM

pytestmark = pytest.mark.vllm_tree

BOT_REPO = "example/bot"
BRANCH = "bot/eagle3-interface/qwen3-next-for-causal-lm"
SMOKE = "vllm.model_executor.models.qwen3_next:Qwen3NextForCausalLM"
WORKFLOWS = Path(__file__).resolve().parent.parent / "workflows"


def titled_like_the_workflow(standin) -> None:
    """The bot repository (its default branch ``main``, and a writer's branch ``edited`` whose
    workflow would report anything), whose gpu-verify runs the stand-in titles as the
    workflow's ``run-name:`` does."""
    git_dir = standin.add_repo(BOT_REPO)
    work = git_dir.parent / "bot-work"
    with git.Repo.init(work, initial_branch="main") as repo:
        identity = {"GIT_AUTHOR_NAME": "o", "GIT_AUTHOR_EMAIL": "o@invalid"}
        identity |= {"GIT_COMMITTER_NAME": "o", "GIT_COMMITTER_EMAIL": "o@invalid"}
        for branch, text in (("main", "the bot"), ("edited", "success: true")):
            if branch != "main":
                repo.git.checkout("-q", "-b", branch)
            (work / "gpu-verify.yml").write_text(text + "\n")
            repo.git.add("--all")
            repo.git.commit("-q", "--no-gpg-sign", "-m", branch, env=identity)
        repo.git.push("-q", str(git_dir), "main", "edited")
    run_name = yaml.safe_load((WORKFLOWS / WORKFLOW_FILE).read_text())["run-name"]
    standin.set_run_name(
        BOT_REPO, WORKFLOW_FILE, re.sub(r"\$\{\{\s*inputs\.(\w+)\s*\}\}", r"{\1}", run_name)
    )


@pytest.fixture
def seed(seed_plan: Path, upstream_standin, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("BOT_REPO", BOT_REPO)
    titled_like_the_workflow(upstream_standin)
    return seed_plan, tmp_path / "work"


def _publish(plan_dir: Path, work_dir: Path):
    return publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS)


def _head(standin) -> str:
    return git.Repo(standin.state.repos[FORK].git_dir).commit(f"refs/heads/{BRANCH}").hexsha


def _run(standin, conclusion: str, ref: str = "main", **inputs: str) -> dict:
    """Dispatch gpu-verify.yml from ``ref`` with ``inputs`` and finish the run; what verify
    records."""
    before = {r["id"] for r in standin.runs()}
    request_id = inputs.setdefault("request_id", uuid.uuid4().hex)
    GitHubClient().dispatch_workflow(BOT_REPO, WORKFLOW_FILE, ref, {"smoke_target": "", **inputs})
    (run,) = [r for r in standin.runs() if r["id"] not in before]
    standin.complete_run(run["id"], conclusion)
    return {
        "mode": "dispatch",
        "conclusion": conclusion,
        "run_id": run["id"],
        "request_id": request_id,
    }


def _record(plan_dir: Path, gpu: dict) -> None:
    plan = read_plan_dir(plan_dir).plan
    plan.verification = claimed(plan.verification, passed=True, gpu=gpu)
    update_plan(plan_dir, plan)


def _honest_inputs(plan_dir: Path, sha: str) -> dict[str, str]:
    plan = read_plan_dir(plan_dir).plan
    return {
        "sha": sha,
        "branch": BRANCH,
        "repository": FORK,
        "tests": " ".join(plan.tests.gpu),
        "smoke_target": SMOKE,
        # what `bot verify --gpu dispatch` sends: the registry entry's target and draft
        "engine_checkpoints": engine_checkpoints_of(plan.registry_entry),
    }


def _draft(standin) -> bool:
    (pull,) = standin.pulls(UPSTREAM)
    return pull["draft"]


def test_the_run_of_this_commit_with_the_recipes_tests_marks_it_ready(seed, upstream_standin):
    plan_dir, work_dir = seed
    assert _publish(plan_dir, work_dir).action == "opened" and _draft(upstream_standin)
    _record(
        plan_dir,
        _run(upstream_standin, "success", **_honest_inputs(plan_dir, _head(upstream_standin))),
    )
    assert _publish(plan_dir, work_dir).action == "updated"
    assert _draft(upstream_standin) is False


def test_an_old_unrelated_green_run_does_not(seed, upstream_standin):
    """The artifact names a green gpu-verify run made before this commit existed, for another
    commit: it counts for nothing."""
    plan_dir, work_dir = seed
    old = _run(
        upstream_standin,
        "success",
        request_id=uuid.uuid4().hex,
        sha="0" * 40,
        branch="bot/eagle3-interface/other",
        repository=FORK,
        tests="tests/x.py::t",
    )
    _publish(plan_dir, work_dir)
    _record(plan_dir, old)
    assert _publish(plan_dir, work_dir).action == "updated"  # the body states the new record
    assert _draft(upstream_standin) is True
    body = upstream_standin.pulls(UPSTREAM)[0]["body"]
    assert "| not confirmed | GitHub shows no passed gpu-verify run of this commit" in body
    assert "run confirmed on GitHub" not in body


def test_a_run_made_before_the_commit_does_not(seed, upstream_standin):
    """Its title matches (a commit can be made again with the same id), but it predates it."""
    plan_dir, work_dir = seed
    _publish(plan_dir, work_dir)
    gpu = _run(upstream_standin, "success", **_honest_inputs(plan_dir, _head(upstream_standin)))
    upstream_standin.state.runs[gpu["run_id"]].created_at = "2020-01-01T00:00:00Z"
    _record(plan_dir, gpu)
    _publish(plan_dir, work_dir)
    assert _draft(upstream_standin) is True


@pytest.mark.parametrize(
    "tamper",
    [
        {"tests": "tests/models/test_initialization.py::test_can_initialize_large_subset[Llama]"},
        {"smoke_target": ""},  # the value check switched off
        {"smoke_target": "vllm.model_executor.models.llama:LlamaForCausalLM"},
        {"sha": "BASE"},  # the unpatched commit
        {"engine_checkpoints": ""},  # the engine check switched off
    ],
)
def test_a_run_of_other_tests_target_or_commit_does_not(seed, upstream_standin, tamper):
    plan_dir, work_dir = seed
    _publish(plan_dir, work_dir)
    head = _head(upstream_standin)
    inputs = {**_honest_inputs(plan_dir, head), **tamper}
    if inputs["sha"] == "BASE":
        inputs["sha"] = (
            git.Repo(upstream_standin.state.repos[FORK].git_dir).commit(head).parents[0].hexsha
        )
    _record(plan_dir, _run(upstream_standin, "success", **inputs))
    _publish(plan_dir, work_dir)
    assert _draft(upstream_standin) is True


@pytest.mark.parametrize("conclusion", ["failure", "cancelled"])
def test_a_later_failed_or_cancelled_run_puts_it_back_to_draft(seed, upstream_standin, conclusion):
    plan_dir, work_dir = seed
    _publish(plan_dir, work_dir)
    honest = _honest_inputs(plan_dir, _head(upstream_standin))
    _record(plan_dir, _run(upstream_standin, "success", **honest))
    _publish(plan_dir, work_dir)
    assert _draft(upstream_standin) is False
    _run(upstream_standin, conclusion, **{**honest, "request_id": uuid.uuid4().hex})
    result = _publish(plan_dir, work_dir)
    assert _draft(upstream_standin) is True
    assert "draft again" in result.message
    comments = upstream_standin.comments(UPSTREAM, 33329)
    assert len(comments) == 1 and "a draft until GPU verification passes" in comments[0]["body"]


def test_a_run_from_another_branch_of_the_bot_repository_counts_for_nothing(seed, upstream_standin):
    """F3: a writer of the bot repository dispatches gpu-verify.yml from a branch whose
    workflow reports success without testing; with the plan's inputs the title is exact. It
    does not make the PR ready, and a failed run from such a branch does not make it a draft
    again either."""
    plan_dir, work_dir = seed
    _publish(plan_dir, work_dir)
    honest = _honest_inputs(plan_dir, _head(upstream_standin))
    _record(plan_dir, _run(upstream_standin, "success", ref="edited", **honest))
    _publish(plan_dir, work_dir)
    assert _draft(upstream_standin) is True
    _record(plan_dir, _run(upstream_standin, "success", **honest))
    _publish(plan_dir, work_dir)
    assert _draft(upstream_standin) is False
    _run(upstream_standin, "failure", ref="edited", **{**honest, "request_id": uuid.uuid4().hex})
    _publish(plan_dir, work_dir)
    assert _draft(upstream_standin) is False


def test_a_run_reusing_the_request_id_counts_for_nothing(seed, upstream_standin):
    """F3: the real run (dispatched from main) failed; a run from another branch reusing its
    visible request id passed and was recorded instead: the PR stays a draft. Two runs of main
    with one request id are no confirmation either (which was this plan's cannot be told)."""
    plan_dir, work_dir = seed
    _publish(plan_dir, work_dir)
    honest = _honest_inputs(plan_dir, _head(upstream_standin))
    real = _run(upstream_standin, "failure", **honest)
    reused = {**honest, "request_id": real["request_id"]}
    _record(plan_dir, _run(upstream_standin, "success", ref="edited", **reused))
    _publish(plan_dir, work_dir)
    assert _draft(upstream_standin) is True
    first = _run(upstream_standin, "success", **honest)
    _run(upstream_standin, "success", **{**honest, "request_id": first["request_id"]})
    _record(plan_dir, first)
    _publish(plan_dir, work_dir)
    assert _draft(upstream_standin) is True


def test_the_plan_does_not_choose_the_engine_checkpoints(seed, upstream_standin):
    """L7: the plan artifact names the engine check's checkpoints (``registry_entry``), which
    ``bot verify --gpu dispatch`` sends; a run of another draft than the one the patch's
    registry entry adds counts for nothing."""
    plan_dir, work_dir = seed
    _publish(plan_dir, work_dir)
    plan = read_plan_dir(plan_dir).plan
    kwargs = tuple(
        (k, "someone/any-draft" if k == "speculative_model" else v)
        for k, v in plan.registry_entry.kwargs
    )
    plan.registry_entry = dataclasses.replace(plan.registry_entry, kwargs=kwargs)
    update_plan(plan_dir, plan)
    inputs = _honest_inputs(plan_dir, _head(upstream_standin))
    assert "someone/any-draft" in inputs["engine_checkpoints"]
    _record(plan_dir, _run(upstream_standin, "success", **inputs))
    _publish(plan_dir, work_dir)
    assert _draft(upstream_standin) is True
