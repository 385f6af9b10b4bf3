"""Settings from the environment, in one place."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from bot.errors import BotError


def cache_dir() -> Path:
    """Where downloaded vLLM trees and scan caches live (outside any repository)."""
    override = os.environ.get("BOT_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir("vllm-bot"))


def home_dir() -> Path:
    """The bot's data directory (journal, plans); ``BOT_HOME`` overrides it."""
    override = os.environ.get("BOT_HOME")
    return Path(override) if override else Path(platformdirs.user_data_dir("vllm-bot"))


@dataclass(frozen=True)
class GitHubSettings:
    api_url: str
    upstream: str
    fork_owner: str | None
    label: str
    bot_repo: str | None
    git_name: str
    git_email: str
    max_prs_per_run: int
    max_prs_per_hour: int
    max_open_prs: int = 10
    # The human who submits the PR (upstream's AGENTS.md: "Pure code-agent PRs are not
    # allowed"): the commit's author and Signed-off-by. The token in GITHUB_TOKEN is theirs.
    submitter_name: str | None = None
    submitter_email: str | None = None

    @property
    def token(self) -> str | None:
        # Read on demand and never stored on the settings object, so the token
        # cannot leak through a repr, a log line or a serialised plan.
        return os.environ.get("GITHUB_TOKEN") or None


def github_settings() -> GitHubSettings:
    env = os.environ.get
    return GitHubSettings(
        api_url=env("GITHUB_API_URL", "https://api.github.com").rstrip("/"),
        upstream=env("BOT_UPSTREAM", "vllm-project/vllm"),
        fork_owner=env("BOT_FORK_OWNER") or None,
        label=env("BOT_LABEL", "bot:eagle3"),
        bot_repo=env("BOT_REPO") or env("GITHUB_REPOSITORY") or None,
        git_name=env("BOT_GIT_NAME", "vllm-eagle3-bot"),
        git_email=env("BOT_GIT_EMAIL", "vllm-eagle3-bot@users.noreply.github.com"),
        max_prs_per_run=_count("BOT_MAX_PRS_PER_RUN", 3),
        max_prs_per_hour=_count("BOT_MAX_PRS_PER_HOUR", 5),
        max_open_prs=_count("BOT_MAX_OPEN_PRS", 10),
        submitter_name=(env("BOT_SUBMITTER_NAME") or "").strip() or None,
        submitter_email=(env("BOT_SUBMITTER_EMAIL") or "").strip() or None,
    )


def _count(name: str, default: int) -> int:
    """A non-negative whole number from the environment, or a one-line error naming it."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or len(text) > 9:
        raise BotError(f"{name} must be a whole number of PRs, not {text[:20]!r}")
    return int(text)
