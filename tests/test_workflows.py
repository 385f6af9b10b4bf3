"""The GitHub Actions workflows: security properties read from the YAML, the linters, and
`bot init-workflows`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import main
from bot.github.workflows import ACTIONLINT_CONFIG, WORKFLOW_NAMES, init_workflows

WORKFLOWS = Path(__file__).resolve().parent.parent / "workflows"
_PINNED = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    # PyYAML reads the key `on` as the boolean True (YAML 1.1).
    data["on"] = data.pop(True)
    return data


def steps(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(job_id, s) for job_id, job in workflow["jobs"].items() for s in job["steps"]]


@pytest.mark.parametrize("name", WORKFLOW_NAMES)
def test_no_expressions_inside_run_steps(name: str) -> None:
    for _, step in steps(load(name)):
        script = step.get("run", "")
        assert "github.event.issue" not in script
        assert "${{" not in script, f"{name}: pass values through env:, not into run:"


@pytest.mark.parametrize("name", WORKFLOW_NAMES)
def test_pinned_actions_no_persisted_credentials_minimal_permissions(name: str) -> None:
    workflow = load(name)
    assert workflow["permissions"] == {}
    for job in workflow["jobs"].values():
        assert "permissions" in job and "timeout-minutes" in job
        assert all(level in ("read", "write") for level in job["permissions"].values())
    for _, step in steps(workflow):
        if "uses" in step:
            assert _PINNED.match(step["uses"]), step["uses"]
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False


def test_propose_job_has_no_secrets_and_read_only_permissions() -> None:
    workflow = load("propose-on-label.yml")
    assert workflow["on"] == {"issues": {"types": ["labeled"]}}
    assert "github.event.issue.number" in workflow["concurrency"]["group"]
    propose = workflow["jobs"]["propose"]
    assert set(propose["permissions"].values()) == {"read"}
    assert "secrets." not in yaml.safe_dump(propose)
    assert "github.token" not in yaml.safe_dump(propose)
    publish = workflow["jobs"]["publish"]
    assert publish["needs"] == "propose" and publish["environment"] == "publish"
    assert "secrets." in yaml.safe_dump(publish)


def test_gpu_workflow_is_dispatch_only_on_the_gpu_runner() -> None:
    workflow = load("gpu-verify.yml")
    assert list(workflow["on"]) == ["workflow_dispatch"]
    inputs = workflow["on"]["workflow_dispatch"]["inputs"]
    assert {"repository", "branch", "sha", "tests", "request_id"} <= set(inputs)
    assert all(spec["type"] == "string" for spec in inputs.values())
    assert "inputs.request_id" in workflow["run-name"]
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == ["self-hosted", "linux", GPU_LABEL]
    assert job["environment"] == "gpu"
    assert "secrets." not in yaml.safe_dump(workflow)
    assert "github.token" not in yaml.safe_dump(workflow)
    uploads = [s for _, s in steps(workflow) if "upload-artifact" in s.get("uses", "")]
    assert uploads[0]["with"]["name"] == "junit" and uploads[0]["if"] == "always()"


GPU_LABEL = "vllm-bot-gpu-verify"
# What imports or runs vLLM code: its tests, an import, an install of the checkout, a local
# `bot verify` (which runs the CPU tests) and the GPU test command.
_RUNS_UPSTREAM = re.compile(
    r"\bpytest\b|import vllm|pip install[^\n]*vllm|\bbot gpu-test\b|"
    r"\bbot verify\b(?![^\n]*--reuse-local)"
)


def _holds_write_token(job: dict[str, Any]) -> bool:
    text = yaml.safe_dump(job)
    writes = "write" in job.get("permissions", {}).values()
    return writes or "secrets." in text or "github.token" in text


@pytest.mark.parametrize("name", WORKFLOW_NAMES)
def test_no_job_holding_a_write_token_runs_upstream_code(name: str) -> None:
    workflow = load(name)
    for job_id, job in workflow["jobs"].items():
        if not _holds_write_token(job):
            continue
        for step in job["steps"]:
            found = _RUNS_UPSTREAM.search(step.get("run", ""))
            assert found is None, f"{name}: job {job_id} holds a token and runs {found[0]!r}"


def test_the_unprivileged_job_checks_the_plan_and_the_privileged_one_only_publishes() -> None:
    jobs = load("propose-on-label.yml")["jobs"]
    propose_runs = "\n".join(s.get("run", "") for s in jobs["propose"]["steps"])
    assert "bot verify plan --gpu skip" in propose_runs
    assert not _holds_write_token(jobs["propose"])
    publish_lines = [
        line.strip()
        for step in jobs["publish"]["steps"]
        for line in step.get("run", "").splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    allowed = (
        "bot publish plan --issue ",  # the issue from this run's event, not the artifact's
        "python -m pip install ./bot",
        "bot verify plan --reuse-local --gpu dispatch",
        """jq '.issue' "$GITHUB_EVENT_PATH" > issue.json""",
    )
    assert all(line.startswith(allowed) for line in publish_lines), publish_lines
    assert sum(line.startswith("bot publish") for line in publish_lines) == 2


def test_gpu_runner_checks_out_only_what_the_guard_allowed() -> None:
    (job,) = load("gpu-verify.yml")["jobs"].values()
    names = [s.get("id") or s.get("uses", "") or s.get("run", "") for s in job["steps"]]
    guard = next(i for i, s in enumerate(job["steps"]) if "bot gpu-guard" in s.get("run", ""))
    vllm = next(i for i, s in enumerate(job["steps"]) if s.get("with", {}).get("path") == "vllm")
    assert guard < vllm, names
    assert job["steps"][guard]["id"] == "guard"
    # The guard is told the plan's branch and tests only that branch's head (or its parent).
    assert job["steps"][guard]["env"]["BRANCH"] == "${{ inputs.branch }}"
    assert '--branch "$BRANCH"' in job["steps"][guard]["run"]
    assert job["steps"][vllm]["with"]["ref"] == "${{ steps.guard.outputs.sha }}"
    assert "inputs.sha" not in yaml.safe_dump(job["steps"][vllm])
    assert "pip install -e ./vllm" not in "\n".join(s.get("run", "") for s in job["steps"][:vllm])
    config = yaml.safe_load((WORKFLOWS / ACTIONLINT_CONFIG).read_text())
    assert config["self-hosted-runner"]["labels"] == [GPU_LABEL]
    for other in WORKFLOW_NAMES:
        if other != "gpu-verify.yml":
            assert GPU_LABEL not in (WORKFLOWS / other).read_text()
            assert "self-hosted" not in (WORKFLOWS / other).read_text()


def test_the_propose_job_sets_up_the_sandbox_before_it_runs_upstream_code() -> None:
    """I3: the hosted runner has no bubblewrap, and Ubuntu 24.04 forbids the user namespace the
    job's user needs; without both, verify refuses (it used to record "not checked")."""
    runs = [s.get("run", "") for s in load("propose-on-label.yml")["jobs"]["propose"]["steps"]]
    setup = next(
        i for i, run in enumerate(runs) if "apt-get install" in run and "bubblewrap" in run
    )
    verify = next(i for i, run in enumerate(runs) if "bot verify" in run)
    assert setup < verify
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in runs[setup]
    assert runs[setup].rstrip().splitlines()[-1].startswith("bwrap --unshare-all")  # it works


