"""Which findings matter first: demand signals, and the order `bot scan` lists them in.

A finding's demand is what says someone is waiting for it:
- the open upstream issues triage tied to one of its architectures (the journal's
  ``triaged_issues``, written by ``bot propose --issue`` and any triage that records there);
- the reviewed DFlash / EAGLE-3 drafts the catalogue lists for one of its architectures (a fix
  can then be tested and used at once).

The order is stable and explained: more open issues first, then more drafts, then findings a
recipe can fix before report-only ones, then recipe, path, line and class. Nothing is weighted
by a hidden score: the signals shown are the whole reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.recipes.base import Finding

if TYPE_CHECKING:
    from bot.drafts import DraftCatalogue
    from bot.triage_outcome import TriagedIssue

DRAFT_METHODS = ("dflash", "eagle3")


@dataclass(frozen=True)
class IssueDemand:
    number: int
    url: str
    architecture: str


@dataclass(frozen=True)
class Demand:
    issues: tuple[IssueDemand, ...] = ()
    drafts: tuple[str, ...] = ()  # draft repo ids

    def to_json(self) -> dict[str, Any]:
        return {
            "open_issues": [
                {"number": i.number, "url": i.url, "architecture": i.architecture}
                for i in self.issues
            ],
            "drafts": list(self.drafts),
            "why": self.explain(),
        }

    def explain(self) -> str:
        parts = []
        if self.issues:
            parts.append("open issue " + ", ".join(f"#{i.number}" for i in self.issues))
        if self.drafts:
            parts.append("draft " + ", ".join(self.drafts))
        return "; ".join(parts) or "no demand signal"


@dataclass(frozen=True)
class Ranked:
    rank: int  # 1 is first
    finding: Finding
    demand: Demand
    fixable: bool

    def to_json(self) -> dict[str, Any]:
        return {
            **self.finding.to_json(),
            "priority": {"rank": self.rank, "fixable": self.fixable, **self.demand.to_json()},
        }


def demand_for(
    finding: Finding, issues: Iterable[TriagedIssue], catalogue: DraftCatalogue
) -> Demand:
    return demand_for_archs(finding.architectures, issues, catalogue)


def demand_for_archs(
    architectures: Iterable[str], issues: Iterable[TriagedIssue], catalogue: DraftCatalogue
) -> Demand:
    """The open issues and reviewed drafts that ask for any of ``architectures``."""
    archs = set(architectures)
    open_issues = tuple(
        IssueDemand(i.number, i.url, i.architecture)
        for i in sorted(issues, key=lambda i: i.number)
        if i.state == "open" and i.architecture is not None and i.architecture in archs
    )
    reviewed = catalogue.reviewed()
    drafts = sorted(
        {
            e.repo_id
            for arch in archs
            for e in reviewed.for_arch(arch)
            if e.method in DRAFT_METHODS and e.available
        }
    )
    return Demand(open_issues, tuple(drafts))


def rank(
    findings: Sequence[Finding],
    issues: Sequence[TriagedIssue],
    catalogue: DraftCatalogue,
    fixable: frozenset[str],
) -> list[Ranked]:
    """``findings`` in priority order; ``fixable`` names the recipes that plan fixes. A finding
    its recipe refuses to patch (``evidence.refused``: it needs a human) is not fixable and
    comes last, whatever its demand."""
    scored = [(f, demand_for(f, issues, catalogue)) for f in findings]

    def can_fix(finding: Finding) -> bool:
        return finding.recipe in fixable and not needs_human(finding)

    scored.sort(
        key=lambda item: (
            needs_human(item[0]),
            -len(item[1].issues),
            -len(item[1].drafts),
            not can_fix(item[0]),
            item[0].recipe,
            item[0].path,
            item[0].line,
            item[0].class_name,
        )
    )
    return [
        Ranked(n, finding, demand, can_fix(finding))
        for n, (finding, demand) in enumerate(scored, 1)
    ]


def needs_human(finding: Finding) -> bool:
    """The recipe found a real gap but refuses to patch it (its reason is in the evidence)."""
    return bool(finding.evidence.refusal())


def top_fixable(ranked: Sequence[Ranked], n: int) -> list[Ranked]:
    """The first ``n`` findings a recipe can fix, one per class (platform variants go together)."""
    chosen: list[Ranked] = []
    classes: set[str] = set()
    for item in ranked:
        if len(chosen) >= n:
            break
        if item.fixable and item.finding.class_name not in classes:
            classes.add(item.finding.class_name)
            chosen.append(item)
    return chosen
