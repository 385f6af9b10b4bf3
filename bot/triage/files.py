"""`bot triage FILE|DIR ...`: triage issue files offline, in a batch, as a table or JSON.

An issue file is GitHub's REST issue object as JSON (``bot.github.issues.read_issue_file``). A
directory contributes its ``*.json`` files (not recursively) that are issue objects; other JSON
files in it (a labels file, a config) are listed as skipped. A file named on the command line must
be an issue: anything else is bad input, reported before any result is printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.drafts import load_catalogue
from bot.errors import BotError
from bot.github.issues import read_issue_file
from bot.hub import Hub
from bot.triage.issue import Triage, triage_issue

MAX_FILES = 5000


@dataclass(frozen=True)
class FileTriage:
    path: Path
    issue: dict[str, Any]
    triage: Triage

    def to_dict(self) -> dict[str, Any]:
        number = self.issue.get("number")
        return {
            "file": str(self.path),
            "number": number if isinstance(number, int) else None,
            "state": self.issue.get("state") if isinstance(self.issue.get("state"), str) else None,
            **self.triage.to_dict(),
        }


def issue_files(paths: list[Path]) -> tuple[list[tuple[Path, dict[str, Any]]], list[Path]]:
    """(issues read, JSON files in directories that are not issues). Raises on bad input."""
    issues: list[tuple[Path, dict[str, Any]]] = []
    skipped: list[Path] = []
    for path in paths:
        if path.is_dir():
            for child in sorted(path.glob("*.json")):
                if not child.is_file():
                    continue
                data = read_issue_file(child)
                if _looks_like_issue(data):
                    issues.append((child, data))
                else:
                    skipped.append(child)
        elif path.is_file():
            issues.append((path, read_issue_file(path)))
        else:
            raise BotError(f"{path}: no such file or directory")
        if len(issues) > MAX_FILES:
            raise BotError(f"more than {MAX_FILES} issue files; triage them in smaller batches")
    return issues, skipped


def _looks_like_issue(value: dict[str, Any]) -> bool:
    return "title" in value or "body" in value


def triage_files(paths: list[Path], tree: Path) -> tuple[list[FileTriage], list[Path]]:
    issues, skipped = issue_files(paths)
    if not issues:
        raise BotError("no issue files found in " + ", ".join(str(p) for p in paths))
    catalogue = load_catalogue()
    hub = Hub()  # one reader for the batch: a checkpoint named twice is read once
    results = [
        FileTriage(path, issue, triage_issue(issue, tree, catalogue, checkpoints=hub))
        for path, issue in issues
    ]
    return results, skipped


def table(results: list[FileTriage]) -> str:
    """One row per issue: where, outcome, classes, confidence, and the question or reason."""
    rows = [("issue", "outcome", "classes", "conf", "question / reason")]
    for result in results:
        t = result.triage
        number = result.issue.get("number")
        where = f"#{number}" if isinstance(number, int) else result.path.name
        note = _note(t)
        rows.append(
            (where, t.outcome, ",".join(t.architectures) or "-", f"{t.confidence:.2f}", note[:160])
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4]
        for row in rows
    )


def _note(triage: Triage) -> str:
    """The question asked, why the issue is not ours, or what names the class."""
    if triage.missing:
        return triage.missing[0]
    if triage.outcome == "silent":
        prefixes = ("not ours", "the issue is closed")
        return next((r for r in triage.reasons if r.startswith(prefixes)), "")
    primary = triage.architecture or ""
    return next((r for r in triage.reasons if primary and primary in r), "")
