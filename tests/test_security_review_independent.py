"""A second, independent security review of issue 9's attacks (and the paths added since).

Each test is one attack, tried for real: the real ``bot`` command in a subprocess, the real
publisher against the GitHub stand-in on 127.0.0.1 with real git repositories, the recipes'
real publish rules on code the recipes' own codemods wrote. A defended attack is a plain test
that asserts the defence. The review found eleven breaks (no HIGH; five MEDIUM, six LOW), first
committed as ``xfail(strict=True)``; each is fixed and its test now asserts the defence (the
list, with the fixes, is in the commit that removed the markers).

Severity: HIGH = an outsider (issue author, PR author, fork owner) gets code run with a token or
makes the bot publish what no maintainer approved; MEDIUM = the same given an unusual local setup
or a second failure (e.g. upstream code in the unprivileged job rewriting the plan artifact);
LOW = defence in depth.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import git
import pytest
import yaml

from bot.base_tree import CheckedOutTree
from bot.codemods.base import CodemodRefused
from bot.content_hash import patch_hash, review_hash
from bot.errors import BotError
from bot.plan import READY, Plan, PlanDir, read_plan_dir, update_plan
from bot.publish.checks import check_pr_body
from bot.publish.pr import publish_plan
from bot.recipes.base import PublishedEdit
from bot.recipes.eagle3_enable.publish import PUBLISH_RULES as ENABLE_RULES
from tests.attest import READS
from tests.claimed import claimed
from tests.conftest import FORK, UPSTREAM
from tests.github_standin import STANDIN_FORK_OWNER, STANDIN_TOKEN
from tests.test_enable_shapes import ready_model_edit

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO_ROOT / "workflows"
PLANTED = "__import__('os').system('touch /tmp/pwned')"


def _bot(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
        timeout=600,
    )


def _one_line_exit_2(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-800:])
    err = result.stderr.strip()
    assert err.startswith("bot: ") and "\n" not in err, err[-800:]
    assert "Traceback" not in result.stderr and "internal error" not in err


# --- eagle3-enable publish rules: smuggling code through the decoder edit ----------------------


@pytest.fixture
def enable_edit(tmp_path: Path) -> dict[str, Any]:
    """The recipe's own enable-decoder-and-declare edit on a small synthetic tree: the base
    text, the text the codemods write, and the finding, as publish sees them."""
    tree, finding, edit = ready_model_edit(tmp_path)
    before = (tree / edit.path).read_text()
    return {
        "path": edit.path,
        "kind": edit.kind,
        "before": before,
        "after": edit.apply(before),
        "class_name": finding.class_name,
        "finding": finding,
        "base": CheckedOutTree(tree),
    }


def _enable_rule(e: dict[str, Any], after: str) -> None:
    ENABLE_RULES[e["kind"]](
        PublishedEdit(
            e["path"], e["kind"], e["before"], after, e["class_name"], e["finding"], e["base"]
        )
    )


def test_the_enable_rule_accepts_the_recipes_own_edit(enable_edit: dict[str, Any]) -> None:
    _enable_rule(enable_edit, enable_edit["after"])  # the baseline the attacks below start from


ENABLE_TAMPERS = {
    # A statement appended to the decoder's forward: the aux-capture comparison is by AST.
    "statement-in-decoder": (
        "        return hidden_states\n",
        f"        {PLANTED}\n        return hidden_states\n",
        "not the mixin and the aux capture",
    ),
    "decorator-on-decoder": (
        "class DemoModel(",
        f"@(lambda c: {PLANTED} and c)\nclass DemoModel(",
        "not the mixin and the aux capture",
    ),
    "metaclass-on-target": (
        "class DemoForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
        "class DemoForCausalLM(nn.Module, SupportsPP, SupportsEagle3, metaclass=type):",
        "more than adding SupportsEagle3",
    ),
    "statement-in-target-body": (
        "        self.model = DemoModel(",
        f"        {PLANTED}\n        self.model = DemoModel(",
        "outside|more than adding SupportsEagle3",
    ),
    "extra-import": (
        "from .interfaces import EagleModelMixin",
        "import subprocess\nfrom .interfaces import EagleModelMixin",
        "imports subprocess",
    ),
    "assignment-shadowing-the-target": (
        "class DemoForCausalLM(",
        f"DemoForCausalLM = {PLANTED}\n\n\nclass DemoForCausalLM(",
        "outside the declared edit|confined|outside",
    ),
}


@pytest.mark.parametrize("case", ENABLE_TAMPERS)
def test_the_enable_rule_refuses_code_around_the_decoder_edit(
    enable_edit: dict[str, Any], case: str
) -> None:
    old, new, refusal = ENABLE_TAMPERS[case]
    after = enable_edit["after"]
    assert old in after
    with pytest.raises((CodemodRefused, BotError), match=refusal):
        _enable_rule(enable_edit, after.replace(old, new, 1))


def test_the_enable_rule_refuses_a_decorator_on_the_target_class(
    enable_edit: dict[str, Any],
) -> None:
    after = enable_edit["after"].replace(
        "class DemoForCausalLM(", f"@(lambda c: {PLANTED} and c)\nclass DemoForCausalLM(", 1
    )
    with pytest.raises(CodemodRefused):
        _enable_rule(enable_edit, after)


# --- pr.md: the PR body the Action publishes unreviewed ----------------------------------------


def _body_check(body: str) -> None:
    plan = Plan(status=READY, reason="r", issue_number=33329)
    check_pr_body(PlanDir(plan=plan, patch="", pr_markdown=f"Title\n\n{body}\n", path=Path(".")))


@pytest.mark.parametrize(
    "body",
    [
        "Closes #1",
        "fixes: vllm-project/vllm#2",
        "Fixes #33329 and resolves #3",
        "Please look, @vllm-project/maintainers",
        "Signed-off-by: Trusted <t@example.invalid>",
    ],
)
def test_the_pr_body_filter_refuses_the_plain_forms(body: str) -> None:
    with pytest.raises(BotError, match="refusing to publish"):
        _body_check(body)


def test_the_pr_body_filter_refuses_a_closing_keyword_with_an_issue_url() -> None:
    with pytest.raises(BotError, match="closing keyword"):
        _body_check("Fixes https://github.com/vllm-project/vllm/issues/1")


def test_the_pr_body_filter_refuses_an_emphasised_mention() -> None:
    with pytest.raises(BotError, match="@mention"):
        _body_check("Thanks _@octocat_ for the report")


# --- upstream code and the token -----------------------------------------------------------

PLANTED_TEST = textwrap.dedent(
    """
    import base64, json, os, pathlib

    def test_steal():
        found = {
            "env": {k: v for k, v in os.environ.items()},
            "home": os.path.expanduser("~"),
            "parent": "",
        }
        try:
            found["parent"] = pathlib.Path(f"/proc/{os.getppid()}/environ").read_bytes().decode(
                "utf-8", "replace"
            )
        except OSError as exc:
            found["parent"] = f"unreadable: {exc}"
        # The tests' only way out of the sandbox: their report (the failure's message).
        raise AssertionError("LOOT " + base64.b64encode(json.dumps(found).encode()).decode())
    """
)
SECRETS = {
    "GITHUB_TOKEN": STANDIN_TOKEN,
    "GH_TOKEN": "ghp_ghtoken0123456789abcdefghijklmnopqrstu",
    "BOT_PUBLISH_TOKEN": "ghp_publish0123456789abcdefghijklmnopqrst",
    "HF_TOKEN": "hf_hftoken0123456789abcdefghijklmnopq",
    "ACTIONS_RUNTIME_TOKEN": "runtime-token-0123456789",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-token-0123456789",
}


# An operator's private package index, credentials in the URL (pip's documented way).
PIP_INDEX_URL = "https://bot:pypi-indextoken0123456789@index.invalid/simple"


def _planted_tree(tmp_path: Path) -> tuple[Path, Path]:
    """The tree, and where `bot gpu-test` leaves the JUnit report that carries the loot."""
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_planted.py").write_text(PLANTED_TEST)
    return tree, tmp_path / "junit.xml"


def _gpu_test(tmp_path: Path, tree: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`bot gpu-test`: the runner's (and `bot verify --gpu local`'s) pytest on ``tree``."""
    junit = str(tmp_path / "junit.xml")
    return _bot(
        "gpu-test",
        "--cwd",
        str(tree),
        "--tests",
        "tests/test_planted.py",
        "--junit",
        junit,
        env=env,
    )


