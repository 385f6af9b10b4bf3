"""The JSON API behind the pages (read-only; FastAPI documents it at /openapi.json)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import BaseModel

from bot.errors import BotError
from bot.journal.store import STATES, FindingFilter, FindingRow, Journal, ProposalRecord, Summary

# Summary and FindingRow are the store's own dataclasses: FastAPI documents them as they are.
router = APIRouter(prefix="/api", tags=["journal"])


class ProposalOut(BaseModel):
    id: int
    fingerprint: str
    state: str
    title: str
    recipe: str | None
    class_name: str | None
    vllm_version: str | None
    base_commit: str | None
    issue_number: int | None
    issue_title: str | None
    pr_number: int | None
    pr_url: str | None
    comment_url: str | None
    created_at: str
    updated_at: str


class EventOut(BaseModel):
    at: str
    actor: str
    action: str
    from_state: str | None
    to_state: str | None
    note: str


class VerificationOut(BaseModel):
    passed: bool | None
    data: dict[str, Any]
    recorded_at: str


class ProposalDetailOut(ProposalOut):
    patch: str
    pr_title: str
    pr_body: str
    triage: dict[str, Any] | None
    events: list[EventOut]
    verifications: list[VerificationOut]


def _journal(request: Request) -> Journal:
    return request.app.state.journal


def _brief(proposal: ProposalRecord) -> ProposalOut:
    return ProposalOut(
        **{k: v for k, v in proposal.to_json().items() if k in ProposalOut.model_fields}
    )


@router.get("/summary", response_model=Summary)
def summary(request: Request) -> Summary:
    return _journal(request).summary()


@router.get("/proposals", response_model=list[ProposalOut])
def proposals(
    request: Request, state: str | None = Query(None, description=f"one of {', '.join(STATES)}")
) -> list[ProposalOut]:
    if state is not None and state not in STATES:
        raise HTTPException(status_code=422, detail=f"unknown state {state!r}")
    states = [state] if state else None
    return [_brief(p) for p in _journal(request).proposals(states)]


@router.get("/proposals/{proposal_id}", response_model=ProposalDetailOut)
def proposal(request: Request, proposal_id: int) -> ProposalDetailOut:
    journal = _journal(request)
    try:
        found = journal.as_published(proposal_id)  # patch and write-up as publishing reads them
    except BotError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return ProposalDetailOut(
        **_brief(found).model_dump(),
        patch=found.patch,
        pr_title=found.pr_title,
        pr_body=found.pr_body,
        triage=found.plan.get("triage"),
        events=[EventOut(**asdict(e)) for e in journal.events(proposal_id)],
        verifications=[VerificationOut(**asdict(v)) for v in journal.verifications(proposal_id)],
    )


@router.get("/findings", response_model=list[FindingRow])
def findings(
    request: Request,
    recipe: str | None = None,
    version: str | None = None,
    q: str | None = Query(None, description="text in the class name, path or architectures"),
    limit: int = Query(500, ge=1, le=5000),
) -> list[FindingRow]:
    return _journal(request).findings(FindingFilter(recipe, version, q, limit))
