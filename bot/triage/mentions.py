"""Where the issue names a model: its speculative config (method, draft), the commands and
configs that name a target, the names in its prose, and the architectures and model types it
quotes. Bounded, linear regular expressions only: the text is hostile."""

from __future__ import annotations

import bisect
import re
from functools import lru_cache
from pathlib import Path

from bot.drafts import DraftCatalogue
from bot.errors import BotError
from bot.triage.names import HF_ID_FULL, squash
from bot.triage.text import (
    hub_links,
    is_container_image,
    method_in_text,
    model_tokens,
    model_types,
    normalise_method,
    url_repo_ids,
)
from bot.triage.tree import class_archs, config_model_types, generation_archs, model_type_table

_MAX_PROSE_NAMES = 400
_MAX_MENTIONS = 400


_NAME = r"[A-Za-z0-9_./:~-]{1,200}"
_QUOTE = r"""["']?"""
# The key a served model is given under: `model`, `model_id`, `model-path`, `model_name_or_path`.
_MODEL_KEY = r"model(?:[-_](?:id|path|name[-_]or[-_]path))?"
_TARGET_PATTERNS = (
    re.compile(rf"\bvllm\s+serve\s+{_QUOTE}(?P<name>{_NAME})"),
    # `--model ID`, `--model=ID`, `--model "ID"`, `- --model=ID` (a container's args),
    # `--model \` continued on the next line
    re.compile(
        rf"--{_MODEL_KEY}(?:[ \t]*=[ \t]*|[ \t]+(?:\\\r?\n[ \t]*)?){_QUOTE}(?P<name>{_NAME})"
    ),
    # `model="ID"`: a keyword argument or a logged config
    re.compile(rf"\b{_MODEL_KEY}\s*=\s*[\"'](?P<name>{_NAME})[\"']"),
    # `model: ID` in YAML, also as a list item (`- model: ID`); not a `model:` in prose
    re.compile(rf"(?m)^[ \t]*(?:-[ \t]+)?{_MODEL_KEY}:[ \t]*{_QUOTE}(?P<name>{_NAME})"),
    # `"model": "ID"` (JSON), `'model': 'ID'` (a dict vLLM logs as its non-default args)
    re.compile(rf"[\"']{_MODEL_KEY}[\"'][ \t]*:[ \t]*[\"'](?P<name>{_NAME})[\"']"),
)
# A speculative config written as a value: JSON/dict/constructor, or a --speculative-model flag.
_SPEC_START = re.compile(
    rf"(?:speculative[-_]config|SpeculativeConfig)[\s=:'\"]{{0,5}}[{{(]"
    rf"|speculative[-_]model[\s=:'\"]{{1,5}}{_NAME}",
    re.I,
)
_SPEC_SPAN_CHARS = 600
# The same as a YAML block: `speculative_config:` and the lines indented under it.
_SPEC_BLOCK_KEY = re.compile(r"speculative[-_]config:[ \t]*\r?\n")
_YAML_LEAD = re.compile(r"[ \t]{0,60}(?:-[ \t]+)?")
_SPEC_BLOCK_LINES = 30
_SPEC_LINE_CHARS = 300
_SPEC_DRAFT = re.compile(
    rf"""(?:["']model["']\s*:\s*|\bmodel\s*=\s*|(?m:^[ \t]*model:[ \t]*)|"""
    rf"""speculative[-_]model[=\s"':]+)["']?(?P<name>{_NAME})"""
)
_SPEC_METHOD = re.compile(r"""["']?method["']?\s*[:=]\s*["'](?P<method>[A-Za-z0-9_-]{1,40})["']""")
_HF_ID = re.compile(r"(?<![\w./-])(?P<name>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,95})(?![\w/])")
_MODEL_LIKE_ID = re.compile(r"^[A-Za-z0-9][\w.-]+/(?=[\w.-]*\d)[\w.-]{2,}$")


_ARCH_TOKEN = re.compile(r"\b[A-Z][A-Za-z0-9_]{2,100}\b")
_PLAIN_WORD = re.compile(r"^[A-Z][a-z]+$")
# A plain word is an architecture only where code or a log writes it.
_CODE_BEFORE = re.compile(r"""(?:[`"'\[]|architectures?\W{0,4}|Model\s*=\s*)$""", re.I)
METHODS = ("eagle3", "dflash", "dspark")


