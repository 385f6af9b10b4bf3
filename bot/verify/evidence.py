"""The evidence a recipe requires before its plan counts as verified, and publish may push it.

A recipe names the local checks it cannot do without (``required_checks``, e.g. eagle3-enable's
``smoke``: the patched model's CPU forward collects one aux state per requested layer and is
unchanged without them). ``bot verify`` fails a plan whose required check did not pass (a check
that could not run is not evidence), and ``bot publish`` refuses a ready plan whose recorded
verification lacks it, so an edit that changes a model's forward never reaches a PR unproven.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.errors import BotError
from bot.plan import READY, Plan
from bot.verify.checks import Check


def required_checks(recipe: str | None) -> tuple[str, ...]:
    from bot.recipes import recipe_named

    found = recipe_named(recipe) if recipe else None
    return tuple(getattr(found, "required_checks", ()))


# What the smoke harness says once it has proven the aux VALUES (each aux state, fed back as
# the stream into its layer, leads the decoder to the model's output), not only their count
# and shape. A smoke check recorded before the harness proved values lacks it.
SMOKE_VALUES_PROVEN = "fed back as the stream into its layer"


def missing_evidence(recipe: str | None, checks: Sequence[dict[str, Any]]) -> str | None:
    """Why ``checks`` (as recorded in plan.json) lack what ``recipe`` requires, or None."""
    for name in required_checks(recipe):
        found = [c for c in checks if isinstance(c, dict) and c.get("name") == name]
        passed = [c for c in found if c.get("passed") is True]
        if not passed:
            detail = str(found[0].get("detail") or "") if found else "it was not run"
            return f"the {recipe} recipe requires a passed {name} check ({detail[:300]})"
        if name == "smoke" and not any(
            SMOKE_VALUES_PROVEN in str(c.get("detail") or "") for c in passed
        ):
            return (
                f"the {recipe} recipe requires a passed smoke check that proves the aux values "
                "(this one was recorded before the check did; run `bot verify` again)"
            )
    return None


def evidence_check(recipe: str | None, checks: Sequence[Check]) -> Check | None:
    """A failing ``evidence`` check when a required check did not pass; None when the recipe
    requires nothing."""
    if not required_checks(recipe):
        return None
    missing = missing_evidence(recipe, [c.to_json() for c in checks])
    if missing:
        return Check("evidence", False, missing)
    return Check("evidence", True, f"{', '.join(required_checks(recipe))} passed")


def require_evidence(plan: Plan) -> None:
    """For publish: a ready plan of a recipe with required checks carries them, passed."""
    if plan.status != READY or not required_checks(plan.recipe):
        return
    verification = plan.verification or {}
    checks = verification.get("checks") if isinstance(verification, dict) else None
    missing = missing_evidence(plan.recipe, checks if isinstance(checks, list) else [])
    if missing:
        raise BotError(f"refused: {missing}; run `bot verify` with the release's environment")