def _run_planted_tests(tmp_path: Path) -> dict[str, Any]:
    """The hostile test, started with the runner's command files and variables that are no
    credential (a job's environment without its secrets)."""
    tree, loot = _planted_tree(tmp_path)
    env = {
        **os.environ,
        "GITHUB_ENV": str(tmp_path / "github_env"),
        "GITHUB_OUTPUT": str(tmp_path / "github_output"),
        "ACTIONS_STEP_DEBUG": "true",
        "PIP_INDEX_URL": "https://index.invalid/simple",
    }
    result = _gpu_test(tmp_path, tree, env)
    report = loot.read_text() if loot.is_file() else ""
    said = re.findall(r"LOOT ([A-Za-z0-9+/=]+)", report)
    if not said:
        pytest.fail(f"the planted test did not run: {result.stdout[-500:]} {result.stderr[-500:]}")
    return json.loads(base64.b64decode(max(said, key=len)))  # the message is cut short


def test_upstream_code_sees_no_runner_variable_and_a_scratch_home(tmp_path: Path) -> None:
    loot = _run_planted_tests(tmp_path)
    env = loot["env"]
    assert not {"GITHUB_ENV", "GITHUB_OUTPUT"} & set(env)
    assert not [k for k in env if k.startswith(("ACTIONS_", "GITHUB_", "PIP_"))]
    # A scratch HOME: no ~/.git-credentials, ~/.netrc, gh or Hugging Face token files.
    assert loot["home"] != os.path.expanduser("~")
    assert not loot["home"].startswith(os.path.expanduser("~") + os.sep)


