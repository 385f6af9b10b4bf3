"""The evidence a recipe requires before its plan counts as verified, and publish may push it.

A recipe names the local checks it cannot do without (``Recipe.required_checks``, e.g. the
decoder-enabling recipe's ``smoke``: the patched model's CPU forward collects one aux state per
requested layer and is unchanged without them). ``bot verify`` fails a plan whose required
check did not pass (a check that could not run is not evidence), and ``bot publish`` refuses a
ready plan whose recorded verification lacks it, so an edit that changes a model's forward
never reaches a PR unproven.

The engine check (the real vLLM engine on CPU, EAGLE-3 and DFlash before and after) gates the
recipes that change behaviour (``Recipe.engine_gated``): where the engine ran the target it must
have passed; where it could not, the check says "not checked: <reason>" (shown in the plan and
the PR) and the smoke check stays the gate. A verification with no engine check at all is
refused: whether the engine could run it was never asked.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.errors import BotError
from bot.plan import READY, Plan
from bot.verification import Check


def required_checks(recipe: str | None) -> tuple[str, ...]:
    from bot.recipes import recipe_named

    found = recipe_named(recipe) if recipe else None
    return found.required_checks if found is not None else ()


def engine_gated(recipe: str | None) -> bool:
    """Whether ``recipe``'s edit changes what runs, so the engine check gates its plans."""
    from bot.recipes import recipe_named

    found = recipe_named(recipe) if recipe else None
    return found is not None and found.engine_gated


def values_proven(check: Check) -> bool:
    """Whether a recorded smoke check proved the aux VALUES (each aux state, fed back as the
    stream into its layer, leads the decoder to the model's output), not only their count and
    shape: the harness's ``values_proven`` field, kept in the check's record. A smoke check
    recorded before the harness proved values lacks it."""
    return check.record is not None and check.record.get("values_proven") is True


NOT_CHECKED = "not checked: "


def missing_engine_evidence(recipe: str | None, checks: Sequence[Check]) -> str | None:
    """Why ``checks`` lack the engine check ``recipe`` needs, or None (passed, or not checked
    with the reason the engine could not run it)."""
    if not engine_gated(recipe):
        return None
    found = [c for c in checks if c.name == "engine"]
    if not found:
        return f"the {recipe} recipe requires the engine check's result, and it was not run"
    for check in found:
        if check.passed is False:
            return f"the {recipe} recipe requires a passed engine check ({check.detail[:300]})"
        if check.passed is None and not check.detail.startswith(NOT_CHECKED):
            return f"the {recipe} recipe's engine check neither passed nor says why not"
    return None


def engine_line(checks: Sequence[Check]) -> str | None:
    """``engine: passed ...`` / ``engine: not checked: <reason>`` for the plan and the PR."""
    for check in checks:
        if check.name == "engine":
            if check.passed is None:
                return f"engine: {check.detail}"
            return f"engine: {'passed' if check.passed else 'failed'}: {check.detail}"
    return None


def missing_evidence(recipe: str | None, checks: Sequence[Check]) -> str | None:
    """Why ``checks`` (verify's, or plan.json's read back) lack what ``recipe`` requires, or
    None."""
    for name in required_checks(recipe):
        found = [c for c in checks if c.name == name]
        passed = [c for c in found if c.passed is True]
        if not passed:
            detail = found[0].detail if found else "it was not run"
            return f"the {recipe} recipe requires a passed {name} check ({detail[:300]})"
        if name == "smoke" and not any(values_proven(c) for c in passed):
            return (
                f"the {recipe} recipe requires a passed smoke check that proves the aux values "
                "(this one was recorded before the check did; run `bot verify` again)"
            )
    return missing_engine_evidence(recipe, checks)


def evidence_check(recipe: str | None, checks: Sequence[Check]) -> Check | None:
    """A failing ``evidence`` check when a required check did not pass; None when the recipe
    requires nothing."""
    if not required_checks(recipe) and not engine_gated(recipe):
        return None
    missing = missing_evidence(recipe, checks)
    if missing:
        return Check("evidence", False, missing)
    said = [f"{', '.join(required_checks(recipe))} passed"] if required_checks(recipe) else []
    if engine_gated(recipe):
        said.append(str(engine_line(checks))[:400])
    return Check("evidence", True, "; ".join(said))


def require_evidence(plan: Plan) -> None:
    """For publish: a ready plan of a recipe with required checks carries them, passed."""
    if plan.status != READY or not (required_checks(plan.recipe) or engine_gated(plan.recipe)):
        return
    checks = plan.verification.checks if plan.verification else ()
    missing = missing_evidence(plan.recipe, checks)
    if missing:
        raise BotError(f"refused: {missing}; run `bot verify` with the release's environment")
