"""A core plan's demand is its dependents' demand.

A PR opens only with demand (:func:`bot.publish.pr.demand_of`: a triaged issue, a public draft
checkpoint, a maintainer's request). A core plan (a fix class others build on: the drafter
loaders, the interface's defaults) fixes no model of its own, so nobody files an issue for it;
and the plans that build on it open only after its PR merges (:mod:`bot.publish.dependencies`).
Without inheritance a dependent with demand would wait forever. So a core plan has demand when
a plan that builds on it has: the classes its finding names as dependents
(``evidence.dependents()``), each with

- the triaged issues (the journal's) and reviewed public drafts (the catalogue's) for its
  architecture, as `bot scan` counts demand (:func:`bot.scan.priority.demand_for_archs`);
- its own plan in the journal, if one was proposed: that plan's issues, its registry entry's
  public draft, and a maintainer's request ticked for it on the dashboard issue.

Each inherited line names the dependent whose demand it is; the core PR's body lists them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from bot.errors import BotError

if TYPE_CHECKING:
    from bot.drafts import DraftCatalogue
    from bot.journal.store import Journal
    from bot.plan import Plan

# A dependent proposal in these states asks for nothing any more.
_SETTLED = ("rejected", "closed", "merged")


def dependents(plan: Plan) -> list[str]:
    """The classes whose plans build on ``plan``'s (core) fix, each once."""
    findings = [m.finding for m in plan.members] or ([plan.finding] if plan.finding else [])
    return list(dict.fromkeys(name for f in findings for name in f.evidence.dependents()))


def builds_on_plan(dependent: Plan, core: Plan) -> bool:
    """Whether ``dependent``'s classes build on a finding ``core`` fixes."""
    keys = {m.finding.key for m in core.members} or ({core.finding.key} if core.finding else set())
    findings = [m.finding for m in dependent.members] or (
        [dependent.finding] if dependent.finding else []
    )
    return any((d := f.evidence.depends_on()) is not None and d.key in keys for f in findings)


def member_demand(plan: Plan) -> list[tuple[str, list[str]]]:
    """(class, its demand lines) for each member: its triaged issues, its registry entry's
    public draft."""
    found = []
    for member in plan.members:
        lines = [f"issue #{n}" for n in member.issues]
        entry = member.registry_entry
        if entry is not None and entry.draft.repo_id:
            lines.append(f"public draft {entry.draft.repo_id}")
        found.append((member.class_name, lines))
    return found


def inherited_demand(
    plan: Plan, journal: Journal | None = None, catalogue: DraftCatalogue | None = None
) -> list[str]:
    """The demand of the plans that build on ``plan``, one line per signal, each naming the
    dependent (``Qwen2MoeForCausalLM builds on it: issue #40000``). Empty for a plan nobody
    builds on, or whose dependents nobody asked for."""
    names = dependents(plan)
    if not names:
        return []
    from bot.drafts import load_catalogue
    from bot.journal.store import Journal
    from bot.scan.priority import demand_for_archs

    journal = journal if journal is not None else Journal()
    catalogue = catalogue if catalogue is not None else load_catalogue()
    wanted: dict[str, list[str]] = {name: [] for name in names}
    archs: dict[str, set[str]] = {name: {name} for name in names}
    for name, lines, architectures in _dependent_plans(plan, journal):
        wanted.setdefault(name, []).extend(lines)
        archs.setdefault(name, {name}).update(architectures)
    issues = journal.triaged_issues()
    for name in wanted:
        demand = demand_for_archs(archs[name], issues, catalogue)
        wanted[name] += [f"issue #{i.number}" for i in demand.issues]
        wanted[name] += [f"public draft {d}" for d in demand.drafts]
    return [
        f"{name} builds on it: {line}"
        for name, lines in wanted.items()
        for line in dict.fromkeys(lines)
    ]


def _dependent_plans(core: Plan, journal: Journal) -> Iterable[tuple[str, list[str], set[str]]]:
    """(class, demand lines, architectures) of each member of each proposal in the journal
    that builds on ``core`` and is still waiting; a maintainer's request for a group counts
    for each of its members."""
    from bot.plan import Plan

    for proposal in journal.proposals():
        if proposal.state in _SETTLED:
            continue
        try:
            dependent = Plan.from_dict(dict(journal.as_published(proposal.id).plan))
        except BotError:
            continue
        if not dependent.members or not builds_on_plan(dependent, core):
            continue
        requested = journal.requested_by(proposal.id)
        asked = [f"requested by @{requested} on the dashboard issue"] if requested else []
        for member, (name, lines) in zip(dependent.members, member_demand(dependent), strict=True):
            yield name, lines + asked, set(member.finding.architectures)