@pytest.mark.parametrize(
    "secrets",
    [
        SECRETS,
        {"GITHUB_TOKEN": STANDIN_TOKEN},
        {"HF_TOKEN": SECRETS["HF_TOKEN"]},
        {"PIP_INDEX_URL": PIP_INDEX_URL},  # not named like a secret: the URL carries one
    ],
    ids=["all", "github", "hub", "index-url"],
)
def test_upstream_code_never_starts_beside_a_credential_it_could_read(
    tmp_path: Path, secrets: dict[str, str]
) -> None:
    """A child running as the same user reads its parent's /proc/<pid>/environ whatever
    environment it is given, so the bot refuses to start upstream code at all."""
    tree, loot = _planted_tree(tmp_path)
    result = _gpu_test(tmp_path, tree, {**os.environ, **secrets})
    _one_line_exit_2(result)
    assert not loot.exists()
    for name, value in secrets.items():
        assert name in result.stderr
        assert value not in result.stderr + result.stdout


@pytest.mark.parametrize(
    "tests",
    [
        "-p os",
        "--basetemp=/tmp",
        "tests/../../etc/passwd.py",
        "/abs/tests/test_x.py",
        "tests/test_x.py --co",
        "tests/test_x.py;id",
        "tests/test_x.py\n-ptest",
    ],
)
def test_the_runner_takes_node_ids_never_pytest_options(tmp_path: Path, tests: str) -> None:
    """`gpu-verify.yml` passes the dispatch's `tests` input to `bot gpu-test`: it must never
    become a pytest option, a path outside tests/ or a second command."""
    # `--tests=...`: as one argument argparse would refuse a leading dash before the bot looks.
    result = _bot(
        "gpu-test", "--cwd", str(tmp_path), f"--tests={tests}", "--junit", str(tmp_path / "j.xml")
    )
    _one_line_exit_2(result)


@pytest.mark.parametrize(
    "target",
    ["os:system", "vllm.x:__import__", "vllm..x:Y", "vllm.x:Y;id", "vllm.x:Y Z", "tests.t:X"],
)
def test_the_runner_smoke_target_is_only_a_vllm_class(tmp_path: Path, target: str) -> None:
    """`smoke_target` is another dispatch input the runner turns into an import."""
    result = _bot("smoke", "--tree", str(tmp_path), "--base", "HEAD", f"--target={target}")
    _one_line_exit_2(result)


# --- workflows -----------------------------------------------------------------------------


def _workflows() -> dict[str, dict[str, Any]]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(WORKFLOWS.glob("*.yml"))}


def _steps(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (job_name, step)
        for job_name, job in workflow["jobs"].items()
        for step in job.get("steps", [])
    ]


def test_no_workflow_interpolates_event_or_input_text_into_a_shell() -> None:
    for name, workflow in _workflows().items():
        for job, step in _steps(workflow):
            assert "${{" not in str(step.get("run", "")), (name, job, step.get("name"))


def test_no_workflow_runs_on_events_that_hand_fork_code_a_token() -> None:
    for name, workflow in _workflows().items():
        # PyYAML reads the key `on` as True.
        events = workflow.get(True) or workflow.get("on")
        names = set(events) if isinstance(events, dict) else {events}
        assert not names & {"pull_request_target", "workflow_run", "pull_request"}, name
        assert workflow.get("permissions") == {}, name


