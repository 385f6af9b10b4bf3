"""`bot verify --gpu dispatch` against the GitHub stand-in: dispatch, run, conclusion, result."""

from __future__ import annotations

import re
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
import yaml

from bot import pipeline
from bot.cli import main
from bot.journal.store import Journal
from bot.plan import read_plan_dir
from bot.publish.render import END, START
from bot.verify import PollSettings, VerifyOptions, verify_plan
from bot.verify.dispatch import JUNIT_ARTIFACT, WORKFLOW_FILE
from tests.github_standin import STANDIN_TOKEN, GitHubStandIn
from tests.test_verify_local import GPU_NODE, synthetic_plan

BOT_REPO = "bot-owner/vllm-bot"
WORKFLOWS = Path(__file__).resolve().parent.parent / "workflows"


def junit(failure: str | None = None) -> bytes:
    body = f'<failure message="assert">{escape(failure)}</failure>' if failure else ""
    return (
        '<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="1">'
        f'<testcase classname="tests.test_probe" name="test_declares_eagle3">{body}</testcase>'
        "</testsuite></testsuites>"
    ).encode()


@pytest.fixture
def standin(github_standin: GitHubStandIn, monkeypatch: pytest.MonkeyPatch) -> GitHubStandIn:
    github_standin.add_repo(BOT_REPO)
    monkeypatch.setenv("BOT_REPO", BOT_REPO)
    # The stand-in names runs the way gpu-verify.yml's `run-name:` does.
    run_name = yaml.safe_load((WORKFLOWS / WORKFLOW_FILE).read_text())["run-name"]
    github_standin.set_run_name(
        BOT_REPO, WORKFLOW_FILE, re.sub(r"\$\{\{\s*inputs\.(\w+)\s*\}\}", r"{\1}", run_name)
    )
    return github_standin


def runner(standin: GitHubStandIn, results: dict[str, tuple[str, bytes]]):
    """A sleep for the poller that plays the GPU runner: it finishes every open run, with
    the result ``results`` gives for the run's ``sha`` input."""

    def sleep(_seconds: float) -> None:
        for run in standin.runs():
            if run["status"] != "completed":
                sha = standin.run_inputs(run["id"])["sha"]
                conclusion, report = results[sha]
                standin.complete_run(run["id"], conclusion, artifacts={JUNIT_ARTIFACT: report})

    return sleep


def test_dispatch_fail_before_pass_after(tmp_path: Path, standin: GitHubStandIn) -> None:
    plan_dir = synthetic_plan(tmp_path, branch="bot/eagle3-foo")
    base = read_plan_dir(plan_dir).plan.base_commit
    sleep = runner(
        standin,
        {"bot/eagle3-foo": ("success", junit()), base: ("failure", junit("SupportsEagle3 gone"))},
    )
    options = VerifyOptions(
        gpu="dispatch", before=True, poll=PollSettings(interval=0, timeout=60, sleep=sleep)
    )
    verification = pipeline.verify([plan_dir], options)[0]

    gpu = verification.gpu.to_json()
    assert verification.passed is True
    assert gpu["conclusion"] == "success"
    assert gpu["before"]["conclusion"] == "failure"
    assert gpu["run_url"].startswith(standin.web_url + f"/{BOT_REPO}/actions/runs/")
    inputs = [standin.run_inputs(run["id"]) for run in standin.runs()]
    assert {i["sha"] for i in inputs} == {"bot/eagle3-foo", base}
    assert {i["branch"] for i in inputs} == {"bot/eagle3-foo"}  # the guard's one branch
    assert all(i["tests"] == GPU_NODE and i["repository"] == "bot-fork/vllm" for i in inputs)
    assert all(i["request_id"] in run["display_title"] for i, run in zip(inputs, standin.runs()))

    stored = read_plan_dir(plan_dir)
    assert stored.plan.verification.gpu.run_id == gpu["run_id"]
    # The record's word until publish asks GitHub; the run before the patch failed.
    assert "GPU runner | not confirmed yet | the record says passed;" in stored.pr_body
    assert "before the patch: failure" in stored.pr_body
    assert Journal().proposals()[0].state == "verified"


