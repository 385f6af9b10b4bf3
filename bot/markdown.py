"""Untrusted text (issue titles, questions quoting issues, logs) placed into GitHub Markdown."""

from __future__ import annotations

import html
import re

from bot.redact import redact

# Inline text never starts a line, so only the characters that act mid-line are escaped
# (`#` and `!` too: no issue auto-links, no image syntax).
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]|~#!])")


def inline(text: object, limit: int | None = None) -> str:
    """One line of untrusted text that renders as itself in a sentence or a table cell."""
    flat = " ".join(redact(str(text)).split())
    if limit is not None:
        flat = flat[:limit]
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(flat, quote=False))
