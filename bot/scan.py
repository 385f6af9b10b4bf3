"""Scanning: every recipe's findings in a vLLM tree (the first stage of the flow).

Its own module so that the later stages (propose re-scans the patched tree, verify re-scans
after applying the patch) use it without importing the pipeline that calls them.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bot.recipes import RECIPES, Finding, ScanContext
from bot.tree.index import ClassIndex, build_index, require_vllm_tree
from bot.tree.model_registry import load_model_registry
from bot.tree.version import tree_version


@dataclass(frozen=True)
class ScanResult:
    context: ScanContext
    findings: tuple[Finding, ...]

    @property
    def root(self) -> Path:
        return self.context.root

    @property
    def problems(self) -> list[str]:
        return self.context.index.problems

    @property
    def files_parsed(self) -> int:
        return self.context.index.parsed

    @property
    def files_indexed(self) -> int:
        return len(self.context.index.modules)


def scan_context(root: Path, *, use_cache: bool = True) -> ScanContext:
    root = Path(root)
    require_vllm_tree(
        root, "pass the root of a vLLM checkout, or run `bot fetch VERSION` to get one"
    )
    index: ClassIndex = build_index(root, use_cache=use_cache)
    return ScanContext(root=root.resolve(), index=index, registry=load_model_registry(root))


def scan(root: Path, *, use_cache: bool = True, record: bool = False) -> ScanResult:
    """Every recipe's findings in the tree; ``record`` also keeps them in the journal."""
    ctx = scan_context(root, use_cache=use_cache)
    findings: list[Finding] = []
    for recipe in RECIPES:
        findings.extend(recipe.detect(ctx))
    findings.sort(key=lambda f: (f.recipe, f.path, f.line))
    result = ScanResult(context=ctx, findings=tuple(findings))
    if record:
        from bot.store import Journal

        Journal().record_findings(
            [f.to_json() for f in findings],
            ctx.root,
            _head_or_none(ctx.root) or "",
            tree_version(ctx.root),
        )
    return result


def _head_or_none(root: Path) -> str | None:
    """The checkout's HEAD commit, or None for a plain directory (findings are still worth
    keeping). One ``git rev-parse`` instead of GitPython: importing it costs more than the
    whole warm scan's index load."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--show-toplevel", "HEAD"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split("\n")
    if done.returncode != 0 or len(lines) < 2 or Path(lines[0]).resolve() != root.resolve():
        return None  # not a checkout, or a directory inside another one
    return lines[1].strip() or None
