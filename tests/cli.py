"""Running the real ``bot`` command in a subprocess, as a user would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE_ISSUE = Path(__file__).resolve().parents[1] / "bot" / "data" / "example_issue.json"


def run_bot(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def propose_issue(
    tree: Path, out: Path, issue_file: Path = EXAMPLE_ISSUE, number: int = 33329
) -> subprocess.CompletedProcess[str]:
    """``bot propose --dry-run`` for an issue read from a JSON file."""
    return run_bot(
        "propose",
        "--issue",
        str(number),
        "--issue-file",
        str(issue_file),
        "--repo",
        str(tree),
        "--dry-run",
        "--out",
        str(out),
    )


def propose_class(tree: Path, class_name: str, out: Path) -> subprocess.CompletedProcess[str]:
    """``bot propose --dry-run`` straight from a scan finding (the proactive path)."""
    return run_bot(
        "propose", "--class", class_name, "--repo", str(tree), "--dry-run", "--out", str(out)
    )
