"""How findings are shown on a terminal and as JSON."""

from __future__ import annotations

import json

from bot.recipes import Finding


def findings_json(findings: list[Finding]) -> str:
    return json.dumps([f.to_json() for f in findings], indent=2)


def findings_table(findings: list[Finding]) -> str:
    if not findings:
        return "no findings"
    rows = [("RECIPE", "CLASS", "WHERE", "EVIDENCE")]
    for f in findings:
        rows.append((f.recipe, f.class_name, f"{f.path}:{f.line}", _evidence_line(f)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths)) + "  " + row[3]
        for row in rows
    ]
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.recipe] = counts.get(f.recipe, 0) + 1
    lines.append("")
    lines.append(", ".join(f"{n} {recipe}" for recipe, n in sorted(counts.items())))
    return "\n".join(lines)


def _evidence_line(finding: Finding) -> str:
    ev = finding.evidence
    if "decoder" in ev:
        decoder = ev["decoder"]
        attribute = decoder.get("attribute", "self.model")
        text = f"{attribute} = {decoder['name']} ({decoder['path']}:{decoder['line']})"
        if ev.get("sibling"):
            text += f"; sibling {ev['sibling']['name']}"
        if ev.get("refused"):  # eagle3-enable: why a human is needed, or the decoder's shape
            text += f"; {ev['refused']}"
        elif ev.get("shape"):
            text += f"; {ev['shape']['loop']} loop, {ev['shape']['residual']}"
        return text
    if "language_model" in ev:
        lm = ev["language_model"]
        return f"{lm['attribute']} = {lm['name']} ({lm['path']}:{lm['line']})"
    return finding.summary
