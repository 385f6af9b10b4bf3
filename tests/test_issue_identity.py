"""Which issue the bot works on, in both deployments: labelled in upstream itself, or a tracking
issue in the operator's repository naming the upstream issue. The plan, the PR's `Fixes #N` and
the bot's comment all refer to the upstream issue; an issue of the same number elsewhere is
never touched. Real PyGithub against the GitHub stand-in; the real vLLM 0.23.0 tree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.errors import BotError
from bot.github.issues import resolve_upstream_issue, upstream_references
from bot.plan import read_plan_dir
from bot.publish.pr import publish_plan
from bot.verify import VerifyOptions, verify_plan
from tests.attest import READS, cli_publish_argv
from tests.cli import EXAMPLE_ISSUE
from tests.conftest import UPSTREAM
from tests.github_standin import GitHubStandIn

OPERATOR = "operator/vllm-bot"


def tracking_issue(tmp_path: Path, body: str, number: int = 7) -> Path:
    """The `issue` of an `issues: labeled` event in the operator's repository."""
    issue = {
        "number": number,
        "title": "Track: EAGLE-3 for Qwen3-Next",
        "body": body,
        "html_url": f"https://github.com/{OPERATOR}/issues/{number}",
        "repository_url": f"https://api.github.com/repos/{OPERATOR}",
    }
    path = tmp_path / f"tracking-{number}.json"
    path.write_text(json.dumps(issue))
    return path


def test_references_count_only_the_configured_upstream() -> None:
    text = (
        "see vllm-project/vllm#33329 and https://github.com/vllm-project/vllm/issues/33329, "
        "not someone/vllm-project/vllm#5, not other/vllm#6, "
        "not https://github.com/vllm-project/vllm/pull/8"
    )
    assert upstream_references(text, UPSTREAM) == [33329]
    assert upstream_references("VLLM-Project/vLLM#12", UPSTREAM) == [12]
    assert upstream_references("vllm-project/vllm#0 vllm-project/vllm#x", UPSTREAM) == []


def _no_fetch(number: int) -> dict[str, Any]:
    raise AssertionError(f"fetched #{number}")


def test_an_upstream_issue_is_used_as_it_is() -> None:
    issue = json.loads(EXAMPLE_ISSUE.read_text())
    assert resolve_upstream_issue(issue, UPSTREAM, _no_fetch).issue is issue
    issue["repository_url"] = f"https://api.github.com/repos/{UPSTREAM}"
    found = resolve_upstream_issue(issue, UPSTREAM, _no_fetch)
    assert found.issue is issue and found.tracking is None


