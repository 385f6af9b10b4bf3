"""What every recipe shares: the finding it reports and the context it reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bot.tree.index import ClassIndex
from bot.tree.model_registry import ModelRegistry


@dataclass(frozen=True)
class ScanContext:
    root: Path
    index: ClassIndex
    registry: ModelRegistry


@dataclass(frozen=True)
class Finding:
    recipe: str
    class_name: str
    module: str
    path: str  # relative to the tree root
    line: int
    architectures: tuple[str, ...]
    evidence: dict[str, Any]
    summary: str

    def to_json(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "class": self.class_name,
            "module": self.module,
            "path": self.path,
            "line": self.line,
            "architectures": list(self.architectures),
            "evidence": self.evidence,
            "summary": self.summary,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return cls(
            recipe=data["recipe"],
            class_name=data["class"],
            module=data["module"],
            path=data["path"],
            line=int(data["line"]),
            architectures=tuple(data.get("architectures", ())),
            evidence=dict(data.get("evidence", {})),
            summary=data.get("summary", ""),
        )


class Recipe(Protocol):
    """One fix class: how to find its instances in a tree."""

    name: str
    description: str

    def detect(self, ctx: ScanContext) -> list[Finding]: ...
