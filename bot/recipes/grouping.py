"""Which findings share one plan (one branch, one PR), as Renovate groups updates.

Upstream asks for no one-off PRs for tiny edits, so fixes of the same shape within a release go
together by default. Each recipe names the shape of its findings
(:meth:`bot.recipes.base.Recipe.group_key`):

- ``interface-only``: every declaration that is only ``SupportsEagle3`` on a class whose
  decoder (or, for a multimodal wrapper, whose language model) already supports EAGLE-3
  (:mod:`bot.recipes.eagle3_interface.recipe` findings, and
  :mod:`bot.recipes.eagle3_wrapper.recipe` findings of shape ``interface``);
- ``wrapper-delegate-<language model>``: wrappers that forward the two methods, by family
  (the language model class they wrap, as ``bot.recipes.wrapper_analysis`` reads it);
- ``wrapper-runtime``: wrappers whose language model is the checkpoint's choice, each behind
  the tree's own clear-error guard;
- anything else stays alone (the default key): enabling a decoder changes what ``forward``
  computes, and each such class carries its own forward-pass evidence; targets sharing a
  decoder are one plan, named after the set's lead (:mod:`bot.recipes.eagle3_enable.shared`),
  so only the lead is grouped and the other members are left to its plan.

``--group-by none`` plans one class per plan; ``--max-group-size`` caps a group (the rest go
into a second group of the same key).

A finding that *builds on* a core finding (``evidence.depends_on()``: a loader or an interface
default fixed once in vLLM's core) never shares a group with one that does not, nor with one
building on another core: its group names that core (``builds_on``) and comes after the
core's own group, the order its PRs open in (a dependent opens once the core PR merged,
:mod:`bot.publish.dependencies`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.errors import BotError
from bot.recipes.base import Finding

INTERFACE_ONLY = "interface-only"
GROUP_BY = ("shape", "none")
DEFAULT_MAX_GROUP_SIZE = 25


@dataclass(frozen=True)
class FindingGroup:
    name: str  # the group key, with a ``-2``, ``-3``... suffix when the cap split it
    findings: tuple[Finding, ...]
    # the core findings (``recipe:name``) its members build on: its PR opens after theirs
    builds_on: tuple[str, ...] = ()


def group_key(finding: Finding) -> str:
    """The fix shape a finding shares with others in the same release: its recipe's
    :meth:`~bot.recipes.base.Recipe.group_key`."""
    from bot.recipes import recipe_named  # the recipes read INTERFACE_ONLY from here

    recipe = recipe_named(finding.recipe)
    if recipe is None:
        return f"{finding.recipe}-{finding.class_name}"
    return recipe.group_key(finding)


def group_findings(
    findings: Sequence[Finding], *, by: str = "shape", max_size: int = DEFAULT_MAX_GROUP_SIZE
) -> list[FindingGroup]:
    """``findings`` (one per class, in priority order) in groups; the groups keep the order of
    their best-ranked finding, members are ordered by recipe, file and class (stable commits)."""
    if by not in GROUP_BY:
        raise BotError(f"--group-by must be one of {', '.join(GROUP_BY)}, not {by!r}")
    if max_size < 1:
        raise BotError("--max-group-size must be at least 1")
    findings = _without_set_members(findings)
    if by == "none":
        groups = [FindingGroup(f"{f.recipe}-{f.class_name}", (f,), _builds_on(f)) for f in findings]
        return _cores_first(groups)
    keyed: dict[tuple[str, tuple[str, ...]], list[Finding]] = {}
    for finding in findings:
        keyed.setdefault((group_key(finding), _builds_on(finding)), []).append(finding)
    names = [key for key, _ in keyed]
    groups = []
    for (key, builds_on), members in keyed.items():
        if names.count(key) > 1 and builds_on:  # the same shape, after a core: its own group
            key = f"{key}-after-{builds_on[0].split(':', 1)[0]}"
        ordered = sorted(members, key=member_order)
        for start in range(0, len(ordered), max_size):
            suffix = f"-{start // max_size + 1}" if start else ""
            chunk = tuple(ordered[start : start + max_size])
            groups.append(FindingGroup(key + suffix, chunk, builds_on))
    return _cores_first(groups)


def _builds_on(finding: Finding) -> tuple[str, ...]:
    dependency = finding.evidence.depends_on()
    return (f"{dependency.recipe}:{dependency.name}",) if dependency else ()


def _cores_first(groups: list[FindingGroup]) -> list[FindingGroup]:
    """``groups`` in their order, but each group another builds on moved before the first
    group that builds on it (the order the PRs open in)."""
    provides = {
        i: {f"{f.recipe}:{f.class_name}" for f in group.findings} for i, group in enumerate(groups)
    }
    placed: list[int] = []
    for i, group in enumerate(groups):
        for core in group.builds_on:
            for j, keys in provides.items():
                if core in keys and j not in placed:
                    placed.append(j)
        if i not in placed:
            placed.append(i)
    return [groups[i] for i in placed]


def member_order(finding: Finding) -> tuple[int, str, str]:
    """Recipes in the registry's order, then file and class."""
    from bot.recipes import RECIPES

    order = [r.name for r in RECIPES]
    rank = order.index(finding.recipe) if finding.recipe in order else 99
    return (rank, finding.path, finding.class_name)


def _without_set_members(findings: Sequence[Finding]) -> list[Finding]:
    """The findings but the members of a set whose lead is among them (its plan fixes them)."""
    present = {(f.recipe, f.class_name) for f in findings}
    kept = []
    for finding in findings:
        shared = finding.evidence.fixed_with()
        lead = shared.lead if shared else None
        if lead and lead != finding.class_name and (finding.recipe, lead) in present:
            continue
        kept.append(finding)
    return kept
