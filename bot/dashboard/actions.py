"""What a maintainer can do to a proposal. Approve publishes, and does so exactly once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from bot.publish import PublishResult

Publisher = Callable[[Path, str | None], "PublishResult"]


def default_publisher(plan_dir: Path, reviewer: str | None) -> PublishResult:
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
    message = redact(str(result.message or "published"))
    if result.pr_state:  # the one mapping from publishing outcomes (bot.publish.PR_STATE_AFTER)
        journal.record_pr(
            proposal_id, result.pr_number, result.pr_url, result.pr_state, login, result.comment_url
        )
    elif result.comment_url:
        journal.record_comment(proposal_id, result.comment_url, login)
    else:  # nothing reached GitHub (rate-limited, nothing to do): hand the proposal back
        journal.transition(proposal_id, left, "bot", f"not published: {message}")
        return Outcome(False, f"Not published: {message}")
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
