"""What a vLLM tree asks of a contribution, read from the tree itself.

Three files decide what a PR must carry (read at the plan's base commit, never from memory):

- ``AGENTS.md``: the duplicate-work checks (the ``gh`` commands it names), what a PR
  description for AI-assisted work must include, whether the ``pr-checklist`` skill must be run,
  and the commit trailer that credits an agent (its "Commit messages" example);
- ``.github/PULL_REQUEST_TEMPLATE.md``: the section headings and the checklist items;
- ``.agents/skills/pr-checklist/SKILL.md`` (0.34.0; absent in 0.23.0): the sections of the
  checklist report, the core components and the complexity tiers;
- ``docs/contributing/README.md``: the cap on open PRs of a contributor without write access
  ("The current cap is 6 open PRs", 0.34.0; absent from older guides).

A rule the bot relies on that a tree does not state is refused by the caller, with the rule
quoted, rather than guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

AGENTS = "AGENTS.md"
PR_TEMPLATE = ".github/PULL_REQUEST_TEMPLATE.md"
PR_CHECKLIST_SKILL = ".agents/skills/pr-checklist/SKILL.md"
CONTRIBUTING = "docs/contributing/README.md"
RULE_FILES = (AGENTS, PR_TEMPLATE, PR_CHECKLIST_SKILL, CONTRIBUTING)

_FENCE = re.compile(r"```[a-z]*\n(.*?)```", re.S)
_CHECKBOX = re.compile(r"^- \[ \] (.+)$", re.M)
_HEADING2 = re.compile(r"^## (.+?)\s*$", re.M)
_TRAILER = re.compile(r"^([A-Z][A-Za-z-]*-by): ", re.M)
_CORE_ITEM = re.compile(r"^- [^(`\n]*\(`([^`]+)`", re.M)
_TIER = re.compile(r"^- (Low|Medium|High) complexity: ([^.]+)\.", re.M)
_CAP = re.compile(r"[^.\n]*\bcap is (\d+) open PRs?\b[^.\n]*\.")


@dataclass(frozen=True)
class ComplexityTier:
    name: str  # Low / Medium / High
    bound: str  # the SKILL's words: "< 50 lines", "50-250 lines", "> 250 lines"


@dataclass(frozen=True)
class ContributionRules:
    template_style: str  # "claims" (0.32+: Overview/Claims/Validation/Details) or "purpose"
    template_headings: tuple[str, ...]
    template_checklist: tuple[str, ...]  # the template's `- [ ]` items, verbatim
    checklist_summary: str  # the <summary> of the template's checklist block
    duplicate_checks: tuple[str, ...]  # the commands AGENTS.md names, verbatim
    description_must_include: tuple[str, ...]  # AGENTS.md's list, verbatim
    requires_pr_checklist: bool
    attribution_trailer: str | None  # e.g. "Co-authored-by"
    attribution_example: str | None  # the example's first trailer line
    core_components: tuple[str, ...]  # globs from the SKILL's "Impact on Core Components"
    complexity_tiers: tuple[ComplexityTier, ...]
    pr_checklist_sections: tuple[str, ...]  # "1. Design Fit", ...
    open_pr_cap: int | None = None  # the contributing guide's cap on a contributor's open PRs
    open_pr_cap_rule: str = ""  # its sentence, verbatim

    @property
    def has_agents_md(self) -> bool:
        return bool(self.duplicate_checks or self.description_must_include)


def read_rules(read: Callable[[str], str | None]) -> ContributionRules:
    """The rules, from a reader giving a tree file's text (None when the file is absent)."""
    agents = read(AGENTS) or ""
    template = read(PR_TEMPLATE) or ""
    skill = read(PR_CHECKLIST_SKILL) or ""
    cap = _CAP.search(" ".join((read(CONTRIBUTING) or "").split()))
    headings = tuple(_HEADING2.findall(template))
    style = "claims" if "Overview" in headings and "Claims" in headings else "purpose"
    summary = re.search(r"<summary>\s*(.*?)\s*</summary>", template)
    policy = _section(agents, "### Accountability")
    trailer, example = _attribution(_section(agents, "### Commit messages"))
    return ContributionRules(
        template_style=style,
        template_headings=headings,
        template_checklist=tuple(item.strip() for item in _CHECKBOX.findall(template)),
        checklist_summary=summary.group(1) if summary else "",
        duplicate_checks=_commands(_section(agents, "### Duplicate-work checks")),
        description_must_include=_nested_list(policy, "must** include:"),
        requires_pr_checklist="pr-checklist" in policy,
        attribution_trailer=trailer,
        attribution_example=example,
        core_components=tuple(_CORE_ITEM.findall(_section(skill, "#### 1.1"))),
        complexity_tiers=tuple(
            ComplexityTier(name, bound.strip()) for name, bound in _TIER.findall(skill)
        ),
        pr_checklist_sections=tuple(re.findall(r"^### (\d\. .+?)\s*$", skill, re.M)),
        open_pr_cap=int(cap.group(1)) if cap else None,
        open_pr_cap_rule=cap.group(0).strip() if cap else "",
    )


def rules_of_tree(tree: Path) -> ContributionRules:
    def read(relpath: str) -> str | None:
        path = tree / relpath
        return path.read_text(encoding="utf-8") if path.is_file() else None

    return read_rules(read)


def quote(agents_line: str) -> str:
    """A rule as quoted in a refusal: `AGENTS.md: "..."`."""
    return f'{AGENTS}: "{" ".join(agents_line.split())}"'


def _section(text: str, heading: str) -> str:
    """From ``heading`` to the next heading of the same or a higher level."""
    start = text.find(heading)
    if start < 0:
        return ""
    level = len(heading) - len(heading.lstrip("#"))
    rest = text[start + len(heading) :]
    end = re.search(rf"^#{{1,{level}}} |^---$", rest, re.M)
    return rest[: end.start()] if end else rest


def _commands(section: str) -> tuple[str, ...]:
    block = _FENCE.search(section)
    lines = block.group(1).splitlines() if block else []
    return tuple(line.strip() for line in lines if line.strip().startswith("gh "))


def _nested_list(section: str, lead: str) -> tuple[str, ...]:
    """The indented bullets right after the line ending with ``lead``."""
    at = section.find(lead)
    if at < 0:
        return ()
    items: list[str] = []
    for line in section[at + len(lead) :].splitlines()[1:]:
        if not line.startswith((" ", "\t")) or not line.strip().startswith("- "):
            break
        items.append(line.strip()[2:].strip())
    return tuple(items)


def _attribution(section: str) -> tuple[str | None, str | None]:
    block = _FENCE.search(section)
    text = block.group(1) if block else ""
    for line in text.splitlines():
        found = _TRAILER.match(line)
        if found and found.group(1) != "Signed-off-by":
            return found.group(1), line.strip()
    return None, None
