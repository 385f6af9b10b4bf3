"""Reading an issue's thread: the title, the body and the reporter's comments, each capped and
cleaned (HTML comments dropped, bidi controls stripped) before anything searches it."""

from __future__ import annotations

import re
from typing import Any

from bot.github.identity import is_status_comment

MAX_PART_CHARS = 64 * 1024
MAX_COMMENTS = 50


_BIDI = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)


def clean_text(text: str) -> tuple[str, bool]:
    """Cap, drop HTML comments, strip bidi controls. Returns (text, was_truncated)."""
    truncated = len(text) > MAX_PART_CHARS
    text = text[:MAX_PART_CHARS]
    text = _HTML_COMMENT.sub(" ", text)
    return _BIDI.sub("", text), truncated


def _reporters_comments(
    comments: list[Any], own_logins: frozenset[str], reasons: list[str]
) -> list[Any]:
    """The thread without the bot's own comments: its sticky status comment (by its marker,
    whoever's token wrote it) and anything the token's login wrote. A rerun reads what people
    said, never the bot's own question or status as if the reporter had written it."""
    logins = {login.lower() for login in own_logins}
    kept, skipped = [], 0
    for comment in comments:
        if isinstance(comment, dict):
            body = comment.get("body")
            user = comment.get("user")
            login = user.get("login") if isinstance(user, dict) else None
            if (isinstance(body, str) and is_status_comment(body)) or (
                isinstance(login, str) and login.lower() in logins
            ):
                skipped += 1
                continue
        kept.append(comment)
    if skipped:
        reasons.append(f"{skipped} of the bot's own comments were not read")
    return kept


def issue_parts(
    issue: dict[str, Any], reasons: list[str], own_logins: frozenset[str] = frozenset()
) -> list[str]:
    raw: list[tuple[str, object]] = [("title", issue.get("title")), ("body", issue.get("body"))]
    comments = issue.get("comments_list") or []
    if not isinstance(comments, list):
        comments = []
    comments = _reporters_comments(comments, own_logins, reasons)
    if len(comments) > MAX_COMMENTS:
        reasons.append(f"only the first {MAX_COMMENTS} of {len(comments)} comments were read")
    for number, comment in enumerate(comments[:MAX_COMMENTS], start=1):
        body = comment.get("body") if isinstance(comment, dict) else None
        raw.append((f"comment {number}", body))
    parts = []
    for where, value in raw:
        if not isinstance(value, str) or not value:
            continue
        cleaned, truncated = clean_text(value)
        if truncated:
            reasons.append(
                f"the {where} is longer than {MAX_PART_CHARS} characters; read the start"
            )
        parts.append(cleaned)
    return parts
