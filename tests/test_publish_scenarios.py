"""Publishing scenarios against the GitHub stand-in, each ending settled.

Settled (``World.assert_settled``): exactly one PR per plan, labelled, one comment of the bot's
on each issue the plan resolves (one per member issue for a group) and none elsewhere, and a
rerun that sends nothing. Every failure on the way is one line on stderr, and the token is in
no output and no file. The other scenarios of issue 39's set live beside the defect they
belong to: closed or merged then upstream moves (test_publish_identity.py), reruns
(test_publish_rerun.py), parallel publishes and caps (test_publish_parallel.py), dashboard
approvals (test_publish_dashboard.py), rate limits (test_publish_one_line.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot import pipeline
from bot.plan import read_plan_dir
from bot.recipes.grouping import INTERFACE_ONLY
from tests.conftest import FORK, SUBMITTER_EMAIL, SUBMITTER_NAME, UPSTREAM
from tests.github_standin import STANDIN_TOKEN
from tests.publish_world import ISSUES, World, issue_json, kill_in_flight, new_gap


def _one_line(done) -> None:
    assert done.stderr == "" or (
        done.stderr.count("\n") == 1 and done.stderr.startswith("bot: ")
    ), done.stderr


# --- the happy path -------------------------------------------------------------------------


def test_one_plan_opens_one_pr_authored_and_signed_off_by_the_submitter(world: World) -> None:
    plan = world.plan("Bar")
    done = world.run("publish", str(plan))
    assert done.returncode == 0 and done.stdout.startswith("opened:"), done

    (pull,) = world.pulls()
    assert pull["draft"] is False  # the patch asks for no GPU test
    head = world.fork_head(read_plan_dir(plan).plan.branch)
    assert head is not None and pull["head"]["sha"] == head.hexsha
    assert (head.author.email, head.committer.email) == (SUBMITTER_EMAIL, SUBMITTER_EMAIL)
    assert head.message.rstrip().endswith(f"Signed-off-by: {SUBMITTER_NAME} <{SUBMITTER_EMAIL}>")
    assert f"#{pull['number']}" in world.comments("Bar")[0]["body"]
    world.assert_settled(plan)
    world.assert_no_token_anywhere(done.stdout, done.stderr)


def _group(world: World, out: Path) -> Path:
    """The interface-only group of the four classes, each member with its triaged issue."""
    for name in ISSUES:  # the issues' triage, recorded as the demand for each class
        pipeline.propose(
            world.checkout,
            world.root / "triaged" / name,
            issue=issue_json(name),
            upstream=UPSTREAM,
            record=True,
        )
    ranked, groups = pipeline.find_groups(world.checkout)
    plan, left_out = pipeline.propose_group(
        world.checkout, out, INTERFACE_ONLY, ranked=ranked, groups=groups
    )
    assert plan.status == "ready" and left_out == [] and len(plan.members) == 4, left_out
    from bot.verify import VerifyOptions, verify_plan

    verified = verify_plan(out, VerifyOptions(gpu="skip", journal=False, runtime=False))
    assert verified.local_passed, verified.message
    return out


def test_a_group_opens_one_pr_with_one_comment_per_member_issue_and_is_rebased_later(
    world: World,
) -> None:
    group = _group(world, world.root / "group")
    done = world.run("publish", str(group))
    assert done.returncode == 0 and done.stdout.startswith("opened:"), done
    (pull,) = world.pulls()
    assert pull["draft"] is True  # Qwen3's member asks for a GPU test
    commit, chain = world.fork_head(read_plan_dir(group).plan.branch), []
    while commit is not None and commit.author.email == SUBMITTER_EMAIL:
        chain.append(commit)
        commit = commit.parents[0]
    assert len(chain) == 4  # one commit per member, each signed off by the submitter
    assert all(f"Signed-off-by: {SUBMITTER_NAME} <{SUBMITTER_EMAIL}>" in c.message for c in chain)
    world.assert_settled(group)

    # The upstream moves; the group planned again (its members are its own open PR's, not
    # "already in a PR") refreshes that PR.
    world.move_upstream()
    again = _group(world, world.root / "group-again")
    refreshed = world.run("publish", str(again))
    assert refreshed.stdout.startswith("updated:") and "pushed a new commit" in refreshed.stdout
    world.assert_settled(again)

    # A new gap of the same shape waits for the open group PR instead of changing its scope.
    world.move_upstream("Qux arrives", new_gap("Qux", world.checkout))
    ranked, groups = pipeline.find_groups(world.checkout)
    out = world.root / "group-qux"
    plan, left_out = pipeline.propose_group(
        world.checkout, out, INTERFACE_ONLY, ranked=ranked, groups=groups
    )
    assert [m.class_name for m in plan.members] == [
        m.class_name for m in read_plan_dir(again).plan.members
    ]
    assert left_out == [
        f"QuxForCausalLM: the group's PR #{pull['number']} is open; proposed once it is merged"
        " or closed"
    ]


# --- GPU claims -----------------------------------------------------------------------------


def test_a_claimed_gpu_pass_buys_nothing_until_github_confirms_it(world: World, monkeypatch):
    from tests.claimed import claimed
    from tests.test_publish_gpu_runs import BOT_REPO, titled_like_the_workflow

    monkeypatch.setenv("BOT_REPO", BOT_REPO)
    titled_like_the_workflow(world.standin)
    plan = world.plan("Qwen3")
    planned = read_plan_dir(plan)
    # What a compromised unprivileged job could write: a pass, and a run id nobody made.
    gpu = {"mode": "dispatch", "conclusion": "success", "run_id": 4242, "request_id": "0" * 32}
    planned.plan.verification = claimed(planned.plan.verification, passed=True, gpu=gpu)
    from bot.plan import update_plan

    update_plan(plan, planned.plan)
    assert world.run("publish", str(plan)).stdout.startswith("opened:")
    (pull,) = world.pulls()
    assert pull["draft"] is True and "not confirmed" in pull["body"]

    # The real dispatch, the way the Action runs it after publishing: the run passes.
    _verify_on_the_gpu_runner(world, plan, "success")
    ready = world.run("publish", str(plan))
    assert ready.stdout.startswith("updated:") and "marked ready for review" in ready.stdout
    (pull,) = world.pulls()
    assert pull["draft"] is False
    assert "ready for review" in world.comments("Qwen3")[0]["body"]
    world.assert_settled(plan)

    # A later run of the same commit fails: back to a draft.
    _verify_on_the_gpu_runner(world, plan, "failure")
    back = world.run("publish", str(plan))
    assert "marked as a draft again" in back.stdout, back.stdout
    world.assert_settled(plan)


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_failing_mark_ready_then_a_rerun_settle(world: World, monkeypatch, when: str) -> None:
    """GraphQL's markPullRequestReadyForReview fails (before or after its effect) once the GPU
    run is confirmed; the rerun leaves one ready PR and one comment saying so."""
    from tests.test_publish_gpu_runs import BOT_REPO, titled_like_the_workflow

    monkeypatch.setenv("BOT_REPO", BOT_REPO)
    titled_like_the_workflow(world.standin)
    plan = world.plan("Qwen3")
    assert world.run("publish", str(plan)).returncode == 0
    _verify_on_the_gpu_runner(world, plan, "success")
    world.standin.inject("POST", r"/graphql$", 502, when=when, times=10)

    first = world.run("publish", str(plan))

    _one_line(first)
    world.standin.state.faults.clear()
    assert world.run("publish", str(plan)).returncode == 0
    (pull,) = world.pulls()
    assert pull["draft"] is False
    assert "ready for review" in world.comments("Qwen3")[0]["body"]
    world.assert_settled(plan)


def _verify_on_the_gpu_runner(world: World, plan: Path, conclusion: str) -> None:
    """`bot verify --reuse-local --gpu dispatch`, with the stand-in finishing each dispatched
    run as a runner would (its JUnit report uploaded)."""
    from bot.verify import PollSettings, VerifyOptions, verify_plan
    from bot.verify.dispatch import JUNIT_ARTIFACT

    failures = "0" if conclusion == "success" else "1"
    junit = (
        f'<testsuite name="gpu" tests="1" failures="{failures}" errors="0" skipped="0">'
        '<testcase classname="t" name="gpu"/></testsuite>'
    ).encode()

    def runner(_seconds: float) -> None:
        for run in world.standin.runs():
            if run["status"] != "completed":
                world.standin.complete_run(run["id"], conclusion, {JUNIT_ARTIFACT: junit})

    poll = PollSettings(interval=0.01, timeout=60, sleep=runner)
    options = VerifyOptions(gpu="dispatch", reuse_local=True, poll=poll, journal=False)
    verified = verify_plan(plan, options)
    assert verified.gpu is not None and verified.gpu.conclusion == conclusion, verified


# --- faults before and after each write -----------------------------------------------------

WRITES = {
    "create the PR": ("POST", r"/pulls$"),
    "label it": ("POST", r"/issues/\d+/labels$"),
    "comment": ("POST", r"/issues/\d+/comments$"),
}


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_failing_write_then_a_rerun_settle(world: World, write: str, when: str) -> None:
    plan = world.plan("Bar")
    method, path = WRITES[write]
    world.standin.inject(method, path, 502, when=when, times=10)

    first = world.run("publish", str(plan))

    _one_line(first)
    world.standin.state.faults.clear()
    rerun = world.run("publish", str(plan))
    assert rerun.returncode == 0, rerun.stderr
    world.assert_settled(plan)
    world.assert_no_token_anywhere(first.stdout, first.stderr, rerun.stdout, rerun.stderr)


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_failing_edit_then_a_rerun_settle(world: World, when: str) -> None:
    """The refresh after the upstream moved: its edit of the PR fails, the rerun finishes."""
    assert world.run("publish", str(world.plan("Bar"))).returncode == 0
    world.move_upstream()
    plan = world.plan("Bar", world.root / "plans" / "Bar-again")
    world.standin.inject("PATCH", r"/pulls/\d+$", 502, when=when, times=10)

    first = world.run("publish", str(plan))

    _one_line(first)
    world.standin.state.faults.clear()
    assert world.run("publish", str(plan)).returncode == 0
    world.assert_settled(plan)


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_failing_push_then_a_rerun_settle(world: World, when: str) -> None:
    """The fork refuses the push (before), or takes it and dies before it answers (after)."""
    hook = Path(world.standin.state.repos[FORK].git_dir) / "hooks" / "reference-transaction"
    trigger = "prepared" if when == "before" else "committed"
    hook.write_text(
        f'#!/bin/sh\nif [ "$1" = {trigger} ] && grep -q refs/heads/bot/; then\n'
        + ("  exit 1\n" if when == "before" else "  kill -9 $PPID\n")
        + "fi\n"
    )
    hook.chmod(0o755)
    plan = world.plan("Bar")

    first = world.run("publish", str(plan))

    _one_line(first)
    hook.unlink()
    assert world.run("publish", str(plan)).returncode == 0
    world.assert_settled(plan)


# --- a run killed after the push ------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "when"),
    [
        ("POST", r"/pulls$", "before"),
        ("POST", r"/pulls$", "after"),
        ("POST", r"/issues/\d+/comments$", "before"),
    ],
)
def test_a_run_killed_after_the_push_is_finished_by_the_rerun(
    world: World, method: str, path: str, when: str
) -> None:
    plan = world.plan("Bar")
    world.standin.inject(method, path, 0, kind="timeout", when=when, delay=30)
    run = world.bot_async("publish", str(plan), BOT_GITHUB_TIMEOUT="60")
    kill_in_flight(world.standin, run, method, path)
    world.standin.state.faults.clear()

    rerun = world.run("publish", str(plan))

    assert rerun.returncode == 0, rerun.stderr
    world.assert_settled(plan)


# --- duplicates -----------------------------------------------------------------------------


def test_someone_elses_open_pr_for_the_fix_is_a_duplicate_until_it_closes(world: World) -> None:
    plan = world.plan("Bar")  # nobody else's PR yet
    theirs = world.standin.add_pull(
        UPSTREAM,
        "someone:eagle3-bar",
        user="someone",
        title="Add EAGLE-3 support for BarForCausalLM",
        body="Declares SupportsEagle3 on BarForCausalLM.",
    )
    # Planned now, the fix is nothing to do, naming their PR (AGENTS.md's search at propose).
    again = pipeline.propose(
        world.checkout, world.root / "again", issue=issue_json("Bar"), upstream=UPSTREAM
    )
    assert again.status == "nothing-to-fix" and f"PR #{theirs} (open)" in again.reason

    refused = world.run("publish", str(plan))

    assert refused.returncode != 0 and f"PR #{theirs}" in refused.stderr
    _one_line(refused)
    assert [p["number"] for p in world.pulls()] == [theirs]
    assert not [b for b in world.fork_branches() if b.startswith("bot/")]
    assert world.comments("Bar") == []

    world.standin.close_pull(UPSTREAM, theirs)  # closed unmerged: not a fix
    opened = world.run("publish", str(plan))
    assert opened.returncode == 0 and opened.stdout.startswith("opened:"), opened
    assert len(world.pulls()) == 2 and len(world.comments("Bar")) == 1


# --- tokens ---------------------------------------------------------------------------------


def test_a_token_github_refuses_is_one_line_and_writes_nothing(world: World) -> None:
    plan = world.plan("Bar")
    bad = "ghp_notAKnownTOKEN0123456789abcdefghijkl"
    done = world.bot("publish", str(plan), GITHUB_TOKEN=bad)

    assert done.returncode != 0
    _one_line(done)
    assert bad not in done.stderr + done.stdout and STANDIN_TOKEN not in done.stderr
    assert world.writes() == [] and world.pulls() == []
    assert not [b for b in world.fork_branches() if b.startswith("bot/")]
