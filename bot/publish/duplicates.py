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
from typing import TYPE_CHECKING, Any

from bot.duplicate_search import (
    ABOUT,
    DuplicateSearch,
    FoundPull,
    Keywords,
)

if TYPE_CHECKING:
    from bot.github.client import GitHubClient

_ABOUT = re.compile(r"(?i)eagle|dflash|dspark")
_SUFFIX = re.compile(
    r"(For(CausalLM|ConditionalGeneration|ActionPrediction|SequenceClassification)|Model|LMHead)$"
)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_TOKEN = re.compile(r"[a-z0-9]+")
SEARCH_LIMIT = 1000  # GitHub's own cap on one search's results


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
