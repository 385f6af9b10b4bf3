"""What an eagle3-enable finding rests on: the decoder the target builds and, from the
decoder analysis, either its shape (the loop and residual the capture follows) or why a
human is needed; for targets sharing one decoder, the set one plan fixes together."""

from __future__ import annotations

from dataclasses import dataclass

from bot.jsonio import optional
from bot.recipes.eagle3_enable.analysis import DecoderShape
from bot.recipes.evidence import Bound, BuildsOn, Evidence, SharedSet


@dataclass(frozen=True)
class EnableEvidence(Evidence):
    decoder: Bound
    shape: DecoderShape | None
    refused: str | None
    shared: SharedSet | None = optional()
    builds_on: BuildsOn | None = optional()

    def refusal(self) -> str | None:
        return self.refused

    def fixed_with(self) -> SharedSet | None:
        return self.shared

    def depends_on(self) -> BuildsOn | None:
        return self.builds_on
