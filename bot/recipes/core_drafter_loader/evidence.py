"""What a core-drafter-loader finding rests on: every loader site that refuses a target (read
from the tree, :mod:`bot.tree.drafter_loader`), and the enable targets it refuses, each with
the lines that refuse it and what, if anything, still refuses it once the loaders are fixed.

The enable recipe reads :data:`NAME` and :func:`builds_on` from here (not from the recipe
module, which reads the enable recipe's candidates) to say which of its targets build on this
fix class."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.jsonio import JsonRecord
from bot.recipes.evidence import BuildsOn, Evidence
from bot.tree.drafter_loader import Loaders, LoaderSite

NAME = "core-drafter-loader"


@dataclass(frozen=True)
class Site(JsonRecord):
    path: str
    line: int
    code: str
    function: str
    kind: str  # decoder | embedding
    names: tuple[str, ...]
    form: str

    @classmethod
    def of(cls, site: LoaderSite) -> Site:
        return cls(site.path, site.line, site.code, site.function, site.kind, site.names, site.form)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: `{self.code}`"


@dataclass(frozen=True)
class Blocked(JsonRecord):
    """An enable target the loaders refuse: where its decoder is, the lines refusing it, and
    what still refuses it with the loaders fixed (None: its enable plan is ready then)."""

    name: str
    path: str
    decoder: str  # self.model, self.transformer, ...
    refused_by: tuple[str, ...]  # "path:line" of each site
    after: str | None


@dataclass(frozen=True)
class Served(JsonRecord):
    """The risk to targets the loaders serve today, measured from the tree: the classes that
    declare the interface whose decoder (or whose language model's decoder) holds a name the
    loaders look up, so ``get_input_embedding`` returns the very module they return today;
    and those the bot cannot tell statically (their decoder is built at run time)."""

    unchanged: tuple[str, ...]
    unknown: tuple[str, ...]


@dataclass(frozen=True)
class LoaderEvidence(Evidence):
    sites: tuple[Site, ...]
    language_models: tuple[str, ...]  # the names the loaders give the language model
    decoders: tuple[str, ...]  # and its decoder
    blocked: tuple[Blocked, ...]
    served: Served

    def unblocked(self) -> list[Blocked]:
        return [b for b in self.blocked if b.after is None]

    def dependents(self) -> tuple[str, ...]:
        """The enable targets ready once the loaders are fixed: their plans build on this."""
        return tuple(dict.fromkeys(b.name for b in self.unblocked()))


def anchor(loaders: Loaders) -> LoaderSite:
    """The site the core finding is named after: the first, in path and line order."""
    return loaders.sites[0]


def builds_on(loaders: Loaders, refusing: Sequence[LoaderSite]) -> BuildsOn:
    """What an enable target refused only by ``refusing`` builds on."""
    first = anchor(loaders)
    lines = ", ".join(dict.fromkeys(f"{s.path}:{s.line}" for s in refusing))
    return BuildsOn(
        NAME,
        first.function,
        first.path,
        f"vLLM's drafter loaders read its decoder or its input embedding under names it does "
        f"not use ({lines})",
    )
