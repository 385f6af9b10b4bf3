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


class OnlyTheBotBelowError(logging.Filter):
    """Without ``-v``, a library's notices (a retry, a wait) are not the run's errors: the bot
    says in one line what went wrong, so only its own loggers speak below ERROR."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or record.name.split(".")[0] == "bot"


def install_log_redaction(verbose: bool = True) -> None:
    """Redaction on every root handler (each library's records reach them), and without
    ``verbose`` only the bot's own records below ERROR."""
    root = logging.getLogger()
    if not any(isinstance(f, RedactingFilter) for f in root.filters):
        root.addFilter(RedactingFilter())
    for handler in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
        if not verbose and not any(isinstance(f, OnlyTheBotBelowError) for f in handler.filters):
            handler.addFilter(OnlyTheBotBelowError())


def detach_library_handlers(name: str) -> None:
    """Remove the handlers a library gave its own logger (PyGithub 2.x adds a stderr handler
    and sets INFO at import): its records then reach only the root's handlers, redacted and
    filtered like the bot's own, instead of printing a second, unredacted copy."""
    logger = logging.getLogger(name)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True
