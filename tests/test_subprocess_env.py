"""The subprocess environment drops credentials and the runner's command files."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bot.subprocess_env import minimal_env


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
