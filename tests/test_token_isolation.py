"""Upstream code the bot runs never sees a credential or the runner's command files.

A vLLM tree whose ``vllm/__init__.py`` is a spy: every time it is imported (the local GPU
tests of ``bot verify``) it records the environment it sees
into a file and tries to append to ``$GITHUB_ENV``. The bot itself runs with a token and the
runner's variables set, as in a job that holds a write token.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import main
from bot.errors import BotError
from bot.gitrepo import Repo
from bot.plan import READY, Plan, read_plan_dir, update_plan, write_plan_dir
from bot.recipes.base import DeclaredEdit, FixTests
from bot.verify import VerifyOptions, verify_plan
from tests.synthetic import make_tree
from tests.test_verify_local import FOO_MODEL, PR_MARKDOWN, commit_all, finding_for, make_patch

TOKEN = "ghs_planted_spy_must_never_see_this"
SPY = """
import json, os, pathlib
seen = {{name: os.environ.get(name) for name in sorted(os.environ)}}
out = pathlib.Path({out!r})
out.mkdir(parents=True, exist_ok=True)
(out / f"{{os.getpid()}}.json").write_text(json.dumps(seen))
runner_env = os.environ.get("GITHUB_ENV")
if runner_env:
    with open(runner_env, "a") as handle:
        handle.write("INJECTED=1\\n")
"""
PROBE_TEST = """
import vllm


def test_imports_vllm():
    assert vllm
"""
NODE = "tests/test_spy.py::test_imports_vllm"
DECLARE = (
    "vllm/model_executor/models/foo.py",
    "(nn.Module, SupportsPP):",
    "(nn.Module, SupportsPP, SupportsEagle3):",
)


def _spy_plan(tmp_path: Path, seen: Path) -> Path:
    repo = tmp_path / "vllm-spy"
    make_tree(
        repo,
        {"model_executor/models/foo.py": FOO_MODEL},
        {"_TEXT_GENERATION_MODELS": {"FooForCausalLM": ("foo", "FooForCausalLM")}},
    )
    (repo / "vllm" / "__init__.py").write_text(SPY.format(out=str(seen)))
    (repo / "tests").mkdir()
    (repo / "tests" / "test_spy.py").write_text(PROBE_TEST.lstrip())
    base = commit_all(repo)
    patch = make_patch(repo, base, [DECLARE])
    plan = Plan(
        status=READY,
        reason="only the declaration is missing",
        recipe="eagle3-interface",
        class_name="FooForCausalLM",
        repo_path=str(repo),
        base_commit=base,
        finding=finding_for(repo, "FooForCausalLM"),
        tests=FixTests(gpu=(NODE,), cpu=(NODE,)),
        edits=[DeclaredEdit("vllm/model_executor/models/foo.py", "declare-interface", "")],
    )
    write_plan_dir(tmp_path / "plan", plan, patch, PR_MARKDOWN)
    return tmp_path / "plan"


@pytest.fixture
def runner_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The variables a GitHub Actions job holding a write token has.

    These tests look at the environment layer alone, so the sandbox, which would also hide
    the spy's record files, is off here; tests/test_sandbox.py runs the same kind of spy
    inside it."""
    monkeypatch.setenv("BOT_SANDBOX", "off")
    command_file = tmp_path / "runner" / "github_env"
    command_file.parent.mkdir()
    command_file.write_text("")
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    monkeypatch.setenv("BOT_PUBLISH_TOKEN", TOKEN)
    monkeypatch.setenv("ACTIONS_RUNTIME_TOKEN", TOKEN)
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", "https://token.example.invalid/")
    monkeypatch.setenv("GITHUB_ENV", str(command_file))
    monkeypatch.setenv("GITHUB_OUTPUT", str(command_file))
    monkeypatch.setenv("GITHUB_PATH", str(command_file))
    return command_file


