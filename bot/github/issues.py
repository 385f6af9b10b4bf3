"""Where an issue comes from (a JSON file shaped like GitHub's REST issue object, or GitHub),
and which upstream issue the bot works on.

Two deployments (docs/github-action.md):

- in the upstream repository itself: the labelled issue is upstream's, the bot works on it;
- in the operator's own repository: the labelled issue is a tracking issue there, which names
  the upstream issue (``vllm-project/vllm#33329`` or its URL); the bot works on that one.

Either way the plan's ``issue_number`` is a number in the upstream repository, so ``Fixes #N``
and the bot's comments always land on the issue the fix is for, never on an unrelated issue of
the same number.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot import jsonio
from bot.errors import BotError

MAX_ISSUE_FILE_BYTES = 8 * 1024 * 1024
# GitHub's numbers fit SQLite's 64-bit integers with room to spare; publish uses the same bound.
MAX_ISSUE_NUMBER = 10**9


_REPO_URL = re.compile(r"/repos/([\w.-]+/[\w.-]+)/?$")
_HTML_URL = re.compile(r"^https?://[^/\s]+/([\w.-]+/[\w.-]+)/issues/\d+/?$")
_MAX_ISSUE_NUMBER = 10**9


@dataclass(frozen=True)
class UpstreamIssue:
    """The upstream issue the bot works on, and the tracking issue that named it (if any)."""

    issue: dict[str, Any]
    tracking: str | None = None  # "owner/name#N" in the operator's repository


def load_issue(
    number: int,
    issue_file: str | None,
    upstream: str,
    fetch: Callable[[int], dict[str, Any]] | None = None,
) -> UpstreamIssue:
    """Issue ``number`` (from ``issue_file``, else from upstream on GitHub), resolved to the
    upstream issue it is about. ``fetch`` reads an upstream issue by number."""
    if isinstance(number, bool) or not 0 < number < MAX_ISSUE_NUMBER:
        raise BotError(f"not an issue number: {str(number)[:20]} (1 to {MAX_ISSUE_NUMBER - 1})")
    fetch = fetch or _fetcher(upstream)
    if issue_file is None:
        return UpstreamIssue(fetch(number))
    issue = read_issue_file(Path(issue_file))
    if issue.get("number") not in (None, number):
        raise BotError(f"{issue_file} is issue #{issue.get('number')}, not #{number}")
    issue.setdefault("number", number)
    return resolve_upstream_issue(issue, upstream, fetch)


def _fetcher(upstream: str) -> Callable[[int], dict[str, Any]]:
    def fetch(number: int) -> dict[str, Any]:
        from bot.github.client import GitHubClient, GitHubUnreachable

        try:
            return GitHubClient().get_issue(number, repo=upstream)
        except GitHubUnreachable as exc:
            raise BotError(
                f"{exc}; offline, give the issue as a file: --issue-file F (GitHub's REST shape)"
            ) from None

    return fetch


def own_logins(issue: dict[str, Any]) -> frozenset[str]:
    """The bot's own logins, whose comments in ``issue``'s thread triage does not read:
    ``BOT_LOGIN`` (the Action's token cannot read its own user), else the token's user. Asked
    only when the thread has comments; none without a token or when GitHub does not answer (the
    status comment's marker still tells the bot's own)."""
    comments = issue.get("comments_list")
    if not isinstance(comments, list) or not comments:
        return frozenset()
    from bot.github.client import GitHubClient

    try:
        client = GitHubClient()
        if not client.authenticated and not os.environ.get("BOT_LOGIN", "").strip():
            return frozenset()
        return frozenset({client.login})
    except BotError:
        return frozenset()


def issue_repository(issue: dict[str, Any]) -> str | None:
    """``owner/name`` of the repository the issue belongs to, from its REST URLs."""
    for key, pattern in (("repository_url", _REPO_URL), ("html_url", _HTML_URL)):
        value = issue.get(key)
        found = pattern.search(value) if isinstance(value, str) else None
        if found:
            return found.group(1)
    return None


def upstream_references(text: str, upstream: str) -> list[int]:
    """Issue numbers in ``upstream`` that ``text`` names, as ``owner/name#N`` or an issue URL."""
    name = re.escape(upstream)
    short = re.compile(rf"(?<![\w/.-]){name}#(\d{{1,10}})\b", re.IGNORECASE)
    url = re.compile(rf"\bhttps?://[^/\s]+/{name}/issues/(\d{{1,10}})\b", re.IGNORECASE)
    numbers = {int(m.group(1)) for pattern in (short, url) for m in pattern.finditer(text)}
    return sorted(n for n in numbers if 0 < n < _MAX_ISSUE_NUMBER)


def resolve_upstream_issue(
    issue: dict[str, Any], upstream: str, fetch: Callable[[int], dict[str, Any]]
) -> UpstreamIssue:
    """The issue itself when it is upstream's (or says nowhere where it lives: a hand-made
    issue file); else the one upstream issue it names, read from upstream."""
    repository = issue_repository(issue)
    if repository is None or repository.lower() == upstream.lower():
        return UpstreamIssue(issue)
    tracking = f"{repository}#{issue.get('number')}"
    text = "\n".join(str(issue.get(key) or "") for key in ("title", "body"))
    numbers = upstream_references(text, upstream)
    if not numbers:
        raise BotError(
            f"{tracking} is not an issue of {upstream} and names none; "
            f"write the upstream issue in it as {upstream}#NUMBER or its URL"
        )
    if len(numbers) > 1:
        listed = ", ".join(f"#{n}" for n in numbers[:5])
        raise BotError(f"{tracking} names several {upstream} issues ({listed}); name one")
    found = fetch(numbers[0])
    if found.get("number") != numbers[0] or (issue_repository(found) or upstream) != upstream:
        raise BotError(f"{upstream}#{numbers[0]} could not be read from {upstream}")
    return UpstreamIssue(found, tracking=tracking)


def read_issue_file(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > MAX_ISSUE_FILE_BYTES:
            raise BotError(f"{path}: larger than {MAX_ISSUE_FILE_BYTES // 2**20} MiB")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BotError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BotError(f"{path}: not a JSON issue ({exc.__class__.__name__})") from None
    data = jsonio.loads(text, str(path))
    if not isinstance(data, dict):
        raise BotError(f"{path}: an issue is a JSON object")
    for key in ("title", "body"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise BotError(f"{path}: `{key}` must be a string")
    number = data.get("number")
    if number is not None and (isinstance(number, bool) or not isinstance(number, int)):
        raise BotError(f"{path}: `number` must be an integer")
    if number is not None and not 0 < number < MAX_ISSUE_NUMBER:
        raise BotError(f"{path}: `number` is not an issue number (1 to {MAX_ISSUE_NUMBER - 1})")
    return data
