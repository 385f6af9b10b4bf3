"""What a maintainer can do to a proposal. Approve publishes, and does so exactly once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.content_hash import patch_hash, review_hash
from bot.errors import BotError
from bot.journal.store import (
    APPROVABLE,
    APPROVED,
    PROPOSED,
    REJECTABLE,
    REJECTED,
    REVERIFIABLE,
    Journal,
)
from bot.plan import read_plan_dir
from bot.publish.attestation import (
    APPROVER,
    DASHBOARD,
    READ_EVERY_LINE,
    Attestation,
    Signer,
    given,
)
from bot.publish.contrib_rules import quote
from bot.redact import redact

if TYPE_CHECKING:
    from bot.publish.pr import PublishResult

# publish(plan_dir, reviewer, approved_hash, attestation=..., requested_by=...): it must refuse
# a plan whose review hash is not approved_hash, and publish only on the attestation given.
Publisher = Callable[..., "PublishResult"]


def default_publisher(
    plan_dir: Path,
    reviewer: str | None,
    approved_hash: str,
    *,
    attestation: Attestation | None = None,
    requested_by: str | None = None,
    **context: Any,
) -> PublishResult:
    """Publish on the attestation given; ``context`` (client, settings, budget) goes to
    :func:`bot.publish.pr.publish_plan` as it is."""
    from bot.publish.pr import publish_plan

    return publish_plan(
        plan_dir,
        reviewer=reviewer,
        approved_hash=approved_hash,
        attest=given(attestation),
        requested_by=requested_by,
        **context,
    )


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
    approved_hash: str,
    read_every_line: bool = False,
    via: str = DASHBOARD,
    signoff: tuple[str, str, tuple[str, ...]] = ("", "", ()),
) -> Outcome:
    """Claim the approval atomically; only the request that wins the claim publishes.

    ``approved_hash`` is the review hash (patch.diff + pr.md) of what the maintainer saw; it is
    recorded with the approval, and nothing is published unless the plan about to be
    published still has exactly that hash. ``login``, a GitHub login, is recorded as the actor;
    with ``read_every_line`` (the form's box, or the dashboard issue's line that says so) it is
    their attestation the PR states, bound to the patch they read. Without it nothing is
    published. ``signoff`` is the name and e-mail address the maintainer confirmed on the form
    (and the addresses GitHub listed as verified when they signed in): the commit is theirs,
    author and ``Signed-off-by`` (:mod:`bot.publish.signoff`); without them nothing is
    published either.
    """
    if not approved_hash:
        return Outcome(False, "Not approved: the form did not say what you reviewed; reload.")
    if not read_every_line:
        return Outcome(
            False,
            f"Not approved: tick that you read every changed line first ({quote(READ_EVERY_LINE)})",
        )
    name, email, verified = signoff
    try:
        signer = Signer(name, email, verified)
    except BotError as exc:
        return Outcome(False, f"Not approved: {exc}")
    note = f"approved for publishing: review {approved_hash[:80]}"
    left = journal.claim(proposal_id, APPROVABLE, APPROVED, login, note)
    if left is None:
        state = journal.proposal(proposal_id).state
        return Outcome(False, f"Not approved: the proposal is already {state}.")
    publish = publish or default_publisher
    try:
        plan_dir = journal.materialise(proposal_id)
        shipping = read_plan_dir(plan_dir)
        if review_hash(shipping.patch, shipping.pr_markdown, shipping.plan) != approved_hash:
            _hand_back(journal, proposal_id, left, "refused: the content changed after review")
            return Outcome(
                False,
                "Not published: the patch or write-up changed after you loaded the page. "
                "Review it again.",
            )
        attestation = Attestation(
            login, APPROVER, via, True, patch_hash(shipping.patch), signer=signer
        )
        result = publish(
            plan_dir,
            login,
            approved_hash,
            attestation=attestation,
            requested_by=journal.requested_by(proposal_id),
        )
    except Exception as exc:  # noqa: BLE001 - any failure hands the proposal back
        detail = redact(str(exc)).splitlines()[0][:300] if str(exc) else type(exc).__name__
        _hand_back(journal, proposal_id, left, f"publishing failed: {detail}")
        if isinstance(exc, BotError):
            return Outcome(False, f"Publishing failed: {detail}")
        return Outcome(False, f"Publishing failed ({type(exc).__name__}): {detail}")
    from bot.pipeline import record_published

    message = redact(str(result.message or "published"))
    if not record_published(journal, proposal_id, result, login):
        # Nothing reached GitHub (rate-limited, nothing to do): hand the proposal back.
        _hand_back(journal, proposal_id, left, f"not published: {message}")
        return Outcome(False, f"Not published: {message}")
    journal.add_event(proposal_id, login, "published", message)
    return Outcome(True, f"Approved and published: {message}")


def _hand_back(journal: Journal, proposal_id: int, state: str, note: str) -> None:
    # Only from approved: a re-propose meanwhile has already moved it on, and that stands.
    journal.claim(proposal_id, (APPROVED,), state, "bot", note)


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
