"""The re-scan after an edit: one comparison for propose and verify.

A fix passes when every finding it resolves is gone and no finding appeared that the unpatched
tree did not report, but the follow-ups a fix on one of the resolved classes makes possible
(:func:`bot.recipes.base.follows_from`: a wrapper over a language model that now supports
EAGLE-3). Propose compares the findings of its scratch tree (and refuses), verify those of the
patched base commit (and records a check); each phrases the outcome in its own words.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.recipes.base import Finding, follows_from

FindingKey = tuple[str, str, str]  # recipe, class, path: what identifies a finding across scans


@dataclass(frozen=True)
class Rescan:
    """What the re-scan found wrong (all empty: nothing) and how many findings are left."""

    unknown: tuple[FindingKey, ...]  # resolved, yet not reported on the unpatched tree
    still: tuple[FindingKey, ...]  # resolved, and still reported after the edit
    new: tuple[Finding, ...]  # reported after the edit only, and no follow-up of the fix
    left: int  # findings after the edit, follow-ups of the fix not counted

    @property
    def passed(self) -> bool:
        return not (self.unknown or self.still or self.new)


def compare(
    before: Iterable[FindingKey], after: Sequence[Finding], resolves: Sequence[FindingKey]
) -> Rescan:
    """Compare the scan after the edit with the keys of the scan before it, for a fix that
    resolves the findings ``resolves`` (for a group, every member's)."""
    fixed = tuple(dict.fromkeys(class_name for _, class_name, _ in resolves))
    kept = [f for f in after if not any(follows_from(f, name) for name in fixed)]
    known, now = set(before), {f.key for f in after}  # a follow-up resolved is still there
    resolved = tuple(dict.fromkeys(resolves))
    return Rescan(
        unknown=tuple(key for key in resolved if key not in known),
        still=tuple(key for key in resolved if key in now),
        new=tuple(f for f in kept if f.key not in known),
        left=len(kept),
    )
