"""What a core-eagle3-forwarding finding rests on, and what the wrapper recipe reads of it.

The tree's ``SupportsEagle3`` defaults (:func:`bot.recipes.wrapper_analysis.protocol_defaults`:
whether they already hand a multimodal model's EAGLE-3 calls to a language model that declares
the interface itself), the clear error the tree's own wrappers raise when it does not
(Pixtral's guard), the wrappers that need only the declaration with them, and the declared
classes whose behaviour they could change. The wrapper recipe reads :data:`NAME` and
:func:`builds_on` from here for the wrappers whose plan builds on this fix class.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.jsonio import JsonRecord
from bot.recipes.evidence import BuildsOn, Evidence, Located
from bot.recipes.wrapper_analysis import ProtocolDefaults

NAME = "core-eagle3-forwarding"
PROTOCOL = "SupportsEagle3"
SET_LAYERS = "set_aux_hidden_state_layers"
DEFAULT_LAYERS = "get_eagle3_default_aux_hidden_state_layers"
METHODS = (SET_LAYERS, DEFAULT_LAYERS)


@dataclass(frozen=True)
class Guard(Located):
    """The tree's clear-error guard (a wrapper's method raising when its language model does
    not declare the interface), whose ``raise`` the defaults reuse."""

    owner: str
    raises: str  # the raise statement, dedented


@dataclass(frozen=True)
class Wrapper(JsonRecord):
    name: str
    path: str
    shape: str  # the eagle3-wrapper shape it has today: runtime | delegate
    line: int


@dataclass(frozen=True)
class Declared(JsonRecord):
    """A class that declares the interface and inherits the defaults, with its language model
    and the path the forwarding defaults take for it (measured from the tree): ``unwrap``
    (today's path: its language model's decoder has ``EagleModelMixin``), ``forward`` (the
    language model's own methods, where today's default fails its assert) or ``error`` (the
    clear error, where it fails its assert today)."""

    name: str
    path: str
    language_model: str
    takes: str
    works_today: bool


@dataclass(frozen=True)
class ForwardingEvidence(Evidence):
    methods: tuple[str, ...]
    guard: Guard
    declarations: tuple[Wrapper, ...]  # wrappers this turns into plain declarations
    declared: tuple[Declared, ...]  # wrappers using the defaults today

    def changed(self) -> list[Declared]:
        """Declared classes that work today and would take another path: none, by design;
        measured so a regression shows."""
        return [d for d in self.declared if d.works_today and d.takes != "unwrap"]

    def dependents(self) -> tuple[str, ...]:
        """The wrappers whose plan is the declaration alone once the defaults forward."""
        return tuple(dict.fromkeys(w.name for w in self.declarations))


def builds_on(defaults: ProtocolDefaults) -> BuildsOn:
    """What a wrapper whose fix is the declaration alone, once the defaults forward, builds on."""
    return BuildsOn(
        NAME,
        PROTOCOL,
        defaults.path,
        f"{PROTOCOL}'s defaults do not hand the call to a language model chosen at run time, "
        "nor give a clear error when it cannot serve EAGLE-3",
    )