def test_only_the_publish_job_holds_a_write_secret_and_it_runs_no_upstream_code() -> None:
    holders = set()
    for name, workflow in _workflows().items():
        for job_name, job in workflow["jobs"].items():
            text = json.dumps(job)
            if "secrets." in text:
                holders.add((name, job_name))
                runs = " ".join(str(s.get("run", "")) for s in job.get("steps", []))
                # Installing the vLLM tree, pytest, or `bot verify` without --reuse-local
                # would import upstream code next to the token.
                assert "pip install -e" not in runs and "pytest" not in runs, job_name
                for line in runs.splitlines():
                    if "bot verify" in line:
                        assert "--reuse-local" in line, line
            if (name, job_name) == ("scheduled-scan.yml", "dashboard"):
                _assert_dashboard_job_runs_no_upstream_code(job)
            elif job_name != "publish":
                assert "write" not in json.dumps(job.get("permissions", {})), (name, job_name)
    assert holders == {("propose-on-label.yml", "publish")}


def _assert_dashboard_job_runs_no_upstream_code(job: dict) -> None:
    """The one other job that may write: the dashboard issue (issues only), rendered by the
    installed bot from the scan job's journal; vLLM is never checked out, installed or run."""
    assert job["permissions"] == {"contents": "read", "issues": "write"}
    for step in job["steps"]:
        uses = str(step.get("uses", ""))
        if uses.startswith("actions/checkout@"):
            assert "repository" not in (step.get("with") or {}), step
    runs = [str(s["run"]).strip() for s in job["steps"] if "run" in s]
    assert runs == ["python -m pip install ./bot", "bot sync --render-only"], runs


def test_the_gpu_runner_checks_the_commit_before_checking_anything_out() -> None:
    job = _workflows()["gpu-verify.yml"]["jobs"]["gpu-test"]
    steps = job["steps"]
    guard = next(i for i, s in enumerate(steps) if "gpu-guard" in str(s.get("run", "")))
    vllm = next(i for i, s in enumerate(steps) if (s.get("with") or {}).get("path") == "vllm")
    assert guard < vllm
    assert steps[vllm]["with"]["ref"] == "${{ steps.guard.outputs.sha }}"
    assert "secrets." not in json.dumps(job)
    assert "self-hosted" in job["runs-on"] and "vllm-bot-gpu-verify" in job["runs-on"]


# --- malformed input: one line, exit 2 -----------------------------------------------------


def _plan_dir(tmp_path: Path, plan_json: str | bytes, patch: bytes = b"") -> Path:
    plan_dir = tmp_path / "plan"
    plan_dir.mkdir()
    data = plan_json.encode() if isinstance(plan_json, str) else plan_json
    (plan_dir / "plan.json").write_bytes(data)
    (plan_dir / "patch.diff").write_bytes(patch)
    (plan_dir / "pr.md").write_text("Title\n\nBody\n")
    return plan_dir


MINIMAL = {"status": "ready", "reason": "r", "upstream": UPSTREAM}
MALFORMED_PLANS = {
    "deep-nesting": "[" * 100_000 + "]" * 100_000,
    "lone-surrogate": json.dumps({**MINIMAL, "title": "\ud800"}),
    "huge-number": json.dumps(MINIMAL)[:-1] + ', "issue_number": ' + "9" * 5000 + "}",
    "number-true": json.dumps({**MINIMAL, "issue_number": True}),
    "edits-not-a-list": json.dumps({**MINIMAL, "edits": {"a": 1}}),
    "verification-a-string": json.dumps({**MINIMAL, "verification": "passed"}),
    "not-utf8": b"\xff\xfe{}",
}


@pytest.mark.parametrize("case", MALFORMED_PLANS)
def test_a_malformed_plan_is_one_line_exit_2(tmp_path: Path, case: str) -> None:
    plan_dir = _plan_dir(tmp_path, MALFORMED_PLANS[case])
    env = {**os.environ, "GITHUB_TOKEN": "", "BOT_HOME": str(tmp_path / "home")}
    for command in (["publish", str(plan_dir)], ["verify", str(plan_dir), "--gpu", "skip"]):
        _one_line_exit_2(_bot(*command, env=env))


def test_a_binary_patch_is_one_line_exit_2(tmp_path: Path) -> None:
    plan_dir = _plan_dir(tmp_path, json.dumps(MINIMAL), patch=b"diff --git a b\n\x00\x01\xff")
    env = {**os.environ, "BOT_HOME": str(tmp_path / "home")}
    _one_line_exit_2(_bot("publish", str(plan_dir), env=env))


def test_the_review_hash_cannot_be_shifted_between_patch_and_write_up(tmp_path: Path) -> None:
    """review_hash joins patch.diff and pr.md with a NUL: ("a\\0b", "c") and ("a", "b\\0c")
    hash the same, so a plan directory holding a NUL must never be read."""
    plan = Plan(status=READY, reason="r")
    assert review_hash("a\0b", "c", plan) == review_hash("a", "b\0c", plan)  # the ambiguity
    plan_dir = _plan_dir(tmp_path, json.dumps(MINIMAL), patch=b"a\0b")
    with pytest.raises(BotError, match="NUL"):
        read_plan_dir(plan_dir)


