"""Turn stored text into safe HTML: the write-up as GitHub shows it, the diff highlighted."""

from __future__ import annotations

import re
from functools import lru_cache

from markdown_it import MarkdownIt
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer

_SAFE_SCHEMES = ("https://", "http://")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    # Raw HTML off, so any HTML in the text shows as escaped text. markdown-it refuses
    # javascript:/vbscript:/data: links by itself (validateLink).
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(
        ["table", "strikethrough"]
    )


def markdown_html(text: str) -> Markup:
    # GitHub hides HTML comments (the bot's hidden markers); so do we.
    return Markup(_markdown().render(_HTML_COMMENT.sub("", text or "")))


@lru_cache(maxsize=1)
def _formatter() -> HtmlFormatter:
    return HtmlFormatter(cssclass="highlight", nowrap=False)


def diff_html(patch: str) -> Markup:
    if not patch.strip():
        return Markup('<p class="muted">No patch: this proposal publishes no code change.</p>')
    return Markup(highlight(patch, DiffLexer(), _formatter()))


def pygments_css() -> str:
    return _formatter().get_style_defs(".highlight")


def safe_url(url: object) -> str | None:
    """Only http(s) links become hrefs; anything else (javascript:, data:) is dropped."""
    if isinstance(url, str) and url.startswith(_SAFE_SCHEMES):
        return url
    return None
