"""The record of the duplicate-work search (plan.json ``duplicate_search``): what it searched
for, what it found, and the ``AGENTS.md`` commands it answers. The search itself, through the
GitHub API, is :mod:`bot.publish.duplicates`; the plan reads this record, so it lives below both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from bot.jsonio import JsonRecord

# The search for PRs about the methods the SupportsEagle3 check gates (at most five operators,
# GitHub's limit); the local match then reads each PR's title and body.
ABOUT = ("eagle", "eagle3", "dflash", "dspark", "SupportsEagle3")


@dataclass(frozen=True)
class Keywords(JsonRecord):
    """What a class is searched for: its name, its model family, its model file's name."""

    class_name: str
    family: str
    file: str
    issues: tuple[int, ...] = ()  # the triaged issues that ask for it

    def shown(self) -> str:
        return ", ".join(dict.fromkeys(k for k in (self.class_name, self.family, self.file) if k))


@dataclass(frozen=True)
class FoundPull(JsonRecord):
    number: int
    state: str  # open | merged | closed
    title: str
    covers: tuple[str, ...] = ()  # the classes it names, by the rule above
    whys: tuple[str, ...] = ()  # for each, which keyword matched where

    @property
    def why(self) -> str:
        return f"{self.whys[0]} ({self.covers[0]})" if self.whys else ""


@dataclass(frozen=True)
class DuplicateSearch(JsonRecord):
    """What the search ran and found. ``ran`` False: it did not run (``why_not`` says why)."""

    ran: bool
    why_not: str = ""
    issue_comments: int = 0  # comments read on the triaged issues
    upstream: str = ""
    agents_commands: tuple[str, ...] = ()  # the tree's AGENTS.md commands, verbatim
    about_eagle: int = 0  # PRs the area search returned
    keywords: tuple[Keywords, ...] = ()
    found: tuple[FoundPull, ...] = ()  # related PRs (not the bot's own), by number

    @property
    def commands(self) -> tuple[str, ...]:
        """The AGENTS.md commands the search answered, filled in."""
        issues = sorted({n for kw in self.keywords for n in kw.issues})
        return commands_for(self.agents_commands, self.upstream, issues)

    def for_classes(self, names: Iterable[str]) -> DuplicateSearch:
        """The search as it concerns ``names`` (a group's members once some were left out):
        what publish, searching for those classes alone, finds again."""
        wanted = set(names)
        found = []
        for pull in self.found:
            kept = [(c, w) for c, w in zip(pull.covers, pull.whys, strict=True) if c in wanted]
            if kept:
                covers, whys = zip(*kept, strict=True)
                found.append(replace(pull, covers=tuple(covers), whys=tuple(whys)))
        return replace(
            self,
            keywords=tuple(k for k in self.keywords if k.class_name in wanted),
            found=tuple(found),
        )

    def covering(self, class_name: str) -> FoundPull | None:
        """The first open or merged PR that covers ``class_name``."""
        return next(
            (f for f in self.found if class_name in f.covers and f.state in ("open", "merged")),
            None,
        )

    @property
    def duplicates(self) -> list[FoundPull]:
        return [f for f in self.found if f.covers and f.state in ("open", "merged")]


def not_run(why: str) -> DuplicateSearch:
    return DuplicateSearch(ran=False, why_not=why)


def commands_for(
    rules_commands: Sequence[str], upstream: str, issues: Sequence[int]
) -> tuple[str, ...]:
    """The ``AGENTS.md`` commands the search answers, filled in (every state searched)."""
    commands = []
    for number in issues:
        commands.append(_filled(rules_commands, "gh issue view", str(number), upstream))
        commands.append(_filled(rules_commands, "in:body", str(number), upstream))
    about = " OR ".join(ABOUT)
    commands.append(_filled(rules_commands, "<short area keywords>", about, upstream))
    return tuple(commands)


def _filled(commands: Sequence[str], key: str, value: str, upstream: str) -> str:
    """The tree's command containing ``key`` with its placeholder filled; the bot's own words
    when the tree names none. The bot searches every state (a merged PR is a duplicate too)."""
    for command in commands:
        if key in command:
            filled = re.sub(r"<issue_number>|<short area keywords>", value, command)
            filled = filled.replace("--state open", "--state all")
            return filled.replace("vllm-project/vllm", upstream)
    if key == "gh issue view":
        return f"gh issue view {value} --repo {upstream} --comments"
    if key == "in:body":
        return f'gh pr list --repo {upstream} --state all --search "{value} in:body"'
    return f'gh pr list --repo {upstream} --state all --search "{value}"'