def test_a_bad_cap_setting_is_one_line_exit_2(tmp_path: Path) -> None:
    plan_dir = _plan_dir(tmp_path, json.dumps(MINIMAL))
    env = {**os.environ, "BOT_MAX_PRS_PER_RUN": "abc", "BOT_HOME": str(tmp_path / "home")}
    _one_line_exit_2(_bot("publish", str(plan_dir), env=env))


def test_an_out_that_is_a_file_is_one_line_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "file"
    out.write_text("x")
    env = {**os.environ, "BOT_HOME": str(tmp_path / "home")}
    result = _bot("propose", "--class", "Foo", "--repo", str(tmp_path), "--out", str(out), env=env)
    _one_line_exit_2(result)
    assert out.read_text() == "x"


# --- issue identity ------------------------------------------------------------------------


def test_a_tracking_issue_elsewhere_never_becomes_an_upstream_number(tmp_path: Path) -> None:
    """A tracking issue #7 of the operator's repository that names no upstream issue (only a
    lookalike repository) is refused: its number is never used upstream."""
    issue = {
        "number": 7,
        "title": "EAGLE3 for Qwen3-Next",
        "body": "see vllm-project/vllm-omni#33329 and https://github.com/vllm-project/vllmx/issues/5",
        "repository_url": "https://api.github.com/repos/operator/bot",
        "html_url": "https://github.com/operator/bot/issues/7",
    }
    issue_file = tmp_path / "issue.json"
    issue_file.write_text(json.dumps(issue))
    env = {**os.environ, "BOT_HOME": str(tmp_path / "home")}
    result = _bot(
        "propose",
        "--issue",
        "7",
        "--issue-file",
        str(issue_file),
        "--repo",
        str(tmp_path),
        "--out",
        str(tmp_path / "plan"),
        "--dry-run",
        env=env,
    )
    _one_line_exit_2(result)
    assert "names none" in result.stderr
    assert not (tmp_path / "plan").exists()


# --- the publisher against a tampered artifact (real git, the GitHub stand-in) ------------------


@pytest.fixture
def seed(seed_plan: Path, upstream_standin, tmp_path: Path) -> tuple[Path, Path]:
    return seed_plan, tmp_path / "work"


def _nothing_pushed(standin) -> None:
    assert standin.pulls(UPSTREAM) == []
    fork = git.Repo(standin.state.repos[FORK].git_dir)
    assert not [h for h in fork.heads if h.name.startswith("bot/")]


def _set_plan(plan_dir: Path, **fields: Any) -> None:
    data = json.loads((plan_dir / "plan.json").read_text())
    data.update(fields)
    (plan_dir / "plan.json").write_text(json.dumps(data))


def _append_file_to_patch(plan_dir: Path, path: str, text: str) -> None:
    lines = text.splitlines()
    hunk = (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines)
    )
    patch = (plan_dir / "patch.diff").read_text() + hunk
    (plan_dir / "patch.diff").write_text(patch)
    plan = read_plan_dir(plan_dir).plan
    plan.verification = claimed(plan.verification, patch_hash=patch_hash(patch))  # as verify would
    update_plan(plan_dir, plan)


@pytest.mark.vllm_tree
@pytest.mark.parametrize(
    "path",
    [
        "vllm/model_executor/models/zz_planted.py",  # a new module next to the model
        "conftest.py",  # runs in every pytest session upstream
        ".github/workflows/planted.yml",  # runs in upstream's CI on the bot's PR
    ],
)
def test_a_new_file_in_the_patch_is_refused(seed, upstream_standin, path: str) -> None:
    plan_dir, work_dir = seed
    _append_file_to_patch(plan_dir, path, PLANTED)
    with pytest.raises(BotError, match="do not declare|adds"):
        publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS)
    _nothing_pushed(upstream_standin)


@pytest.mark.vllm_tree
@pytest.mark.parametrize(
    ("fields", "refusal"),
    [
        ({"upstream": "mallory/vllm"}, "not the configured upstream"),
        ({"title": "Fix\nCo-authored-by: Trusted <t@example.invalid>"}, "title"),
        ({"reason": "Reviewed-by: Trusted Reviewer"}, "trailer"),
        ({"reason": "thanks @vllm-project/maintainers"}, "@mention"),
        ({"branch": "main"}, "branch or fingerprint"),
        ({"branch": "bot/eagle3-interface/other-model"}, "branch or fingerprint"),
        ({"recipe": "no-such-recipe"}, "recipe"),
        ({"issue_number": True}, "issue_number"),
    ],
)
def test_plan_fields_never_reach_git_or_github_unchecked(
    seed, upstream_standin, fields: dict[str, Any], refusal: str
) -> None:
    plan_dir, work_dir = seed
    _set_plan(plan_dir, **fields)
    with pytest.raises(BotError, match=refusal):
        publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS)
    _nothing_pushed(upstream_standin)


