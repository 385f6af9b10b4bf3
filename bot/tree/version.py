"""Which vLLM release a tree is, when it says so."""

from __future__ import annotations

from pathlib import Path


def tree_version(root: Path) -> str | None:
    """The ``Version:`` of a source distribution's PKG-INFO (release trees have one)."""
    pkg_info = root / "PKG-INFO"
    if pkg_info.is_file():
        for line in pkg_info.read_text(encoding="utf-8", errors="replace").splitlines()[:20]:
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return None
