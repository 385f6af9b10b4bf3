"""Helpers for the PR body's results section (rendered by bot/publish/contribution.py from the
records): log text made safe to show, and the section's markers. Everything that came from a
log or a tree is escaped."""

from __future__ import annotations

import re
from pathlib import Path

from bot.config import cache_dir, home_dir
from bot.github.identity import RESULTS_END, RESULTS_START
from bot.redact import redact

START = RESULTS_START
END = RESULTS_END

_BACKTICKS = re.compile(r"`+")


def without_local_paths(text: str) -> str:
    """Log text with this machine's bot cache, bot home and home directory named, not spelled:
    a PR body shows how the check ran, not where the operator keeps files."""
    places = [(cache_dir(), "<bot cache>"), (home_dir(), "<bot home>"), (Path.home(), "~")]
    for place, name in places:
        text = text.replace(str(place), name)
    return text


def code_block(text: str) -> str:
    """A fenced block whose fence is longer than any run of backticks inside it."""
    body = without_local_paths(redact(text))
    body = body.replace(START, "").replace(END, "").replace("<!--", "<! --")
    longest = max((len(m) for m in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{body}\n{fence}"


def replace_results_section(pr_markdown: str, section: str) -> str:
    """Put ``section`` between the result markers, or append a marked section."""
    block = f"{START}\n{section}\n{END}"
    start = pr_markdown.find(START)
    end = pr_markdown.find(END, start + len(START)) if start >= 0 else -1
    if start >= 0 and end >= 0:
        return pr_markdown[:start] + block + pr_markdown[end + len(END) :]
    if not pr_markdown.strip():
        return block + "\n"
    return pr_markdown.rstrip("\n") + "\n\n" + block + "\n"