@pytest.mark.parametrize(
    "body, message",
    [
        ("EAGLE-3 crashes on Qwen3-Next, see #33329", "names none"),
        ("see other/vllm#33329", "names none"),
        ("vllm-project/vllm#1 and vllm-project/vllm#2", "names several"),
    ],
)
def test_a_tracking_issue_must_name_exactly_one_upstream_issue(
    tmp_path: Path, capsys: pytest.CaptureFixture, body: str, message: str
) -> None:
    path = tracking_issue(tmp_path, body)
    code = main(["propose", "--issue", "7", "--issue-file", str(path), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
    with pytest.raises(BotError):
        resolve_upstream_issue(json.loads(path.read_text()), UPSTREAM, _no_fetch)


@pytest.fixture
def standin_with_issues(upstream_standin: GitHubStandIn) -> GitHubStandIn:
    """Upstream's #33329 with the seed report, an unrelated upstream #7, and the operator's
    repository with its own #7 (the tracking issue)."""
    example = json.loads(EXAMPLE_ISSUE.read_text())
    upstream_standin.state.issues[(UPSTREAM, 33329)].update(
        title=example["title"], body=example["body"]
    )
    upstream_standin.add_issue(UPSTREAM, 7, "Unrelated: docs typo", "a typo in the docs")
    upstream_standin.add_repo(OPERATOR)
    upstream_standin.add_issue(OPERATOR, 7, "Track: EAGLE-3 for Qwen3-Next", "see below")
    return upstream_standin


@pytest.mark.vllm_tree
@pytest.mark.parametrize(
    "reference", ["vllm-project/vllm#33329", "https://github.com/vllm-project/vllm/issues/33329"]
)
def test_a_tracking_issue_proposes_and_publishes_for_the_upstream_issue(
    standin_with_issues: GitHubStandIn,
    seed_plan: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    reference: str,
) -> None:
    repo = read_plan_dir(seed_plan).plan.repo_path
    path = tracking_issue(tmp_path, f"Upstream report: {reference}\n\nPlease fix.")
    out = tmp_path / "plan"
    code = main(
        ["propose", "--issue", "7", "--issue-file", str(path), "--repo", repo]
        + ["--out", str(out), "--dry-run"]
    )
    stdout = capsys.readouterr().out
    assert code == 0
    assert f"issue: {UPSTREAM}#33329 (tracked in {OPERATOR}#7)" in stdout
    planned = read_plan_dir(out)
    assert planned.plan.status == "ready"
    assert (planned.plan.issue_number, planned.plan.upstream) == (33329, UPSTREAM)
    assert planned.patch == (seed_plan / "patch.diff").read_text()
    assert "Fixes #33329" in planned.pr_markdown and "#7" not in planned.pr_markdown

    verify_plan(out, VerifyOptions(gpu="skip", journal=False, runtime=False))
    result = publish_plan(out, reviewer=None, work_dir=tmp_path / "work", attest=READS)

    assert result.action == "opened"
    (pull,) = standin_with_issues.pulls(UPSTREAM)
    assert "Fixes #33329" in pull["body"] and "#7" not in pull["body"]
    assert len(standin_with_issues.comments(UPSTREAM, 33329)) == 1
    assert standin_with_issues.comments(UPSTREAM, 7) == []
    assert standin_with_issues.comments(OPERATOR, 7) == []


@pytest.mark.vllm_tree
def test_the_plan_records_the_configured_upstream(
    seed_plan: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A staging setup (BOT_UPSTREAM) gets plans for its upstream; an issue of that upstream is
    used as it is, one of the real upstream is a foreign issue that names nothing there."""
    monkeypatch.setenv("BOT_UPSTREAM", "staging-org/vllm")
    repo = read_plan_dir(seed_plan).plan.repo_path
    issue = json.loads(EXAMPLE_ISSUE.read_text())
    issue["html_url"] = "https://github.com/staging-org/vllm/issues/33329"
    staged = tmp_path / "staged.json"
    staged.write_text(json.dumps(issue))
    out = tmp_path / "plan"
    args = ["--repo", repo, "--out", str(out), "--dry-run"]
    assert main(["propose", "--issue", "33329", "--issue-file", str(staged), *args]) == 0
    assert read_plan_dir(out).plan.upstream == "staging-org/vllm"
    assert main(["propose", "--issue", "33329", "--issue-file", str(EXAMPLE_ISSUE), *args]) == 2


@pytest.mark.vllm_tree
def test_publish_takes_the_issue_from_the_run_not_from_the_plan(
    standin_with_issues: GitHubStandIn,
    seed_plan: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    """The publish job resolves the labelled event's issue itself: a plan (the artifact of a job
    that ran upstream code) naming another upstream issue is refused before anything is written."""
    monkeypatch.chdir(tmp_path)
    upstream_7 = tmp_path / "upstream-7.json"
    upstream_7.write_text(
        json.dumps(
            {
                "number": 7,
                "title": "Unrelated: docs typo",
                "body": "a typo in the docs",
                "repository_url": f"https://api.github.com/repos/{UPSTREAM}",
            }
        )
    )
    tracking_7 = tracking_issue(tmp_path, f"Upstream report: {UPSTREAM}#7")
    for event in (upstream_7, tracking_7):
        code = main(["publish", str(seed_plan), "--issue", "7", "--issue-file", str(event)])
        assert code == 2
        assert "not #7 that this run was started for" in capsys.readouterr().err
    assert standin_with_issues.pulls(UPSTREAM) == []
    assert standin_with_issues.writes() == []

    tracking_ok = tracking_issue(tmp_path, f"Upstream report: {UPSTREAM}#33329", number=8)
    code = main(cli_publish_argv(seed_plan, "--issue", "8", "--issue-file", str(tracking_ok)))
    assert code == 0, capsys.readouterr().err
    (pull,) = standin_with_issues.pulls(UPSTREAM)
    assert "Fixes #33329" in pull["body"]