@pytest.mark.vllm_tree
def test_repo_path_is_not_an_object_source(seed, upstream_standin, tmp_path: Path) -> None:
    """repo_path names a repository holding a planted commit whose tree is the base's plus a
    file; the published commit's tree must come from the upstream base, not from there."""
    plan_dir, work_dir = seed
    _set_plan(plan_dir, repo_path=str(tmp_path / "nowhere"))
    result = publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS)
    assert result.action == "opened"
    fork = git.Repo(upstream_standin.state.repos[FORK].git_dir)
    plan = read_plan_dir(plan_dir).plan
    head = fork.commit(plan.branch)
    assert head.parents[0].hexsha == plan.base_commit
    changed = {d.b_path for d in head.parents[0].diff(head)}
    assert changed == {e.path for e in plan.edits}


@pytest.mark.vllm_tree
def test_an_issue_number_other_than_the_labelled_one_is_refused(seed, upstream_standin) -> None:
    """The run was started for issue #7; the artifact's plan says #33329 (or the reverse):
    neither `Fixes #N` nor a comment lands on an issue the run was not for."""
    plan_dir, work_dir = seed
    with pytest.raises(BotError, match="not #7"):
        publish_plan(plan_dir, reviewer=None, work_dir=work_dir, expected_issue=7, attest=READS)
    _nothing_pushed(upstream_standin)
    assert upstream_standin.comments(UPSTREAM, 33329) == []


@pytest.mark.vllm_tree
def test_the_hourly_cap_holds_from_a_fresh_bot_home(
    seed, upstream_standin, monkeypatch, tmp_path: Path
) -> None:
    """Three Actions runs, each with an empty BOT_HOME; the cap is one an hour. The first PR
    of the hour was opened from the fork by a run whose files are gone."""
    plan_dir, work_dir = seed
    monkeypatch.setenv("BOT_HOME", str(tmp_path / "fresh"))
    monkeypatch.setenv("BOT_MAX_PRS_PER_HOUR", "1")
    upstream_standin.add_pull(UPSTREAM, f"{STANDIN_FORK_OWNER}:bot/x/earlier", user="other")
    result = publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS)
    assert result.action == "rate-limited"
    assert len(upstream_standin.pulls(UPSTREAM)) == 1


@pytest.mark.vllm_tree
def test_a_patch_changed_after_approval_is_not_published(seed, upstream_standin) -> None:
    plan_dir, work_dir = seed
    planned = read_plan_dir(plan_dir)
    approved = review_hash(planned.patch, planned.pr_markdown, planned.plan)
    (plan_dir / "pr.md").write_text(planned.pr_markdown.replace("EAGLE", "EAGLE ", 1))
    with pytest.raises(BotError, match="not what the maintainer approved"):
        publish_plan(
            plan_dir,
            reviewer="maintainer1",
            work_dir=work_dir,
            approved_hash=approved,
            attest=READS,
        )
    _nothing_pushed(upstream_standin)


@pytest.mark.vllm_tree
def test_a_claimed_verification_does_not_open_a_ready_pr(seed, upstream_standin) -> None:
    plan_dir, work_dir = seed
    plan = read_plan_dir(plan_dir).plan
    plan.verification = claimed(
        plan.verification, passed=True, gpu={"mode": "dispatch", "conclusion": "success"}
    )
    update_plan(plan_dir, plan)
    result = publish_plan(plan_dir, reviewer=None, work_dir=work_dir, attest=READS)
    assert result.action == "opened"
    (pull,) = upstream_standin.pulls(UPSTREAM)
    assert pull["draft"] is True


