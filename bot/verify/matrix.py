"""`bot scan --matrix`: findings as a GitHub Actions matrix, one job per proposal."""

from __future__ import annotations

import re
from typing import Any

# GitHub caps a matrix at 256 jobs per workflow run.
MAX_JOBS = 256
_SAFE = re.compile(r"[^A-Za-z0-9_.:/-]")


def matrix_from_findings(findings: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"include": [{recipe, class, path, line, id}, ...]}``, deduplicated and stable.

    Values are reduced to safe characters: a matrix value ends up in job names and, in a
    careless workflow, in shell commands.
    """
    seen: set[tuple[str, str, str]] = set()
    include: list[dict[str, Any]] = []
    for finding in sorted(findings, key=lambda f: (str(f.get("recipe")), str(f.get("path")))):
        recipe = _clean(finding.get("recipe"))
        class_name = _clean(finding.get("class"))
        path = _clean(finding.get("path"))
        key = (recipe, class_name, path)
        if not all(key) or key in seen:
            continue
        seen.add(key)
        include.append(
            {
                "id": f"{recipe}:{class_name}",
                "recipe": recipe,
                "class": class_name,
                "path": path,
                "line": int(finding.get("line") or 0),
            }
        )
    return {"include": include[:MAX_JOBS]}


def _clean(value: object) -> str:
    return _SAFE.sub("", str(value or ""))[:200]