def speculative_method(text: str, reasons: list[str]) -> str | None:
    for match in _SPEC_METHOD.finditer(text):
        value = normalise_method(match.group("method"))
        if value in METHODS:
            reasons.append(f"the speculative config sets method `{value}`")
            return value
    method = method_in_text(text)
    if method:
        reasons.append(f"the issue mentions {method}")
    return method


def speculative_spans(text: str) -> list[tuple[int, int]]:
    """Where speculative-decoding settings are written; a ``model`` there is the draft."""
    spans: list[tuple[int, int]] = []
    found = []
    for match in _SPEC_START.finditer(text):
        start, end = match.start(), match.end()
        if text[end - 1] in "{(":
            limit = min(len(text), start + _SPEC_SPAN_CHARS)
            closing = [
                i for i in (text.find("}", end, limit), text.find(")", end, limit)) if i >= 0
            ]
            end = min(closing) + 1 if closing else limit
        found.append((start, end))
    for start, end in sorted([*found, *_yaml_spec_blocks(text)]):
        if spans and start <= spans[-1][1]:  # overlapping: one span
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


def _yaml_spec_blocks(text: str) -> list[tuple[int, int]]:
    """``speculative_config:`` as a YAML key and the lines indented deeper under it (at most
    :data:`_SPEC_BLOCK_LINES` of :data:`_SPEC_LINE_CHARS`). Found by the key, never by testing
    every line start, so a flood of short lines costs one pass."""
    blocks = []
    for match in _SPEC_BLOCK_KEY.finditer(text):
        floor = max(0, match.start() - 80)
        line_start = text.rfind("\n", floor, match.start()) + 1
        if line_start == 0 and floor > 0:
            continue
        lead = text[line_start : match.start()]
        if not _YAML_LEAD.fullmatch(lead):
            continue
        indent = len(lead) - len(lead.lstrip(" \t"))
        end = position = match.end()
        for _ in range(_SPEC_BLOCK_LINES):
            line_end = text.find("\n", position, position + _SPEC_LINE_CHARS)
            line = text[position : line_end if line_end >= 0 else position + _SPEC_LINE_CHARS]
            body = line.lstrip(" \t")
            if not body.strip() or len(line) - len(body) <= indent:
                break
            end = position + len(line)
            if line_end < 0:
                break
            position = line_end + 1
        if end > match.end():
            blocks.append((line_start, end))
    return blocks


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
    """``spans`` as ``speculative_spans`` gives them: sorted and not overlapping."""
    index = bisect.bisect_right(spans, (position, _NO_END)) - 1
    return index >= 0 and position < spans[index][1]


_NO_END = 1 << 62


def speculative_draft(text: str, spans: list[tuple[int, int]], reasons: list[str]) -> str | None:
    for start, end in spans:
        match = _SPEC_DRAFT.search(text, start, end)
        if match:
            draft = _trim(match.group("name"))
            if HF_ID_FULL.match(draft):
                reasons.append(f"the issue's speculative config uses the draft `{draft}`")
                return draft
            reasons.append(f"the issue's draft `{draft}` is a local path, not a public repo id")
            return draft
    return None


def _trim(name: str) -> str:
    return name.rstrip(".,:;/")


# A repository named as a draft: `org/X-EAGLE3`, `org/X-DFlash-b16`, `org/X-speculator.eagle3`.
_DRAFT_NAME = re.compile(
    r"(?i)(?:^|[-_.])(?:eagle\d?|dflash\d*|dspark\d*|speculators?|draft(?:er)?|medusa)(?=$|[-_.\d])"
)


def named_draft(
    text: str,
    spans: list[tuple[int, int]],
    catalogue: DraftCatalogue,
    served: set[str],
    reasons: list[str],
) -> str | None:
    """A draft named outside a speculative config, as a Hub link or `org/name`: an EAGLE /
    DFlash / DSpark draft the catalogue lists, or one whose name says it is a draft
    (`...-EAGLE3`, `...-DFlash`); never the model the issue serves (an MTP checkpoint is its
    own draft)."""
    drafts = _speculator_ids(catalogue)
    names = [n for n in hub_links(text) if not _inside(text.find(n), spans)]
    for count, match in enumerate(_HF_ID.finditer(text)):
        if count >= _MAX_MENTIONS:
            break
        if _inside(match.start(), spans) or is_container_image(text, match.start(), match.end()):
            continue
        names.append(_trim(match.group("name")))
    for name in dict.fromkeys(names):
        if name in served:
            continue
        if name.lower() in drafts or _DRAFT_NAME.search(name.rsplit("/", 1)[-1]):
            reasons.append(f"the issue names the draft `{name}`")
            return name
    return None


