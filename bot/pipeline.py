"""The flow, top to bottom: scan -> (triage) -> propose -> verify -> publish.

Each stage takes plain values and returns plain values; the plan directory is the handoff
between the unprivileged half (scan, triage, edit, test) and the privileged half (publish).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import BotError
from bot.recipes import RECIPES, Finding, ScanContext
from bot.tree.index import ClassIndex, build_index, is_vllm_tree
from bot.tree.model_registry import load_model_registry


@dataclass
class ScanResult:
    root: Path
    findings: list[Finding]
    problems: list[str] = field(default_factory=list)
    files_parsed: int = 0
    files_indexed: int = 0


def scan_context(root: Path, *, use_cache: bool = True) -> ScanContext:
    root = Path(root)
    if not root.is_dir():
        raise BotError(f"{root}: no such directory")
    if not is_vllm_tree(root):
        raise BotError(
            f"{root} is not a vLLM tree (no vllm/model_executor/models); "
            "pass the root of a vLLM checkout, or run `bot fetch VERSION` to get one"
        )
    index: ClassIndex = build_index(root, use_cache=use_cache)
    return ScanContext(root=root.resolve(), index=index, registry=load_model_registry(root))


def scan(root: Path, *, use_cache: bool = True) -> ScanResult:
    ctx = scan_context(root, use_cache=use_cache)
    findings: list[Finding] = []
    for recipe in RECIPES:
        findings.extend(recipe.detect(ctx))
    findings.sort(key=lambda f: (f.recipe, f.path, f.line))
    return ScanResult(
        root=ctx.root,
        findings=findings,
        problems=list(ctx.index.problems),
        files_parsed=ctx.index.parsed,
        files_indexed=len(ctx.index.modules),
    )
