"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.github_standin import (
    STANDIN_BOT_LOGIN,
    STANDIN_FORK_OWNER,
    STANDIN_TOKEN,
    GitHubStandIn,
)


@pytest.fixture
def github_standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubStandIn]:
    """A GitHub stand-in on 127.0.0.1 with the environment pointing the bot at it.

    Repositories are not created here (``standin.add_repo(...)``), so each test decides
    whether the fork is seeded from a vLLM tree. ``GITHUB_TOKEN`` is set to ``STANDIN_TOKEN``,
    known to the stand-in as ``STANDIN_BOT_LOGIN``; retries and pacing wait zero seconds.
    """
    standin = GitHubStandIn(tmp_path / "standin").start()
    standin.add_token(STANDIN_TOKEN, STANDIN_BOT_LOGIN)
    monkeypatch.setenv("GITHUB_TOKEN", STANDIN_TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", standin.api_url)
    monkeypatch.setenv("BOT_FORK_OWNER", STANDIN_FORK_OWNER)
    monkeypatch.setenv("BOT_HOME", str(tmp_path / "bot-home"))
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "0")
    monkeypatch.setenv("BOT_GITHUB_BACKOFF", "0")
    monkeypatch.setenv("BOT_GITHUB_THROTTLE", "0")
    try:
        yield standin
    finally:
        standin.stop()