def target_mentions(
    text: str, spans: list[tuple[int, int]], catalogue: DraftCatalogue
) -> tuple[list[str], set[str]]:
    """(mentions, served): names given as the model to serve (`vllm serve X`, `--model X`,
    `model=...`; also returned alone as ``served``) and every ``org/name`` that is not a draft,
    a container image or inside the speculative config (the first :data:`_MAX_MENTIONS`
    distinct ones: a flood of names is not a bug report)."""
    found: dict[str, None] = {}
    for pattern in _TARGET_PATTERNS:
        for match in pattern.finditer(text):
            if len(found) >= _MAX_MENTIONS:
                break
            if not _inside(match.start(), spans):
                found[_trim(match.group("name"))] = None
    served = set(found)
    drafts = _draft_ids(catalogue)
    seen: set[str] = set()
    for match in _HF_ID.finditer(text):
        name = match.group("name")
        if len(found) >= _MAX_MENTIONS:
            break
        if name in seen:
            continue
        seen.add(name)
        if _inside(match.start(), spans) or name.lower() in drafts:
            continue
        if is_container_image(text, match.start(), match.end()):
            continue
        if not _MODEL_LIKE_ID.match(name):  # `and/or`, `TP/PP`, `N/A`: prose, not a model
            continue
        found[_trim(name)] = None
    return [m for m in found if m and not m.startswith("-")], served


@lru_cache(maxsize=4)
def _draft_ids(catalogue: DraftCatalogue) -> frozenset[str]:
    return frozenset(e.repo_id.lower() for e in catalogue.entries)


_SPECULATOR_METHODS = frozenset({*METHODS, "eagle"})


@lru_cache(maxsize=4)
def _speculator_ids(catalogue: DraftCatalogue) -> frozenset[str]:
    """Drafts that are separate checkpoints (not an MTP head inside the target's own)."""
    return frozenset(
        e.repo_id.lower() for e in catalogue.entries if e.method in _SPECULATOR_METHODS
    )


def prose_names(
    text: str, spans: list[tuple[int, int]], mentions: list[str], catalogue: DraftCatalogue
) -> list[str]:
    """Model names written without a command: in prose, paths and URLs (kept when they resolve)."""
    seen = {m.lower() for m in mentions}
    urls = url_repo_ids(text)[:_MAX_PROSE_NAMES]
    names = [*urls, *model_tokens(_outside(text, spans), _MAX_PROSE_NAMES - len(urls))]
    drafts = _draft_ids(catalogue)
    return [n for n in dict.fromkeys(names) if n.lower() not in seen and n.lower() not in drafts]


def _outside(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the speculative-config spans blanked (their names are the draft's);
    built in one pass, whatever the number of spans."""
    pieces, done = [], 0
    for start, end in spans:
        pieces += [text[done:start], " " * (end - start)]
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def model_type_archs(text: str, tree_root: Path) -> list[tuple[str, tuple[str, ...]]]:
    found = []
    try:
        table = model_type_table(tree_root)
        archs_known = generation_archs(tree_root)
    except BotError:
        return []
    wanted_types = model_types(text)
    configs = config_model_types(tree_root) if wanted_types else {}
    for model_type in wanted_types:
        archs = table.get(model_type) or configs.get(model_type)
        if not archs:
            wanted = squash(model_type)
            archs = tuple(a for a in archs_known if re.sub(r"For\w+$", "", a).lower() == wanted)
        if archs:
            found.append((model_type, archs))
    return found


def named_archs(text: str, tree_root: Path) -> list[str]:
    """Architectures the text names: a registry key, or the class vLLM loads for one."""
    try:
        archs = generation_archs(tree_root)
        classes = class_archs(tree_root)
    except BotError:
        return []
    found: list[str] = []
    for match in _ARCH_TOKEN.finditer(text):
        token = match.group(0)
        if _PLAIN_WORD.match(token) and not _CODE_BEFORE.search(
            text, max(0, match.start() - 40), match.start()
        ):
            continue  # `Ovis`, a registry key that is also the family's word in prose
        if token in archs:
            found.append(token)
        elif token in classes and len(classes[token]) == 1:
            found.append(classes[token][0])
    return list(dict.fromkeys(found))
