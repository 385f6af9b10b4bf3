"""The typed evidence a finding carries: what generic code may ask of any recipe's evidence,
and the records the eagle3-* recipes share (a class's location, a decoder bound to an
attribute, a set of targets fixed together).

Each fix class has its own evidence record (``recipes/<fix class>/evidence.py``), built by its
detector and read back from JSON (plan.json, ``bot scan --json``) by
:meth:`bot.recipes.base.Finding.from_json`, which refuses a malformed record in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.errors import BotError
from bot.jsonio import JSON_KEY, JsonRecord


@dataclass(frozen=True)
class At(JsonRecord):
    path: str
    line: int


@dataclass(frozen=True)
class Located(JsonRecord):
    name: str
    path: str
    line: int


@dataclass(frozen=True)
class Bound(Located):
    """A class built at ``attribute`` (``self.model``), assigned at ``assigned_at``."""

    attribute: str
    assigned_at: At


@dataclass(frozen=True)
class SharedSet(JsonRecord):
    """Targets that share one decoder and are fixed together by one plan (led by ``lead``)."""

    decoder: str
    targets: tuple[str, ...]
    paths: tuple[str, ...]
    lead: str | None

    def members(self) -> list[tuple[str, str]]:
        """(class, path) of every target in the set."""
        return list(zip(self.targets, self.paths, strict=True))

    @classmethod
    def from_json(cls, data: object, where: str) -> SharedSet:
        shared = super().from_json(data, where)
        if len(shared.targets) != len(shared.paths):
            raise BotError(f"{where}: `targets` and `paths` differ in length")
        return shared


@dataclass(frozen=True)
class BuildsOn(JsonRecord):
    """The core finding (another fix class's: a loader, an interface default) whose fix this
    one needs first: without it the model edit alone would turn vLLM's clear refusal into a
    crash elsewhere. Its plan opens after that core PR merges."""

    recipe: str
    name: str  # the core finding's class (or function) name
    path: str
    why: str  # what of the core blocks this target, in one line

    @property
    def key(self) -> tuple[str, str, str]:
        """The core finding's key (:attr:`bot.recipes.base.Finding.key`)."""
        return (self.recipe, self.name, self.path)


@dataclass(frozen=True)
class Evidence(JsonRecord):
    """Every finding's evidence starts with the class it is about; the rest is its recipe's."""

    cls: Located = field(metadata={JSON_KEY: "class"})

    def refusal(self) -> str | None:
        """Why the recipe found a real gap but will not patch it (it needs a human)."""
        return None

    def fixed_with(self) -> SharedSet | None:
        """The set of targets one plan fixes together with this one, if any."""
        return None

    def depends_on(self) -> BuildsOn | None:
        """The core finding this one's fix builds on (needs first), if any."""
        return None

    def dependents(self) -> tuple[str, ...]:
        """The classes whose plans build on this (core) finding's fix and wait for its PR to
        merge: their demand is this fix's demand (:mod:`bot.publish.demand`)."""
        return ()
