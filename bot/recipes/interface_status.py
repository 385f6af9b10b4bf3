"""Whether an architecture has the EAGLE-3 interface, per platform variant.

A class that vLLM picks per platform at import time (``vllm/models/<pkg>/{nvidia,amd}/``) is
fixed only when every variant declares the interface: one declaring variant says nothing about
the other. A variant that can never be built (a stub whose ``__init__`` always raises, as
DeepSeek-V4's vision class on CPU and XPU) is no variant: the platform cannot load the model at
all, so it cannot lack the interface. Read from the static class index and the variant's source
(``ast``), never by importing vLLM.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from bot.recipes.base import ScanContext
from bot.recipes.eagle3_analysis import declares_eagle3, locate
from bot.recipes.evidence import Located
from bot.tree.index import ClassRef


@dataclass(frozen=True)
class VariantStatus:
    where: Located
    declares: bool

    @property
    def site(self) -> str:
        return f"{self.where.path}:{self.where.line}"


def interface_status(ctx: ScanContext, arch: str) -> list[VariantStatus]:
    """Every class the registry loads for ``arch`` (one per platform variant), each with
    whether it declares ``SupportsEagle3``. Empty when the registry does not know ``arch``."""
    found: dict[str, VariantStatus] = {}
    for entry in ctx.registry.entries:
        if arch not in (entry.arch, entry.class_name):
            continue
        for ref in ctx.index.resolve(entry.module, entry.class_name):
            if isinstance(ref, ClassRef):
                where = locate(ctx.index, ref)
                found.setdefault(where.path, VariantStatus(where, declares_eagle3(ctx.index, ref)))
    if len(found) > 1:
        buildable = {
            path: status
            for path, status in found.items()
            if status.declares or not never_built(ctx.root, status.where.path, status.where.name)
        }
        found = buildable or found
    return list(found.values())


def never_built(root: Path, path: str, class_name: str) -> bool:
    """True when the module-level class ``class_name`` in ``root/path`` has an ``__init__``
    that raises unconditionally (a ``raise`` among its top-level statements)."""
    file = root / path
    try:
        stamp = file.stat()
    except OSError:
        return False
    return _never_built(file, stamp.st_mtime_ns, stamp.st_size, class_name)


@lru_cache(maxsize=64)
def _never_built(file: Path, _mtime: int, _size: int, class_name: str) -> bool:
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    return any(isinstance(stmt, ast.Raise) for stmt in item.body)
    return False


def already_fixed(ctx: ScanContext, arch: str) -> str | None:
    """ "already fixed: ..." when every variant declares the interface, else None."""
    status = interface_status(ctx, arch)
    if not status or not all(s.declares for s in status):
        return None
    sites = ", ".join(s.site for s in status)
    return f"already fixed: {status[0].where.name} declares SupportsEagle3 ({sites})"


def missing_variants(ctx: ScanContext, arch: str) -> list[VariantStatus]:
    """The variants of ``arch`` without the interface, when at least one other has it."""
    status = interface_status(ctx, arch)
    if any(s.declares for s in status):
        return [s for s in status if not s.declares]
    return []