def test_the_gpu_runner_runs_git_only_on_a_checkout_nothing_installs_into() -> None:
    """F1 on the runner: installing vLLM runs its setup.py in ./vllm; the smoke check's git
    (its scratch worktrees of HEAD~1) runs on a second checkout of the guarded commit."""
    (job,) = load("gpu-verify.yml")["jobs"].values()
    steps = job["steps"]
    twin = next(s for s in steps if s.get("with", {}).get("path") == "vllm-git")
    assert twin["with"]["ref"] == "${{ steps.guard.outputs.sha }}"
    assert twin["with"]["fetch-depth"] == 2
    runs = [s.get("run", "") for s in steps]
    assert any("pip install -e ./vllm" in run for run in runs)
    assert not any(re.search(r"(git -C|--tree) vllm(?![\w-])", run) for run in runs)
    assert any("bot smoke --tree vllm-git" in run for run in runs)
    gpu_test = next(run for run in runs if "bot gpu-test" in run)
    assert "--junit results/junit.xml" in gpu_test  # made absolute by the bot (I1)


def test_scheduled_scan_runs_scan_triage_and_sync() -> None:
    workflow = load("scheduled-scan.yml")
    assert workflow["on"]["schedule"][0]["cron"]
    scripts = "\n".join(s.get("run", "") for _, s in steps(workflow))
    for command in ("bot scan", "bot triage", "bot sync"):
        assert command in scripts


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        # CI installs the linters, so there a missing one is a failure, not a quiet skip.
        message = f"{name} is not installed"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def test_actionlint_is_clean() -> None:
    files = [str(WORKFLOWS / n) for n in WORKFLOW_NAMES]
    config = str(WORKFLOWS / ACTIONLINT_CONFIG)
    result = subprocess.run(
        [_tool("actionlint"), "-config-file", config, *files], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_is_clean() -> None:
    files = [str(WORKFLOWS / n) for n in WORKFLOW_NAMES]
    result = subprocess.run([_tool("zizmor"), "--offline", *files], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_init_workflows_writes_and_refuses_to_clobber(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    dest = tmp_path / ".github" / "workflows"
    assert main(["init-workflows", str(dest)]) == 0
    for name in WORKFLOW_NAMES:
        assert (dest / name).read_bytes() == (WORKFLOWS / name).read_bytes()
    assert (tmp_path / ".github" / ACTIONLINT_CONFIG).is_file()
    assert init_workflows(dest) == [
        *(dest / n for n in WORKFLOW_NAMES),
        dest.parent / ACTIONLINT_CONFIG,
    ]

    (dest / "gpu-verify.yml").write_text("changed\n")
    capsys.readouterr()
    assert main(["init-workflows", str(dest)]) == 2
    assert "--force" in capsys.readouterr().err
    assert (dest / "gpu-verify.yml").read_text() == "changed\n"
    assert main(["init-workflows", str(dest), "--force"]) == 0
    assert (dest / "gpu-verify.yml").read_bytes() == (WORKFLOWS / "gpu-verify.yml").read_bytes()


def test_scheduled_scan_plans_the_top_findings_without_a_token() -> None:
    workflow = load("scheduled-scan.yml")
    assert workflow["env"]["BOT_SCAN_PROPOSE_TOP"].startswith("${{ vars.BOT_SCAN_PROPOSE_TOP")
    named = {s["name"]: (i, s) for i, (_, s) in enumerate(steps(workflow))}
    index, scan = named["Scan and plan the top findings"]
    assert '--propose-top "$BOT_SCAN_PROPOSE_TOP" --plans out/plans' in scan["run"]
    assert "env" not in scan, "the scan runs the plans' codemods: no token in its environment"
    assert named["Triage open issues"][0] < index  # the scan ranks by what triage recorded
    job = workflow["jobs"]["scan"]
    assert set(job["permissions"].values()) == {"read"}
    assert "bot publish" not in "\n".join(s.get("run", "") for _, s in steps(workflow))


def test_the_dashboard_issue_is_written_by_a_job_that_never_sees_upstream_code() -> None:
    """The scan job (read-only) hands its journal over; only the dashboard job may write
    issues, and it checks out nothing but the bot and acts on no tick."""
    jobs = load("scheduled-scan.yml")["jobs"]
    scan, dashboard = jobs["scan"], jobs["dashboard"]
    assert dashboard["needs"] == "scan"
    assert dashboard["permissions"] == {"contents": "read", "issues": "write"}
    assert set(scan["permissions"].values()) == {"read"}
    scan_runs = "\n".join(s.get("run", "") for s in scan["steps"])
    assert "bot sync" not in scan_runs  # its token cannot write the issue
    checkouts = [s for s in dashboard["steps"] if "actions/checkout" in s.get("uses", "")]
    assert [s["with"]["path"] for s in checkouts] == ["bot"]
    assert all("repository" not in s["with"] for s in checkouts)
    runs = [s.get("run", "") for s in dashboard["steps"] if s.get("run")]
    assert runs == ["python -m pip install ./bot", "bot sync --render-only"]
    # The journal travels in the findings artifact: written under out/ by the scan job.
    upload = next(s for s in scan["steps"] if "upload-artifact" in s.get("uses", ""))
    download = next(s for s in dashboard["steps"] if "download-artifact" in s.get("uses", ""))
    assert upload["with"]["name"] == download["with"]["name"] == "findings"
    assert scan["env"]["BOT_HOME"].endswith("/out/home") and upload["with"]["path"] == "out/"
    assert dashboard["env"]["BOT_HOME"] == "${{ github.workspace }}/handover/home"
    assert download["with"]["path"] == "handover"