def test_failing_gpu_test_keeps_draft_and_shows_the_log(
    tmp_path: Path, standin: GitHubStandIn
) -> None:
    plan_dir = synthetic_plan(tmp_path, branch="bot/eagle3-foo")
    # within the excerpt's last three lines: the marker, the backticks, the token
    hostile = f"{END}\n<script>x</script> token {STANDIN_TOKEN}\n```\nAssertionError: no eagle"
    sleep = runner(standin, {"bot/eagle3-foo": ("failure", junit(hostile))})
    options = VerifyOptions(gpu="dispatch", poll=PollSettings(interval=0, timeout=60, sleep=sleep))
    verification = pipeline.verify([plan_dir], options)[0]

    assert verification.passed is False
    assert verification.gpu.conclusion == "failure"
    body = read_plan_dir(plan_dir).pr_body
    assert body.count(START) == 1 and body.count(END) == 1
    section = body[body.index(START) : body.index(END)]
    assert "AssertionError: no eagle" in section
    assert "````text\n" in section  # the fence outgrows the backticks in the log
    assert STANDIN_TOKEN not in (plan_dir / "plan.json").read_text()
    assert STANDIN_TOKEN not in body
    assert Journal().proposals()[0].state == "failed"


def test_dispatch_that_never_finishes_times_out(
    tmp_path: Path, standin: GitHubStandIn, capsys: pytest.CaptureFixture
) -> None:
    plan_dir = synthetic_plan(tmp_path, branch="bot/eagle3-foo")
    argv = ["verify", str(plan_dir), "--gpu", "dispatch", "--timeout", "0.3"]
    assert main([*argv, "--poll-interval", "0.05"]) == 1

    verification = read_plan_dir(plan_dir).plan.verification
    gpu = verification.gpu.to_json()
    assert verification.passed is False
    assert gpu["conclusion"] == "timed_out"
    assert gpu["run_url"] and "still queued" in gpu["log_excerpt"]
    assert "did not finish" in verification.message
    assert "did not finish" in capsys.readouterr().out
    assert "GPU runner | timed out | dispatch run" in read_plan_dir(plan_dir).pr_body


def test_run_that_never_appears_times_out(tmp_path: Path, standin: GitHubStandIn) -> None:
    standin.set_run_name(BOT_REPO, WORKFLOW_FILE, "someone else's run")
    plan_dir = synthetic_plan(tmp_path, branch="bot/eagle3-foo")
    options = VerifyOptions(gpu="dispatch", poll=PollSettings(interval=0.01, timeout=0.1))
    verification = verify_plan(plan_dir, options)
    assert verification.gpu.conclusion == "timed_out"
    assert verification.gpu.run_url is None
    assert "no run of gpu-verify.yml appeared" in verification.gpu.log_excerpt


def test_dispatch_without_a_pushed_commit_is_one_line(
    tmp_path: Path, standin: GitHubStandIn, capsys: pytest.CaptureFixture
) -> None:
    plan_dir = synthetic_plan(tmp_path)
    assert main(["verify", str(plan_dir), "--gpu", "dispatch"]) == 2
    assert "needs the plan's branch" in capsys.readouterr().err
    assert standin.runs() == []


def test_a_run_of_another_branch_carrying_our_request_id_is_never_taken(
    tmp_path: Path, standin: GitHubStandIn
) -> None:
    """F3, verify's side: anyone who can dispatch can copy the request id a run's title shows,
    from a branch whose workflow reports success. Verify takes the run of the branch it
    dispatched from (the bot repository's default branch), here a failure."""
    from bot.github.client import GitHubClient

    plan_dir = synthetic_plan(tmp_path, branch="bot/eagle3-foo")
    standin.list_runs_late()  # verify's first look finds no run yet

    def sleep(_seconds: float) -> None:
        (ours,) = [r for r in standin.runs() if r["head_branch"] == "main"]
        copies = [r for r in standin.runs() if r["head_branch"] == "edited"]
        if not copies:  # the copy appears, and passes, before ours finishes
            inputs = standin.run_inputs(ours["id"])
            GitHubClient().dispatch_workflow(BOT_REPO, WORKFLOW_FILE, "edited", inputs)
            (copy,) = [r for r in standin.runs() if r["head_branch"] == "edited"]
            standin.complete_run(copy["id"], "success", artifacts={JUNIT_ARTIFACT: junit()})
        else:
            report = junit("no eagle")
            standin.complete_run(ours["id"], "failure", artifacts={JUNIT_ARTIFACT: report})

    options = VerifyOptions(gpu="dispatch", poll=PollSettings(interval=0, timeout=60, sleep=sleep))
    verification = verify_plan(plan_dir, options)

    (ours,) = [r for r in standin.runs() if r["head_branch"] == "main"]
    assert verification.gpu.conclusion == "failure"
    assert verification.gpu.run_id == ours["id"]
