"""A fork or upstream URL with credentials is refused before git saves it in the work
repository's config; plain URLs (and ssh's account name) pass."""

from __future__ import annotations

import pytest

from bot.config import github_settings
from bot.errors import BotError
from bot.github.git import fork_url, upstream_url

SECRET = "ghp_in_the_url_0123456789abcdef"


@pytest.mark.parametrize(
    "url",
    [
        f"https://x-access-token:{SECRET}@github.com/me/vllm.git",
        f"https://{SECRET}@github.com/me/vllm.git",
        f"ssh://git:{SECRET}@github.com/me/vllm.git",
    ],
)
def test_a_url_with_credentials_is_refused_without_showing_them(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setenv("BOT_FORK_URL", url)
    monkeypatch.setenv("BOT_UPSTREAM_URL", url)
    for read in (fork_url, upstream_url):
        with pytest.raises(BotError) as refused:
            read(github_settings())
        assert SECRET not in str(refused.value) and "credentials" in str(refused.value)


@pytest.mark.parametrize(
    "url", ["https://github.com/me/vllm.git", "ssh://git@github.com/me/vllm.git", "/srv/fork.git"]
)
def test_plain_urls_pass(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("BOT_FORK_URL", url)
    assert fork_url(github_settings()) == url
