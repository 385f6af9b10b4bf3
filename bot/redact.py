"""Keep secrets out of everything the bot prints or writes."""

from __future__ import annotations

import logging
import os
import re

_SECRET_ENV = ("GITHUB_TOKEN", "GH_TOKEN", "BOT_GITHUB_TOKEN", "HF_TOKEN")
# GitHub token shapes, for tokens that reach us by some other path than the environment.
_TOKEN_SHAPES = re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b")
_URL_CREDENTIALS = re.compile(r"(https?://)[^/@\s]+@")


def redact(text: str) -> str:
    for name in _SECRET_ENV:
        value = os.environ.get(name)
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    text = _TOKEN_SHAPES.sub("***", text)
    return _URL_CREDENTIALS.sub(r"\1***@", text)


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = ()
        return True


def install_log_redaction() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, RedactingFilter) for f in root.filters):
        root.addFilter(RedactingFilter())
    for handler in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