def _foreign_commit_on_fork_branch(standin, plan_dir: Path, tmp_path: Path) -> str:
    """Someone with push access to the fork (not the bot) puts a commit on the plan's branch,
    on the plan's base, before the bot ever publishes: a planted module, nothing the recipe
    declares."""
    plan = read_plan_dir(plan_dir).plan
    fork_dir = standin.state.repos[FORK].git_dir
    clone = git.Repo.clone_from(str(fork_dir), str(tmp_path / "mallory"), no_checkout=True)
    clone.git.checkout("-q", "-b", plan.branch, plan.base_commit)
    planted = Path(clone.working_dir, "vllm", "zz_planted.py")
    planted.write_text(PLANTED + "\n")
    clone.git.add(str(planted))
    identity = {
        "GIT_AUTHOR_NAME": "Mallory",
        "GIT_AUTHOR_EMAIL": "mallory@example.invalid",
        "GIT_COMMITTER_NAME": "Mallory",
        "GIT_COMMITTER_EMAIL": "mallory@example.invalid",
    }
    clone.git.commit("-q", "--no-gpg-sign", "-m", "helpful fix", env=identity)
    clone.git.push("-q", "origin", f"{plan.branch}:refs/heads/{plan.branch}")
    return clone.head.commit.hexsha


@pytest.mark.vllm_tree
def test_a_foreign_commit_already_on_the_fork_branch_is_never_proposed(
    seed, upstream_standin, tmp_path: Path
) -> None:
    plan_dir, work_dir = seed
    foreign = _foreign_commit_on_fork_branch(upstream_standin, plan_dir, tmp_path)
    try:
        result = publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS)
    except BotError:
        result = None
    heads = [p["head"]["sha"] for p in upstream_standin.pulls(UPSTREAM)]
    assert foreign not in heads, (result, heads)


# --- more of the same families -----------------------------------------------------------------


def test_the_gpu_runner_starts_every_run_from_a_fresh_environment() -> None:
    steps = _workflows()["gpu-verify.yml"]["jobs"]["gpu-test"]["steps"]
    install = next(s for s in steps if "venv" in str(s.get("run", "")))
    assert "--clear" in install["run"] or "rm -rf .venv" in install["run"]


def test_the_dashboard_refuses_rebinding_hosts_and_cross_site_logout(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from bot.dashboard.app import DashboardSettings, create_app
    from bot.journal.store import Journal

    settings = DashboardSettings(
        as_login="alice",
        maintainers=frozenset({"alice"}),
        api_url="http://127.0.0.1:9/unused",
        secret_key="s",
        allowed_hosts=(),
    )
    client = TestClient(
        create_app(Journal(tmp_path / "j.sqlite3"), settings), base_url="http://127.0.0.1:8765"
    )
    for host in ("evil.example", "127.0.0.1.nip.io", "localhost.evil.example", "0x7f000001"):
        assert client.get("/", headers={"Host": host}).status_code == 400, host
    # Logging out is a POST with the session's CSRF token: a link or a forged form cannot.
    assert client.get("/logout").status_code in (404, 405)
    assert client.post("/logout", data={"csrf": "guess"}).status_code == 403
    page = client.get("/")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "<script" not in client.get("/api/docs").text.lower()


@pytest.mark.vllm_tree
@pytest.mark.parametrize(
    "planted",
    [
        "        trust_remote_code=1,\n",
        '        trust_remote_code="yes",\n',
        '        **{"trust_remote_code": True},\n',
    ],
)
def test_trust_remote_code_cannot_be_spelled_another_way(seed, upstream_standin, planted) -> None:
    from tests.test_security_review import _ENTRY_END, REGISTRY, _rewrite

    plan_dir, work_dir = seed
    _rewrite(plan_dir, REGISTRY, lambda s: s.replace(_ENTRY_END, planted + _ENTRY_END, 1))
    with pytest.raises(BotError, match="trust_remote_code|not a literal|comes from neither"):
        publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS)
    _nothing_pushed(upstream_standin)


@pytest.mark.vllm_tree
def test_claimed_smoke_evidence_buys_at_most_a_draft(seed, upstream_standin) -> None:
    """A plan can claim the eagle3-enable recipe's smoke evidence it never produced (plan.json
    is the artifact's); what stands between that and a reviewable PR is the draft state until
    the GPU runner (which re-runs the smoke check) passes."""
    from bot.propose.proposal import branch_name

    plan_dir, work_dir = seed
    data = json.loads((plan_dir / "plan.json").read_text())
    recipe = "eagle3-enable"
    data.update(
        recipe=recipe,
        branch=branch_name(recipe, data["class_name"], None),
        fingerprint=f"{recipe}:{data['class_name']}:{data['base_commit'][:12]}",
    )
    # A claim that does not say the values were proven is refused outright.
    claim = {"name": "smoke", "passed": True, "detail": "claimed"}
    data["verification"]["checks"].append(claim)
    (plan_dir / "plan.json").write_text(json.dumps(data))
    with pytest.raises(BotError, match="proves the aux values"):
        publish_plan(plan_dir, reviewer=None, work_dir=work_dir, attest=READS)
    assert upstream_standin.pulls(UPSTREAM) == []
    # One that copies the harness's field: this relabelled interface patch carries no
    # contributed forward test, so it is refused too. (A real enable plan with a copied claim
    # opens at most a draft: tests/test_publish_enable_capture.py.)
    claim["record"] = {"values_proven": True}
    (plan_dir / "plan.json").write_text(json.dumps(data))
    with pytest.raises(BotError, match="no aux-forward-test or llm-test edit"):
        publish_plan(plan_dir, reviewer=None, work_dir=work_dir, attest=READS)
    assert upstream_standin.pulls(UPSTREAM) == []


