"""What triage has found for each candidate architecture: its score, why, and how surely."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Evidence:
    scores: dict[str, float] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    alternatives: list[str] = field(default_factory=list)
    served: set[str] = field(default_factory=set)  # archs the served model's name resolves to
    corroborated: set[str] = field(default_factory=set)  # archs a log or config names
    loose: set[str] = field(default_factory=set)  # matched by major version only
    # matched by major version only, but the family's class naming says the release loads it:
    # the score such a match gave (enough to propose a fix, never to call the class fixed)
    release_guess: dict[str, float] = field(default_factory=dict)
    # archs a name names surely: the tree's example checkpoint, a re-upload of it (same repo
    # name) or a variant of it (quantisation, date); others are inferred from a family's naming
    sure: set[str] = field(default_factory=set)
    from_config: set[str] = field(default_factory=set)  # archs a checkpoint's config.json lists

    def add(self, arch: str, score: float, reason: str) -> None:
        if score > self.scores.get(arch, 0.0):
            self.scores[arch] = score
        self.reasons.append(reason)

    def from_config_add(self, arch: str, score: float, reason: str) -> None:
        """A class a checkpoint's own config names: strong, and corroborated."""
        self.add(arch, score, reason)
        self.from_config.add(arch)
        self.corroborated.add(arch)

    def guess_of(self, arch: str) -> float:
        return self.release_guess.get(arch, -1.0)