def test_upstream_code_run_by_verify_sees_no_token(tmp_path: Path, runner_env: Path) -> None:
    seen = tmp_path / "seen"
    plan_dir = _spy_plan(tmp_path, seen)

    verification = verify_plan(plan_dir, VerifyOptions(gpu="local"))

    records = [json.loads(p.read_text()) for p in sorted(seen.glob("*.json"))]
    # The local GPU test imported the spy in a process of its own. (The CPU tests and the smoke
    # check run in the release's environment, which a plan without a release has not: their
    # subprocesses take the same minimal environment, as the source scan below enforces.)
    assert len(records) >= 1, verification
    assert verification.gpu.conclusion == "success", verification.gpu
    for record in records:
        # Names only in a failure message: the values are what must not be shown.
        holding_token = [name for name, value in record.items() if TOKEN in (value or "")]
        assert holding_token == []
        leaked = [n for n in record if n.startswith(("GITHUB_", "ACTIONS_", "GH_", "BOT_PUB"))]
        assert leaked == []
    assert runner_env.read_text() == ""
    # git, under the blanked environment, still cleaned up its scratch worktree.
    with Repo(tmp_path / "vllm-spy") as repo:
        assert len(repo.git.worktree("list", "--porcelain").split("\n\n")) == 1


CREDENTIAL = "https://mallory:ghp_planted_credential@github.com"
HOME_SPY = """
import os, pathlib
home = pathlib.Path.home()
found = {{}}
for name in (".git-credentials", ".netrc", ".config/gh/hosts.yml", ".cache/huggingface/token"):
    path = home / name
    found[name] = path.read_text() if path.is_file() else None
out = pathlib.Path({out!r})
out.mkdir(parents=True, exist_ok=True)
(out / f"home-{{os.getpid()}}.json").write_text(
    __import__("json").dumps({{"home": str(home), "found": found, "env": dict(os.environ)}})
)
"""


