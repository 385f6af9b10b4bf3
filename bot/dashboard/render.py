"""Turn stored text into safe HTML: the write-up as GitHub shows it, the diff highlighted."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

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


def api_operations(openapi: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON API's operations from its OpenAPI document, for a docs page without script."""
    operations = []
    for path, methods in sorted((openapi.get("paths") or {}).items()):
        for method, operation in methods.items():
            parameters = [
                {
                    "name": p.get("name", ""),
                    "where": p.get("in", ""),
                    "required": bool(p.get("required")),
                    "type": _schema_type(p.get("schema") or {}),
                    "description": p.get("description") or "",
                }
                for p in operation.get("parameters") or []
            ]
            ok = (operation.get("responses") or {}).get("200") or {}
            schema = ((ok.get("content") or {}).get("application/json") or {}).get("schema")
            operations.append(
                {
                    "method": method.upper(),
                    "path": path,
                    "summary": operation.get("summary") or "",
                    "parameters": parameters,
                    "returns": _schema_type(schema or {}),
                }
            )
    return operations


def _schema_type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if schema.get("type") == "array":
        return f"list of {_schema_type(schema.get('items') or {})}"
    if "anyOf" in schema:
        return " or ".join(_schema_type(s) for s in schema["anyOf"])
    return str(schema.get("type") or "any")
