"""A plan that builds on a core plan opens after that core PR merges.

A model plan whose finding builds on another fix class's (``evidence.builds_on``: the drafter
loaders, the interface's defaults) would, opened alone, turn vLLM's clear refusal into a crash
elsewhere. Upstream's rules decide the order: a contributor's PR can only target upstream's
``main`` (a fork's branch is no base upstream CI runs on, and ``docs/contributing/README.md``
asks every PR to be zero commits behind its base), so a dependent opened before the core merged
would carry the core's commit too, duplicating the core PR (``AGENTS.md``: no PR another open
PR already addresses), and would count twice against the open-PR cap. So publish opens a
dependent only once GitHub shows the core's PR merged (found by the core's class marker, as
any of the bot's PRs is), and says which PR it waits for otherwise.
"""

from __future__ import annotations

from bot.github.client import GitHubClient
from bot.plan import Plan
from bot.publish.published import pulls_by_class
from bot.recipes.evidence import BuildsOn


def dependencies(plan: Plan) -> list[BuildsOn]:
    """The core findings the plan's classes build on, each once."""
    findings = [m.finding for m in plan.members] if plan.members else [plan.finding]
    found: dict[tuple[str, str, str], BuildsOn] = {}
    for finding in findings:
        if finding is None:
            continue
        dependency = finding.evidence.depends_on()
        if dependency is not None:
            found.setdefault(dependency.key, dependency)
    return list(found.values())


def waiting_for(client: GitHubClient, plan: Plan) -> str | None:
    """Why the plan cannot open yet (a core PR it builds on is not merged), or None."""
    waiting: list[str] = []
    pulls = None
    for dependency in dependencies(plan):
        pulls = pulls if pulls is not None else pulls_by_class(client, plan.upstream)
        theirs = pulls.get(f"{dependency.recipe}:{dependency.name}", [])
        if any(p.state == "merged" for p in theirs):
            continue
        where = f"PR #{theirs[0].number} is {theirs[0].state}" if theirs else "no PR yet"
        waiting.append(f"{dependency.recipe} ({dependency.name}: {where})")
    if not waiting:
        return None
    return (
        f"it builds on {', '.join(waiting)}; a plan that builds on a core fix opens after that "
        "fix's PR merges"
    )
