"""Shared fixtures."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from bot import pipeline
from tests.cli import EXAMPLE_ISSUE
from tests.github_standin import (
    STANDIN_BOT_LOGIN,
    STANDIN_FORK_OWNER,
    STANDIN_TOKEN,
    GitHubStandIn,
)
from tests.hub_standin import closed_port_url

# Where the Hugging Face Hub is for every test that does not start the stand-in: a port on
# 127.0.0.1 nothing listens on, so no test reaches the real Hub (and a refused connection fails
# at once). Not HF_HUB_OFFLINE: huggingface_hub reads that once, at import, for the session.
_NO_HUB = closed_port_url()


@pytest.fixture(autouse=True)
def _private_bot_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test (and every `bot` it runs) keeps its journal and plans to itself, and its own
    Hugging Face cache; the Hub is unreachable unless the test starts the stand-in."""
    monkeypatch.setenv("BOT_HOME", str(tmp_path / "bot-home"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", _NO_HUB)


@pytest.fixture
def github_standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubStandIn]:
    """A GitHub stand-in on 127.0.0.1 with the environment pointing the bot at it.

    Repositories are not created here (``standin.add_repo(...)``), so each test decides
    whether the fork is seeded from a vLLM tree. ``GITHUB_TOKEN`` is set to ``STANDIN_TOKEN``,
    known to the stand-in as ``STANDIN_BOT_LOGIN``; retries and pacing wait zero seconds.
    Lists come two items a page, so every listing the bot relies on must follow pages.
    """
    standin = GitHubStandIn(tmp_path / "standin").start()
    standin.state.page_size = 2
    standin.add_token(STANDIN_TOKEN, STANDIN_BOT_LOGIN)
    standin.add_user(STANDIN_BOT_LOGIN, SUBMITTER_NAME)
    standin.add_user(MAINTAINER, MAINTAINER_NAME)  # who the dashboard tests approve as
    monkeypatch.setenv("GITHUB_TOKEN", STANDIN_TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", standin.api_url)
    monkeypatch.setenv("BOT_FORK_OWNER", STANDIN_FORK_OWNER)
    monkeypatch.setenv("BOT_SUBMITTER_NAME", SUBMITTER_NAME)
    monkeypatch.setenv("BOT_SUBMITTER_EMAIL", SUBMITTER_EMAIL)
    monkeypatch.setenv("BOT_HOME", str(tmp_path / "bot-home"))
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "0")
    monkeypatch.setenv("BOT_GITHUB_BACKOFF", "0")
    monkeypatch.setenv("BOT_GITHUB_THROTTLE", "0")
    try:
        yield standin
    finally:
        standin.stop()


UPSTREAM = "vllm-project/vllm"
# The human who submits the stand-in's PRs (the token above is theirs).
SUBMITTER_NAME = "Ada Submitter"
SUBMITTER_EMAIL = "ada@example.org"
FORK = f"{STANDIN_FORK_OWNER}/vllm"
# A maintainer known to GitHub, who approves on the dashboard (not the token's user).
MAINTAINER = "alice"
MAINTAINER_NAME = "Alice Approver"


@pytest.fixture(scope="session")
def _seed_plan_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bot's own plan for the seed issue (vllm#33329) on a clone of vLLM 0.23.0, verified
    by the real `bot verify` (local checks; no GPU), so publish accepts its patch hash."""
    from bot.tree.fetch import release_tree
    from bot.verify import VerifyOptions, verify_plan

    root = tmp_path_factory.mktemp("seed-plan")
    checkout = root / "checkout"
    git.Repo.clone_from(str(release_tree("0.23.0")), str(checkout), shared=True).close()
    issue = json.loads(EXAMPLE_ISSUE.read_text())
    pipeline.propose(checkout, root / "plan", issue=issue, upstream=UPSTREAM)
    # The runtime stage (real vLLM) has its own tests; here only the patch hash matters.
    options = VerifyOptions(gpu="skip", runtime=False)
    with pytest.MonkeyPatch.context() as env:
        # Verified by nobody in particular, on every machine: `bot verify` would otherwise
        # record whoever this machine's git config names (see runner_identity).
        env.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        env.setenv("GIT_CONFIG_NOSYSTEM", "1")
        for name in ("BOT_SUBMITTER_NAME", "BOT_SUBMITTER_EMAIL", "GITHUB_ACTIONS"):
            env.delenv(name, raising=False)
        verification = verify_plan(root / "plan", options)
    assert verification.ran_by is None
    assert verification.local_passed, verification.message
    return root / "plan"


@pytest.fixture
def seed_plan(_seed_plan_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of the seed plan directory, for tests that change it."""
    return Path(shutil.copytree(_seed_plan_template, tmp_path / "seed-plan"))


@pytest.fixture
def upstream_standin(
    github_standin: GitHubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> GitHubStandIn:
    """The stand-in with vllm-project/vllm, the bot's fork (a bare repo) and issue #33329."""
    from bot.tree.fetch import release_tree

    tree = release_tree("0.23.0")
    github_standin.add_repo(UPSTREAM, seed_from=tree)
    github_standin.add_repo(FORK, seed_from=tree)
    github_standin.add_issue(
        UPSTREAM,
        33329,
        "[Feature]: EAGLE3 for Qwen3-Next",
        "RuntimeError: Model does not support EAGLE3 interface",
    )
    monkeypatch.setenv("BOT_FORK_URL", str(tmp_path / "standin" / "remotes" / FORK) + ".git")
    monkeypatch.setenv(
        "BOT_UPSTREAM_URL", str(tmp_path / "standin" / "remotes" / UPSTREAM) + ".git"
    )
    return github_standin


@pytest.fixture(scope="session")
def world_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic upstream of tests/publish_world.py, committed once per session."""
    from tests.publish_world import build_world_base

    return build_world_base(tmp_path_factory.mktemp("world") / "base")


@pytest.fixture
def world(
    github_standin: GitHubStandIn, world_base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """That upstream served by the GitHub stand-in, with the submitter's fork and the issues
    (tests/publish_world.py)."""
    from tests.publish_world import make_world

    return make_world(github_standin, world_base, tmp_path, monkeypatch)
