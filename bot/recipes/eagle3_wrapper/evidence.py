"""What an eagle3-wrapper finding rests on: the language model the multimodal wrapper builds
(and whether it is EAGLE-3 ready), the wrapper's forward and what it hands back, the family
classes one fix covers and, for a language model chosen at run time, the capable ones."""

from __future__ import annotations

from dataclasses import dataclass

from bot.jsonio import optional
from bot.recipes.evidence import At, BuildsOn, Evidence, Located


@dataclass(frozen=True)
class LanguageModel(Located):
    """``name`` is ``text_config.architectures (run time)`` when the class is chosen at run
    time; ``pinned`` lists the architectures a wrapper pins it to, where it does."""

    attribute: str
    how: str
    assigned_at: At
    declares_eagle3: bool
    pinned: tuple[str, ...] | None = optional()


@dataclass(frozen=True)
class WrapperForward(At):
    """The wrapper's forward and what it hands back."""

    returns: str


@dataclass(frozen=True)
class WrapperEvidence(Evidence):
    shape: str
    why: str
    language_model: LanguageModel
    lm_decoder: Located | None
    forward: WrapperForward
    covers: tuple[str, ...]
    works_with: tuple[str, ...] | None = optional()
    # the tree's SupportsEagle3 defaults forward to the language model: the declaration alone
    forwarded: bool | None = optional()
    # the core plan that makes them forward, which this wrapper's declaration needs first
    builds_on: BuildsOn | None = optional()

    def depends_on(self) -> BuildsOn | None:
        return self.builds_on
