"""The cases a recipe carries next to its code, Fixit-style (tests/test_recipe_cases.py runs them).

A :class:`Valid` case is a small synthetic vLLM tree where the recipe reports its class; for a
recipe that plans fixes, the plan is applied with propose's do-no-harm checks and each file the
patch changes must pass the recipe's publish rule for its edit kind. An :class:`Invalid` case
alters one file of a valid case's patched result (a missing import, a capture in the wrong
place, a weakened test) and the publish rule must refuse it with ``refuses`` in its reason.
A :class:`Quiet` case is a tree where the recipe must report nothing for the class (do no harm).

Trees are built on the test suite's skeleton of a vLLM checkout (tests/synthetic.py: an
interfaces module with the names the recipes look for, the model registry, a ruff setting); a
case names only what its recipe reads beyond that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

Registry = Mapping[str, Mapping[str, tuple[str, str]]]


@dataclass(frozen=True)
class SyntheticTree:
    """``files`` by path from the tree root (whole texts); ``registry`` maps a registry dict
    (``_TEXT_GENERATION_MODELS``) to ``{arch: (module, class)}``; ``interfaces`` is appended to
    the skeleton's interfaces module (a helper such as ``supports_eagle3`` a plan needs)."""

    files: Mapping[str, str]
    registry: Registry
    interfaces: str = ""


@dataclass(frozen=True)
class Valid:
    """The recipe reports ``class_name`` in ``tree`` (its summary holding ``reports``); a fixing
    recipe's plan applies, and its publish rules accept every file of the patch, whose added
    lines include each of ``adds``."""

    name: str
    tree: SyntheticTree
    class_name: str
    reports: str = ""
    adds: tuple[str, ...] = ()


@dataclass(frozen=True)
class Invalid:
    """``valid``'s patched ``path`` with ``replace[0]`` (found exactly once) turned into
    ``replace[1]``: the publish rule for that file's edit kind refuses, saying ``refuses``."""

    name: str
    valid: Valid
    path: str
    replace: tuple[str, str]
    refuses: str


@dataclass(frozen=True)
class Quiet:
    """The recipe reports nothing for ``class_name`` in ``tree``."""

    name: str
    tree: SyntheticTree
    class_name: str


@dataclass(frozen=True)
class RecipeCases:
    valid: tuple[Valid, ...]
    invalid: tuple[Invalid, ...] = ()
    quiet: tuple[Quiet, ...] = field(default=())
