"""The subprocess environment drops credentials and the runner's command files."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bot.subprocess_env import minimal_env, scratch_home, upstream_code_env


def test_secrets_and_runner_files_are_not_passed_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_not_for_children")
    monkeypatch.setenv("GITHUB_ENV", "/tmp/runner-env")
    monkeypatch.setenv("GITHUB_OUTPUT", "/tmp/runner-output")
    monkeypatch.setenv("ACTIONS_RUNTIME_TOKEN", "runtime")
    monkeypatch.setenv("PIP_INDEX_TOKEN", "pip-secret")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    env = minimal_env({"PYTHONPATH": "/tree"})
    for name in ("GITHUB_TOKEN", "GITHUB_ENV", "GITHUB_OUTPUT", "ACTIONS_RUNTIME_TOKEN"):
        assert name not in env
    assert "PIP_INDEX_TOKEN" not in env
    assert env["LC_ALL"] == "C.UTF-8"
    assert env["PYTHONPATH"] == "/tree"
    assert env["PATH"]


def test_a_child_sees_no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_not_for_children")
    code = "import os; print(os.environ.get('GITHUB_TOKEN', 'absent'))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=minimal_env(), capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "absent"


def test_upstream_code_gets_a_scratch_home_and_no_path_into_the_real_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    real = tmp_path / "operator"
    monkeypatch.setenv("HOME", str(real))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(real / ".config"))
    monkeypatch.setenv("PIP_CONFIG_FILE", str(real / ".config" / "pip" / "pip.conf"))
    monkeypatch.setenv("BOT_HOME", str(tmp_path / "bot-data"))
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "bot-cache"))
    monkeypatch.setenv("PATH", f"{real / 'bin'}:/usr/bin")
    monkeypatch.setenv("LANG", "C.UTF-8")
    with scratch_home() as home:
        env = upstream_code_env(home, {"PYTHONPATH": str(real / "tree")})
        assert env["HOME"] == str(home) and not any(home.iterdir())
        assert all(env[f"XDG_{n}_HOME"].startswith(str(home)) for n in ("CONFIG", "CACHE"))
    assert not home.exists()
    for name in ("PIP_CONFIG_FILE", "BOT_HOME", "BOT_CACHE_DIR"):
        assert name not in env
    assert env["PATH"] == f"{real / 'bin'}:/usr/bin"  # finding programs is not reading secrets
    assert env["PYTHONPATH"] == str(real / "tree")  # the caller vouches for its extras
    assert env["LANG"] == "C.UTF-8"
