"""The duplicate-work search vLLM's ``AGENTS.md`` asks for, over open and merged PRs.

``AGENTS.md`` (0.34.0, "Duplicate-work checks") names three ``gh`` commands: the issue with its
comments, PRs naming the issue in their body, and PRs matching "short area keywords". The bot
runs them through the API (no token needed) for every class a plan fixes:

- each triaged issue: read with its comments, and ``<number> in:body`` over PRs of any state;
- the area keywords: one search for PRs about EAGLE-3-family speculative decoding (open, merged
  and closed), then, in each PR's title and body, each class's name, model family (the class
  name without its ``For...``/``Model`` suffix, read case- and punctuation-blind, so
  "Qwen2-MoE" is the family of ``Qwen2MoeForCausalLM``) and model file name (``qwen2_moe``).
  One search and a local match instead of one query per keyword: a 22-class group would
  otherwise spend 60 searches, more than GitHub lets an unauthenticated client make a minute.

A PR *covers* a class when it is open or merged, is not the bot's own (its fingerprint marker),
speaks of EAGLE/DFlash/DSpark, and names the class, its family or its file in its title, or the
class or the file as a file (``qwen2_moe.py``) in its body (a body listing tested model
families is no claim to fix them); or when its body names the class's triaged issue.
A covered class leaves a group, named with the PR; a single class that is covered is not
proposed. The search is a record (plan.json ``duplicate_search``): propose runs it and the body
quotes it; publish runs it again and a different answer changes the body (ask again).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from bot.jsonio import JsonRecord

if TYPE_CHECKING:
    from bot.github.client import GitHubClient

# The search for PRs about the methods the SupportsEagle3 check gates (at most five operators,
# GitHub's limit); the local match then reads each PR's title and body.
ABOUT = ("eagle", "eagle3", "dflash", "dspark", "SupportsEagle3")
_ABOUT = re.compile(r"(?i)eagle|dflash|dspark")
_SUFFIX = re.compile(
    r"(For(CausalLM|ConditionalGeneration|ActionPrediction|SequenceClassification)|Model|LMHead)$"
)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_TOKEN = re.compile(r"[a-z0-9]+")
SEARCH_LIMIT = 1000  # GitHub's own cap on one search's results


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


def keywords_of(class_name: str, path: str, issues: Iterable[int] = ()) -> Keywords:
    """A class's name, family and file: ``Qwen2MoeForCausalLM`` in ``.../qwen2_moe.py`` gives
    ``Qwen2Moe`` and ``qwen2_moe``."""
    family = _SUFFIX.sub("", class_name) or class_name
    parts = path.split("/") if path else []
    if len(parts) > 3 and parts[:2] == ["vllm", "models"]:
        stem = parts[2]  # a model package (vllm/models/<name>/<platform>/...) names the model
    else:
        stem = parts[-1].removesuffix(".py") if parts else ""
    return Keywords(class_name, family, stem, tuple(sorted(set(issues))))


def run_search(
    client: GitHubClient,
    upstream: str,
    keywords: Sequence[Keywords],
    own_markers: Iterable[str],
    rules_commands: Sequence[str],
) -> DuplicateSearch:
    """The search, through the API; ``own_markers`` are this plan's fingerprint markers (its
    own earlier PR is no duplicate of itself, nor is one published for the same fix on an
    older base: :func:`bot.github.identity.fix_key`)."""
    from bot.github.identity import fingerprints_in, fix_key, plan_fingerprint_in

    markers = list(own_markers)
    own_fixes = {fix_key(f) for m in markers for f in fingerprints_in(m)} - {None}
    issues = sorted({n for kw in keywords for n in kw.issues})
    items: dict[int, dict[str, Any]] = {}
    comments = 0
    for number in issues:
        data = client.get_issue(number, repo=upstream)
        comments += len(data.get("comments_list") or [])
        for item in client.search_issues(f"repo:{upstream} is:pr {number} in:body"):
            items.setdefault(int(item["number"]), item)
    about = " OR ".join(ABOUT)
    eagle = client.search_issues(f"repo:{upstream} is:pr {about}", limit=SEARCH_LIMIT)
    for item in eagle:
        items.setdefault(int(item["number"]), item)
    found = []
    for number, item in sorted(items.items()):
        body = str(item.get("body") or "")
        if not item.get("pull_request") or any(marker in body for marker in markers):
            continue
        if fix_key(plan_fingerprint_in(body) or "") in own_fixes:
            continue
        pull = _judge(number, item, keywords)
        if pull is not None:
            found.append(pull)
    return DuplicateSearch(
        ran=True,
        issue_comments=comments,
        upstream=upstream,
        agents_commands=tuple(rules_commands),
        about_eagle=len(eagle),
        keywords=tuple(keywords),
        found=tuple(found),
    )


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


def _judge(number: int, item: dict[str, Any], keywords: Sequence[Keywords]) -> FoundPull | None:
    """The PR as found: the classes it covers and why; None when it names none of them."""
    title, body = str(item.get("title") or ""), str(item.get("body") or "")
    about = bool(_ABOUT.search(f"{title}\n{body}"))
    covers: list[str] = []
    whys: list[str] = []
    for kw in keywords:
        named = [n for n in kw.issues if _names_issue(body, n)]
        matched = f"its body names issue #{named[0]}" if named else ""
        if not matched and about:
            matched = _covers(kw, title, body)
        if matched:
            covers.append(kw.class_name)
            whys.append(matched)
    if not covers:
        return None
    title = " ".join(title.split())[:200]
    return FoundPull(number, _state(item), title, tuple(covers), tuple(whys))


def _names_issue(body: str, number: int) -> bool:
    return bool(re.search(rf"(?:(?<![\w&])#|/issues/){number}\b", body))


def _state(item: dict[str, Any]) -> str:
    if item.get("state") == "open":
        return "open"
    return "merged" if (item.get("pull_request") or {}).get("merged_at") else "closed"


def _covers(kw: Keywords, title: str, body: str) -> str:
    """Which of ``kw`` a PR's title or body names (the rule in the module's docstring)."""
    title_tokens = tokens(title)
    named = [("class name", kw.class_name), ("model family", kw.family), ("file name", kw.file)]
    for label, value in named:
        if value and names(title_tokens, tokens(_split_camel(value))):
            return f"its title names the {label} {value}"
    # A body's list of model families is no claim to fix them: there only the class, or the
    # model file as a file (``qwen2_moe.py``, ``models/step5/``), counts.
    if kw.class_name and names(tokens(body), tokens(_split_camel(kw.class_name))):
        return f"its body names the class name {kw.class_name}"
    if kw.file and re.search(rf"(?i)(?<![\w.]){re.escape(kw.file)}(\.py\b|/)", body):
        return f"its body names the file {kw.file}"
    return ""


def _split_camel(value: str) -> str:
    return " ".join(_CAMEL.findall(value)) if "_" not in value else value


def tokens(text: str) -> list[str]:
    """Lower-case letters and digits, split at everything else (``Qwen2-MoE``, ``qwen2_moe``
    and ``Qwen2 MoE`` all read ``qwen2 moe``)."""
    return _TOKEN.findall(_split_camel_words(text).lower())


def _split_camel_words(text: str) -> str:
    # "Qwen2MoeForCausalLM" in prose reads as its words, like the keyword it is matched with.
    return re.sub(r"[A-Za-z0-9]+", lambda m: " ".join(_CAMEL.findall(m[0])) or m[0], text)


def names(text: Sequence[str], wanted: Sequence[str]) -> bool:
    """Whether ``wanted``'s words appear in ``text`` as one whole name: joined the same way
    (``qwen2 moe`` = ``qwen2moe``) and not continued by a version or variant number, so
    "GLM-4" names ``glm4`` but "GLM-4.5" does not."""
    if not wanted:
        return False
    target = "".join(wanted)
    for start in range(len(text)):
        joined = ""
        for end in range(start, len(text)):
            joined += text[end]
            if not target.startswith(joined):
                break
            if joined == target:
                following = text[end + 1] if end + 1 < len(text) else ""
                if not following[:1].isdigit():
                    return True
                break
    return False


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
