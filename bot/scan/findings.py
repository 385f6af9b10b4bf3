"""Scanning: every recipe's findings in a vLLM tree (the first stage of the flow).

Its own module so that the later stages (propose re-scans the patched tree, verify re-scans
after applying the patch) use it without importing the pipeline that calls them.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bot.recipes import RECIPES, Finding, ScanContext
from bot.tree.index import ClassIndex, build_index, require_vllm_tree
from bot.tree.model_registry import load_model_registry


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


def scan(root: Path, *, use_cache: bool = True) -> ScanResult:
    """Every recipe's findings in the tree (:func:`bot.pipeline.scan` also journals them)."""
    with collector_paused():
        ctx = scan_context(root, use_cache=use_cache)
        findings: list[Finding] = []
        for recipe in RECIPES:
            findings.extend(recipe.detect(ctx))
    findings.sort(key=lambda f: (f.recipe, f.path, f.line))
    return ScanResult(context=ctx, findings=tuple(findings))


_freeze = [False]  # whether what a scan built is frozen after it (freeze_after_scans)


def freeze_after_scans() -> None:
    """From now on, what a scan builds is frozen (``gc.freeze``) when it ends, so that the
    collector never examines it: for a process that scans and then exits (``bot scan``). The
    price, which a long-lived process (the dashboard, the test suite) must not pay: whatever
    reference cycle became garbage before a freeze stays in memory until the process ends."""
    _freeze[0] = True


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while scanning: a scan builds millions of
    objects without cycles (the index's facts, the recipes' answers), which reference counting
    frees, and the collector's repeated passes over them were a third of a warm scan's time.
    Once it is back on, its next pass examines what the scan kept, once (unless frozen:
    :func:`freeze_after_scans`)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if _freeze[0]:
                gc.freeze()
            gc.enable()
