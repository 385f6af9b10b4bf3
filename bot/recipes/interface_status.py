"""Whether an architecture has the EAGLE-3 interface, per platform variant.

A class that vLLM picks per platform at import time (``vllm/models/<pkg>/{nvidia,amd}/``) is
fixed only when every variant declares the interface: one declaring variant says nothing about
the other. Read from the static class index, never by importing vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.recipes.base import ScanContext
from bot.recipes.eagle3_analysis import Located, declares_eagle3, locate
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
    return list(found.values())


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