def test_upstream_code_run_by_verify_cannot_read_credentials_in_home(
    tmp_path: Path, runner_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator's HOME holds the usual credential files; the planted vllm/__init__.py,
    imported by the local GPU test, looks for them in its HOME and finds none."""
    home = tmp_path / "operator-home"
    for name in (".git-credentials", ".netrc", ".config/gh/hosts.yml", ".cache/huggingface/token"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(CREDENTIAL + "\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    seen = tmp_path / "seen"
    plan_dir = _spy_plan(tmp_path, seen)
    init = Path(read_plan_dir(plan_dir).plan.repo_path) / "vllm" / "__init__.py"
    init.write_text(HOME_SPY.format(out=str(seen)))
    commit_all(init.parents[1])
    plan = read_plan_dir(plan_dir)
    plan.plan.base_commit = Repo(init.parents[1]).head.commit.hexsha
    update_plan(plan_dir, plan.plan)

    verification = verify_plan(plan_dir, VerifyOptions(gpu="local"))

    records = [json.loads(p.read_text()) for p in sorted(seen.glob("home-*.json"))]
    assert records, verification
    assert verification.gpu.conclusion == "success", verification.gpu
    for record in records:
        assert record["found"] == dict.fromkeys(record["found"])  # nothing found
        assert not Path(record["home"]).is_relative_to(home)
        assert all(str(home) not in value for value in record["env"].values())
        assert not any(CREDENTIAL in value for value in record["env"].values())


def test_git_started_by_the_bot_sees_no_token(tmp_path: Path, runner_env: Path) -> None:
    repo = Repo.init(tmp_path / "repo")
    # git runs the alias through the shell with git's own environment.
    shown = repo.git.execute(["git", "-c", "alias.show-env=!env", "show-env"])
    repo.close()
    assert (TOKEN in shown) is False
    values = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
    assert values.get("GITHUB_TOKEN", "") == ""
    assert values.get("GITHUB_ENV", "") == ""
    assert values["PATH"].endswith(os.environ["PATH"])  # git puts its exec dir first


def test_a_plain_subprocess_would_see_it(runner_env: Path) -> None:
    """The fixture is real: without the minimal environment a child reads the token."""
    code = "import os; print(os.environ.get('GITHUB_TOKEN', ''))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == TOKEN


def test_reuse_local_keeps_the_recorded_checks_and_runs_nothing(
    tmp_path: Path, runner_env: Path
) -> None:
    """What the publish job does: the unprivileged job verified, this one imports nothing."""
    seen = tmp_path / "seen"
    plan_dir = _spy_plan(tmp_path, seen)
    first = verify_plan(plan_dir, VerifyOptions(gpu="local"))
    assert first.local_passed is True and list(seen.glob("*.json"))
    for record in seen.glob("*.json"):
        record.unlink()

    again = verify_plan(plan_dir, VerifyOptions(gpu="skip", reuse_local=True))

    assert list(seen.glob("*.json")) == []
    assert again.checks == first.checks
    assert again.local_passed is True


def test_reuse_local_refuses_checks_recorded_for_another_patch(
    tmp_path: Path, runner_env: Path
) -> None:
    plan_dir = _spy_plan(tmp_path, tmp_path / "seen")
    with pytest.raises(BotError, match="records no local checks"):
        verify_plan(plan_dir, VerifyOptions(gpu="skip", reuse_local=True))
    verify_plan(plan_dir, VerifyOptions(gpu="skip"))
    patch = plan_dir / "patch.diff"
    patch.write_text(patch.read_text() + "+extra = 1\n")
    assert main(["verify", str(plan_dir), "--gpu", "skip", "--reuse-local"]) == 2
    with pytest.raises(BotError, match="not for this patch.diff"):
        verify_plan(plan_dir, VerifyOptions(gpu="skip", reuse_local=True))


def test_verify_refuses_to_run_upstream_code_beside_a_credential_it_started_with(
    tmp_path: Path,
) -> None:
    """A child running as the same user reads /proc/<parent>/environ, whatever environment it
    was given: `GITHUB_TOKEN=... bot verify` must not run vLLM's code at all."""
    seen = tmp_path / "seen"
    plan_dir = _spy_plan(tmp_path, seen)
    env = {**os.environ, "GITHUB_TOKEN": TOKEN, "BOT_HOME": str(tmp_path / "bot-home")}
    command = [sys.executable, "-m", "bot", "verify", str(plan_dir), "--gpu", "local"]

    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bot: "), refused.stderr
    assert "GITHUB_TOKEN" in lines[0] and "--reuse-local" in lines[0]
    assert TOKEN not in refused.stderr + refused.stdout
    assert not seen.exists()
    assert read_plan_dir(plan_dir).plan.verification is None
    # Without the credential in its environment the same command runs the spy's test (the
    # sandbox off, so that the spy's record reaches this test's directory).
    del env["GITHUB_TOKEN"]
    env["BOT_SANDBOX"] = "off"
    ran = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert list(seen.glob("*.json"))


def test_a_hunk_the_recipe_does_not_make_is_never_run(tmp_path: Path, runner_env: Path) -> None:
    """A plan directory from elsewhere plants code in vllm/__init__.py beside the real fix:
    the static checks run, nothing from the tree is executed, and verification fails."""
    seen = tmp_path / "seen"
    plan_dir = _spy_plan(tmp_path, seen)
    repo = Path(read_plan_dir(plan_dir).plan.repo_path)
    init = repo / "vllm" / "__init__.py"
    init.write_text("# vLLM\n")
    base = commit_all(repo)
    patch = make_patch(
        repo,
        base,
        [
            DECLARE,
            ("vllm/__init__.py", "# vLLM\n", "# vLLM\n" + SPY.format(out=str(seen))),
        ],
    )
    planned = read_plan_dir(plan_dir)
    planned.plan.base_commit = base
    write_plan_dir(plan_dir, planned.plan, patch, planned.pr_markdown)

    verification = verify_plan(plan_dir, VerifyOptions(gpu="local"))

    assert not seen.exists()
    checks = {c.name: c.to_json() for c in verification.checks}
    assert checks["confined"]["passed"] is False
    assert "vllm/__init__.py" in checks["confined"]["detail"]
    assert checks["rescan"]["passed"] is True  # the static checks still ran
    assert verification.gpu.conclusion == "not_run"
    assert verification.passed is False and verification.local_passed is False


BOT_SOURCES = sorted((Path(__file__).resolve().parents[1] / "bot").rglob("*.py"))
_CALLS = {"run", "Popen", "call", "check_call", "check_output"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def test_every_subprocess_and_git_call_site_in_bot_gets_the_minimal_environment() -> None:
    """Keeps new call sites honest: subprocess calls pass env=, git goes through
    bot.gitrepo."""
    problems = []
    for path in BOT_SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func)
            where = f"{path.name}:{node.lineno}"
            is_subprocess = name.split(".")[0] == "subprocess" and name.split(".")[-1] in _CALLS
            if is_subprocess and not any(k.arg == "env" for k in node.keywords):
                problems.append(f"{where}: {name} without env=")
            if name.startswith(("git.Repo", "git.Git")) or name in ("os.system", "os.popen"):
                problems.append(f"{where}: {name} (use bot.gitrepo.Repo / minimal_env)")
    assert problems == []
