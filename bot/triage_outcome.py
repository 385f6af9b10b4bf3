"""What triage concluded about an issue: the record :func:`bot.triage.issue.triage_issue`
returns, propose keeps in plan.json (``triage``) and the dashboard shows; and the journal's
record of a triaged issue, which the scan's priority reads as demand.

Its own module beside the plan, not in ``bot/triage/``: publish reads plan.json and never
imports the triage package (tests/test_publish_imports.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.errors import BotError
from bot.jsonio import JsonRecord

THRESHOLD = 0.7
PROPOSE, ASK, SILENT = "propose", "ask", "silent"
OUTCOMES = (PROPOSE, ASK, SILENT)


@dataclass(frozen=True)
class Triage(JsonRecord):
    architecture: str | None
    method: str | None  # "eagle3" | "dflash" | "dspark" | None
    model_mentions: tuple[str, ...]
    draft: str | None
    confidence: float
    reasons: tuple[str, ...]
    signature: dict[str, Any] | None
    missing: tuple[str, ...]
    crash_site: str | None = None  # "path:line" of the raise that matches the issue's error
    alternatives: tuple[str, ...] = ()
    # propose (ours and clear) | ask (ours, ambiguous: ``missing`` is the one question) |
    # silent (not ours, or a closed issue: nothing is posted, the triage is only recorded)
    outcome: str = SILENT
    architectures: tuple[str, ...] = ()  # every class the plan covers, primary first

    @property
    def confident(self) -> bool:
        return self.confidence >= THRESHOLD

    def to_json(self) -> dict[str, Any]:
        """Its fields and, for a reader, whether it is ``confident``."""
        return {**super().to_json(), "confident": self.confident}

    @classmethod
    def from_json(cls, data: object, where: str) -> Triage:
        if not isinstance(data, dict):
            raise BotError(f"{where} must be an object")
        triage = super().from_json({k: v for k, v in data.items() if k != "confident"}, where)
        if data.get("confident", triage.confident) != triage.confident:
            raise BotError(f"{where}: `confident` is not what its confidence gives")
        if triage.outcome not in OUTCOMES:
            raise BotError(f"{where}: `outcome` is not one of {', '.join(OUTCOMES)}")
        return triage


@dataclass(frozen=True)
class TriagedIssue:
    """An upstream issue and the architecture triage tied it to (None: triage could not)."""

    number: int
    title: str
    url: str
    state: str  # GitHub's: "open" or "closed"
    architecture: str | None
    recorded_at: str = ""
