"""How findings are shown on a terminal and as JSON, in priority order (bot/scan/priority.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from bot.recipes import Finding, recipe_named
from bot.scan.priority import Ranked


def findings_json(ranked: Sequence[Ranked]) -> str:
    return json.dumps([r.to_json() for r in ranked], indent=2)


def findings_table(ranked: Sequence[Ranked]) -> str:
    if not ranked:
        return "no findings"
    rows = [("#", "RECIPE", "CLASS", "WHERE", "DEMAND", "EVIDENCE")]
    for r in ranked:
        f = r.finding
        demand = r.demand.explain() if r.demand.issues or r.demand.drafts else "-"
        rows.append(
            (str(r.rank), f.recipe, f.class_name, f"{f.path}:{f.line}", demand, _evidence_line(f))
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:5], widths)) + "  " + row[5]
        for row in rows
    ]
    counts: dict[str, int] = {}
    for r in ranked:
        counts[r.finding.recipe] = counts.get(r.finding.recipe, 0) + 1
    lines.append("")
    lines.append(", ".join(f"{n} {recipe}" for recipe, n in sorted(counts.items())))
    lines.append(
        "order: open issues triaged to the class, then reviewed drafts in the catalogue, "
        "then fixable before report-only"
    )
    return "\n".join(lines)


def _evidence_line(finding: Finding) -> str:
    recipe = recipe_named(finding.recipe)
    return recipe.evidence_line(finding) if recipe is not None else finding.summary