@pytest.mark.vllm_tree
def test_the_issue_comment_carries_no_link_from_the_artifact(seed, upstream_standin) -> None:
    plan_dir, work_dir = seed
    _set_plan(
        plan_dir,
        issue_comment="it fixes a [security advisory](https://evil.example/advisory) too.",
    )
    with contextlib.suppress(BotError):
        publish_plan(plan_dir, reviewer=None, work_dir=work_dir, attest=READS)
    bodies = [c["body"] for c in upstream_standin.comments(UPSTREAM, 33329)]
    assert not [b for b in bodies if "evil.example" in b]


def _planted_lock(standin, date: str) -> None:
    repo = git.Repo(standin.state.repos[FORK].git_dir)
    identity = {
        "GIT_AUTHOR_NAME": "m",
        "GIT_AUTHOR_EMAIL": "m@example.invalid",
        "GIT_COMMITTER_NAME": "m",
        "GIT_COMMITTER_EMAIL": "m@example.invalid",
        "GIT_COMMITTER_DATE": date,
        "GIT_AUTHOR_DATE": date,
    }
    empty_tree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    lock = repo.git.commit_tree(empty_tree, "-m", "lock", env={**os.environ, **identity})
    repo.git.update_ref("refs/heads/bot-publish-lock", lock)


@pytest.mark.vllm_tree
@pytest.mark.parametrize(
    "date", ["2001-01-01 00:00:00 +0000", "2099-12-31 00:00:00 +0000"], ids=["stale", "future"]
)
def test_a_stale_or_future_dated_publish_lock_is_broken(seed, upstream_standin, date) -> None:
    plan_dir, work_dir = seed
    _planted_lock(upstream_standin, date)
    result = publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS)
    assert result.action == "opened", result.message


# --- drafts: the Hub is data -------------------------------------------------------------------


@pytest.mark.vllm_tree
def test_an_issue_cannot_pick_an_unreviewed_draft() -> None:
    """The issue's speculative config names a draft (triage passes it on as preferred): only a
    reviewed catalogue entry for the same architecture may be used."""
    from bot.drafts import load_catalogue
    from bot.recipes.registry_plan import plan_registry_entry
    from bot.tree.fetch import release_tree

    tree = release_tree("0.23.0")
    arch = "Qwen3NextForCausalLM"
    plain, _ = plan_registry_entry(tree, arch, load_catalogue())
    named, _ = plan_registry_entry(tree, arch, load_catalogue(), "mallory/Qwen3-Next-EAGLE3")
    assert plain is not None and named is not None
    assert named == plain and "mallory" not in json.dumps(named.to_json())


@pytest.mark.vllm_tree
def test_a_hub_entry_from_an_older_refresh_is_not_reviewed(
    seed, upstream_standin, monkeypatch, tmp_path: Path
) -> None:
    from tests.test_security_review import REGISTRY, _rewrite

    plan_dir, work_dir = seed
    hub_draft = "hub-user/Qwen3-Next-DFlash-b"
    _rewrite(
        plan_dir,
        REGISTRY,
        lambda s: s.replace("z-lab/Qwen3-Coder-Next-DFlash", hub_draft, 1).replace(
            '        "Qwen/Qwen3-Coder-Next",\n        speculative_model=',
            '        "hub-user/Qwen3-Next-Base",\n        speculative_model=',
            1,
        ),
    )
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "cache"))
    old_refresh = {  # the shape `bot drafts refresh` wrote at 05abd9e: no `reviewed` key
        "schema": 1,
        "note": "refreshed",
        "entries": [
            {
                "repo_id": hub_draft,
                "method": "dflash",
                "target_repo_id": "hub-user/Qwen3-Next-Base",
                "target_arch": "Qwen3NextForCausalLM",
                "source": f"hub https://huggingface.co: {hub_draft} config.json and model card",
                "available": True,
            }
        ],
    }
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "drafts.json").write_text(json.dumps(old_refresh))
    with pytest.raises(BotError, match="unreviewed|not in the bot's draft catalogue"):
        publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS)
    _nothing_pushed(upstream_standin)
