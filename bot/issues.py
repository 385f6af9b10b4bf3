"""Where an issue comes from: a JSON file shaped like GitHub's REST issue object, or GitHub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot import jsonio
from bot.errors import BotError

MAX_ISSUE_FILE_BYTES = 8 * 1024 * 1024


def load_issue(number: int, issue_file: str | None) -> dict[str, Any]:
    if issue_file is None:
        from bot.github import GitHubClient

        return GitHubClient().get_issue(number)
    issue = read_issue_file(Path(issue_file))
    if issue.get("number") not in (None, number):
        raise BotError(f"{issue_file} is issue #{issue.get('number')}, not #{number}")
    issue.setdefault("number", number)
    return issue


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
    return data
