"""What a maintainer can do to a proposal. Approve publishes, and does so exactly once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.errors import BotError
from bot.redact import redact
from bot.store import (
    APPROVABLE,
    APPROVED,
    PROPOSED,
    REJECTABLE,
    REJECTED,
    REVERIFIABLE,
    Journal,
)

# publish(plan_dir, reviewer) -> PublishResult(action, pr_number, pr_url, comment_url, message)
Publisher = Callable[[Path, str | None], Any]


def default_publisher(plan_dir: Path, reviewer: str | None) -> Any:
    from bot.publish import publish_plan

    return publish_plan(plan_dir, reviewer=reviewer)


@dataclass
class Outcome:
    done: bool
    message: str


def approve(
    journal: Journal,
    proposal_id: int,
    login: str,
    publish: Publisher | None = None,
    *,
    named_reviewer: bool = True,
) -> Outcome:
    """Claim the approval atomically; only the request that wins the claim publishes.

    ``login`` is recorded as the actor; it is named (and so mentioned) in the PR only when it
    is a real GitHub login (``named_reviewer``), not a label such as the dashboard issue's.
    """
    left = journal.claim(proposal_id, APPROVABLE, APPROVED, login, "approved for publishing")
    if left is None:
        state = journal.proposal(proposal_id).state
        return Outcome(False, f"Not approved: the proposal is already {state}.")
    publish = publish or default_publisher
    try:
        plan_dir = journal.materialise(proposal_id)
        result = publish(plan_dir, login if named_reviewer else None)
    except Exception as exc:  # noqa: BLE001 - any failure hands the proposal back
        detail = redact(str(exc)).splitlines()[0][:300] if str(exc) else type(exc).__name__
        journal.transition(proposal_id, left, "bot", f"publishing failed: {detail}")
        if isinstance(exc, BotError):
            return Outcome(False, f"Publishing failed: {detail}")
        return Outcome(False, f"Publishing failed ({type(exc).__name__}): {detail}")
    pr_number = getattr(result, "pr_number", None)
    pr_url = getattr(result, "pr_url", None)
    comment_url = getattr(result, "comment_url", None)
    message = redact(str(getattr(result, "message", "") or "published"))
    if pr_number:
        journal.record_pr(proposal_id, pr_number, pr_url, "open", login, comment_url)
    elif comment_url:
        journal.record_comment(proposal_id, comment_url, login)
    journal.add_event(proposal_id, login, "published", message)
    return Outcome(True, f"Approved and published: {message}")


def reject(journal: Journal, proposal_id: int, login: str, note: str = "") -> Outcome:
    if journal.claim(proposal_id, REJECTABLE, REJECTED, login, note[:500]) is None:
        state = journal.proposal(proposal_id).state
        return Outcome(False, f"Not rejected: the proposal is {state}.")
    return Outcome(True, "Rejected.")


def reverify(journal: Journal, proposal_id: int, login: str) -> Outcome:
    """Queue the proposal for another verification run (`bot verify` picks up `proposed`)."""
    if journal.claim(proposal_id, REVERIFIABLE, PROPOSED, login, "re-verify requested") is None:
        state = journal.proposal(proposal_id).state
        return Outcome(False, f"Cannot re-verify: the proposal is {state}.")
    return Outcome(True, "Queued for re-verification.")
