"""A verification record as a job that writes plan.json could put it there (honest or not)."""

from __future__ import annotations

from typing import Any

from bot.verification import Verification

NOTHING_RECORDED: dict[str, Any] = {"passed": False, "local_passed": False, "message": ""}


def claimed(recorded: Verification | None, **fields: Any) -> Verification:
    """``recorded`` (or an empty record) with ``fields`` replaced in its JSON form, read back
    the way publish reads plan.json."""
    base = recorded.to_json() if recorded is not None else NOTHING_RECORDED
    return Verification.from_json({**base, **fields})
