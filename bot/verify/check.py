"""One check's outcome, as verify records it and the write-up, the gate and publish read it.

Its own module so that the readers (``bot publish`` among them) import the value without the
modules that run the checks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool | None  # None: not checked, neither passed nor failed
    detail: str
    log_excerpt: str = ""  # what the check ran printed, for the write-up's details
    # Typed figures of what the check ran (the engine check: each run's outcome and counts).
    record: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if self.record is None:
            del data["record"]
        return data
