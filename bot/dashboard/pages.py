"""The HTML pages and the form actions. Plain forms and redirects: no JavaScript needed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse

from bot.content_hash import review_hash
from bot.dashboard import actions
from bot.dashboard.actions import Outcome
from bot.dashboard.auth import (
    check_csrf,
    csrf_token,
    end_session,
    login_for_token,
    require_maintainer,
    signoff_of,
    start_session,
    viewer_of,
)
from bot.errors import BotError
from bot.journal.store import (
    APPROVABLE,
    REJECTABLE,
    REVERIFIABLE,
    STATES,
    FindingFilter,
    FindingRow,
    Journal,
    ProposalRecord,
)

router = APIRouter(include_in_schema=False)


def _journal(request: Request) -> Journal:
    return request.app.state.journal


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    template = request.app.state.templates.get_template(name)
    context.update(
        request=request,
        viewer=viewer_of(request),
        csrf=csrf_token(request),
        flash=request.session.pop("flash", None),
        upstream=request.app.state.settings.upstream,
        states=STATES,
    )
    return HTMLResponse(template.render(**context), status_code=status_code)


def error_page(request: Request, status_code: int, detail: str) -> HTMLResponse:
    return render(request, "error.html", status_code=status_code, status=status_code, detail=detail)


def _proposal_or_404(journal: Journal, proposal_id: int) -> ProposalRecord:
    try:
        return journal.proposal(proposal_id)
    except BotError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None


def _back_to(request: Request, proposal_id: int, message: str) -> RedirectResponse:
    request.session["flash"] = message
    return RedirectResponse(f"/proposals/{proposal_id}", status_code=303)


@router.get("/", response_class=HTMLResponse)
def overview(
    request: Request, recipe: str = "", version: str = "", q: str = "", state: str = ""
) -> HTMLResponse:
    journal = _journal(request)
    recipes, versions = journal.finding_facets()
    where = FindingFilter(recipe=recipe or None, version=version or None, text=q or None)
    proposals = journal.proposals([state] if state in STATES else None)
    findings = journal.findings(where)
    return render(
        request,
        "overview.html",
        summary=journal.summary(),
        proposals=proposals,
        findings=findings,
        demand=finding_demand(journal, findings),
        report_only=_report_only_recipes(),
        recipes=recipes,
        versions=versions,
        chosen={"recipe": recipe, "version": version, "q": q, "state": state},
    )


def finding_demand(journal: Journal, findings: list[FindingRow]) -> dict[int, str]:
    """Finding id -> its demand signal as `bot scan` explains it (bot/scan/priority.py); a core
    finding's is the demand of the findings that build on it, each named
    (bot/publish/demand.py)."""
    from bot.drafts import load_catalogue
    from bot.scan.priority import demand_for_archs

    issues, catalogue = journal.triaged_issues(), load_catalogue()
    own: dict[int, str] = {}
    for row in findings:
        demand = demand_for_archs(row.architectures, issues, catalogue)
        if demand.issues or demand.drafts:
            own[row.id] = demand.explain()
    shown = dict(own)
    for row in findings:
        names = set(_dependents(row))
        through = [f"{r.class_name} builds on it: {own[r.id]}" for r in findings
                   if r.class_name in names and r.id in own]  # fmt: skip
        if through:
            shown[row.id] = "; ".join(dict.fromkeys(through))
    return shown


def _dependents(row: FindingRow) -> tuple[str, ...]:
    """The classes whose fix builds on the finding's (a core finding's dependents)."""
    from bot.recipes.base import Finding

    data = {"recipe": row.recipe, "class": row.class_name, "module": "", "path": row.path}
    data |= {"line": row.line or 0, "architectures": row.architectures, "evidence": row.evidence}
    try:
        return Finding.from_json(data).evidence.dependents()
    except BotError:
        return ()


def _report_only_recipes() -> frozenset[str]:
    from bot.recipes import RECIPES, fixes

    return frozenset(r.name for r in RECIPES if not fixes(r))


def builds_on(plan: dict[str, Any]) -> list[dict[str, str]]:
    """The core fixes the plan's classes build on, each once, as the journal's plan holds them
    (shown, never acted on: publish re-reads them from plan.json)."""
    findings = [m.get("finding") for m in plan.get("members") or [] if isinstance(m, dict)]
    found: dict[tuple[str, ...], dict[str, str]] = {}
    for finding in [plan.get("finding"), *findings]:
        evidence = finding.get("evidence") if isinstance(finding, dict) else None
        core = evidence.get("builds_on") if isinstance(evidence, dict) else None
        if isinstance(core, dict):
            shown = {k: str(core.get(k, "")) for k in ("recipe", "name", "path", "why")}
            found.setdefault(tuple(shown.values())[:3], shown)
    return list(found.values())


@router.get("/proposals/{proposal_id}", response_class=HTMLResponse)
def proposal_page(request: Request, proposal_id: int) -> HTMLResponse:
    journal = _journal(request)
    _proposal_or_404(journal, proposal_id)
    # What publishing would read, so that what is approved is exactly what was shown.
    proposal = journal.as_published(proposal_id)
    return render(
        request,
        "proposal.html",
        proposal=proposal,
        review_hash=review_hash(proposal.patch, proposal.pr_markdown, proposal.plan),
        triage=proposal.plan.get("triage") or {},
        builds_on=builds_on(proposal.plan),
        verification=proposal.plan.get("verification") or {},
        verifications=journal.verifications(proposal_id),
        events=journal.events(proposal_id),
        can_approve=proposal.state in APPROVABLE,
        can_reject=proposal.state in REJECTABLE,
        can_reverify=proposal.state in REVERIFIABLE,
        signoff=signoff_of(request),
    )


async def _act(
    request: Request, proposal_id: int, csrf: str, action: Callable[..., Outcome], *args: Any
) -> RedirectResponse:
    """Every maintainer action: CSRF, identity, existence, then the action off the event loop."""
    check_csrf(request, csrf)
    viewer = require_maintainer(request)
    journal = _journal(request)
    _proposal_or_404(journal, proposal_id)
    outcome = await run_in_threadpool(action, journal, proposal_id, viewer.login or "", *args)
    return _back_to(request, proposal_id, outcome.message)


@router.post("/proposals/{proposal_id}/approve")
async def approve(
    request: Request,
    proposal_id: int,
    csrf: str = Form(""),
    review_hash: str = Form(""),
    read_every_line: str = Form(""),
    signoff_name: str = Form(""),
    signoff_email: str = Form(""),
) -> RedirectResponse:
    publish = request.app.state.publish
    # The login is the session's, never the form's; the addresses GitHub vouched for too.
    verified = signoff_of(request)["verified"]

    def approve_reviewed(journal: Journal, proposal_id: int, login: str) -> Outcome:
        return actions.approve(
            journal,
            proposal_id,
            login,
            publish,
            approved_hash=review_hash,
            read_every_line=read_every_line == "yes",
            signoff=(signoff_name, signoff_email, verified),
        )

    return await _act(request, proposal_id, csrf, approve_reviewed)


@router.post("/proposals/{proposal_id}/reject")
async def reject(
    request: Request, proposal_id: int, csrf: str = Form(""), note: str = Form("")
) -> RedirectResponse:
    return await _act(request, proposal_id, csrf, actions.reject, note)


@router.post("/proposals/{proposal_id}/reverify")
async def reverify(request: Request, proposal_id: int, csrf: str = Form("")) -> RedirectResponse:
    return await _act(request, proposal_id, csrf, actions.reverify)


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request) -> HTMLResponse:
    return render(request, "login.html", error=None)


@router.post("/login", response_model=None)
async def login(
    request: Request, csrf: str = Form(""), token: str = Form("")
) -> HTMLResponse | RedirectResponse:
    check_csrf(request, csrf)
    if not token.strip():
        return render(request, "login.html", status_code=400, error="Paste a GitHub token.")
    try:
        account = await run_in_threadpool(
            login_for_token, request.app.state.settings.api_url, token.strip()
        )
    except BotError as exc:
        return render(request, "login.html", status_code=403, error=str(exc))
    # The token was used for those calls: it is not stored in the session, nor echoed.
    start_session(request, account)
    login_name = account.login
    maintainer = login_name.lower() in request.app.state.settings.maintainers
    request.session["flash"] = (
        f"Signed in as {login_name}."
        if maintainer
        else f"Signed in as {login_name}, who is not a maintainer: read-only."
    )
    return RedirectResponse("/", status_code=303)


@router.post("/logout")
def logout(request: Request, csrf: str = Form("")) -> RedirectResponse:
    check_csrf(request, csrf)
    end_session(request)
    return RedirectResponse("/", status_code=303)
