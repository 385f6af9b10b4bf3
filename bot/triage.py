"""Triage: a GitHub issue -> which architecture lacks ``SupportsEagle3``, and how sure we are.

Issue text is hostile input. It is only ever searched with bounded, linear regular expressions:
each part is capped at :data:`MAX_PART_CHARS`, HTML comments (invisible to readers) are dropped,
bidi controls are stripped, and extracted names are limited to ``[A-Za-z0-9_./:-]``, so nothing
taken from the issue can carry markup, shell syntax or template code onwards.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from bot.drafts import DraftCatalogue, load_catalogue
from bot.errors import BotError
from bot.tree.known_models import GENERATION_CATEGORIES, KnownModels, load_known_models
from bot.tree.signatures import ErrorSignature, error_signatures, match_signature

THRESHOLD = 0.7
MAX_PART_CHARS = 64 * 1024
MAX_COMMENTS = 50

# Evidence strengths for an architecture (before ambiguity and corroboration).
_SCORE_ARCH_NAMED = 0.95
_SCORE_EXACT_ID = 0.9
_SCORE_DRAFT_TARGET = 0.75
_SCORE_CORE_NAME = 0.75
_SCORE_FAMILY = 0.5
_BONUS_SIGNATURE = 0.1
_BONUS_METHOD = 0.05
_AMBIGUITY_FACTOR = 0.6

_BIDI = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_NAME = r"[A-Za-z0-9_./:~-]{1,200}"
_QUOTE = r"""["']?"""
_TARGET_PATTERNS = (
    re.compile(rf"\bvllm\s+serve\s+{_QUOTE}(?P<name>{_NAME})"),
    re.compile(rf"--model(?:[ \t]+|=){_QUOTE}(?P<name>{_NAME})"),
    re.compile(rf"\bmodel\s*=\s*[\"'](?P<name>{_NAME})[\"']"),
    re.compile(rf"(?m)^\s*model:\s*{_QUOTE}(?P<name>{_NAME})"),
)
# A speculative config written as a value: JSON/dict/constructor, or a --speculative-model flag.
_SPEC_START = re.compile(
    rf"(?:speculative[-_]config|SpeculativeConfig)[\s=:'\"]{{0,5}}[{{(]"
    rf"|speculative[-_]model[\s=:'\"]{{1,5}}{_NAME}",
    re.I,
)
_SPEC_SPAN_CHARS = 600
_SPEC_DRAFT = re.compile(
    rf"""(?:["']model["']\s*:\s*|\bmodel\s*=\s*|speculative[-_]model[=\s"':]+)["']?(?P<name>{_NAME})"""
)
_SPEC_METHOD = re.compile(r"""["']?method["']?\s*[:=]\s*["'](?P<method>[A-Za-z0-9_-]{1,40})["']""")
_HF_ID = re.compile(r"(?<![\w./-])(?P<name>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,95})(?![\w/])")
_HF_ID_FULL = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_ARCH_TOKEN = re.compile(r"\b[A-Z][A-Za-z0-9_]{2,100}\b")
_METHOD_WORDS = (
    ("dflash", re.compile(r"\bdflash\b", re.I)),
    ("dspark", re.compile(r"\bdspark\b", re.I)),
    ("eagle3", re.compile(r"\beagle[-_ ]?3\b", re.I)),
)
METHODS = ("eagle3", "dflash", "dspark")

# Suffix tokens that name a quantisation, a fine-tune variant or a release date, not a model.
_VARIANT_TOKENS = frozenset(
    {
        *("fp8", "fp16", "bf16", "fp4", "nvfp4", "mxfp4", "int4", "int8", "fp8dynamic"),
        *("w4a16", "w8a8", "w4a8", "w8a16", "w4a4", "awq", "gptq", "gguf", "exl2", "mlx"),
        *("4bit", "8bit", "dynamic", "static", "quantized", "quant", "marlin", "kv"),
        *("instruct", "thinking", "base", "chat", "hf", "it", "sft", "dpo", "rl", "qat"),
    }
)
_DATE_TOKEN = re.compile(r"^(?:\d{4}|\d{6}|\d{8})$")
_SIZE_TOKEN = re.compile(r"^(?:\d+(?:\.\d+)?[bmk]|a\d+(?:\.\d+)?b|e\d+b|\d+x\d+b)$")
_MINOR_VERSION = re.compile(r"^(\d+)\.\d+$")
_SPLIT = re.compile(r"[-_ ]+")


@dataclass(frozen=True)
class Triage:
    architecture: str | None
    method: str | None  # "eagle3" | "dflash" | "dspark" | None
    model_mentions: tuple[str, ...]
    draft: str | None
    confidence: float
    reasons: tuple[str, ...]
    signature: dict[str, Any] | None
    missing: tuple[str, ...]
    crash_site: str | None = None  # "path:line" of the raise that matches the issue's error
    alternatives: tuple[str, ...] = ()

    @property
    def confident(self) -> bool:
        return self.confidence >= THRESHOLD

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("model_mentions", "reasons", "missing", "alternatives"):
            data[key] = list(data[key])
        data["confident"] = self.confident
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=True)


@dataclass
class _Evidence:
    scores: dict[str, float] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    alternatives: list[str] = field(default_factory=list)

    def add(self, arch: str, score: float, reason: str) -> None:
        if score > self.scores.get(arch, 0.0):
            self.scores[arch] = score
        self.reasons.append(reason)


def triage_issue(
    issue: dict[str, Any], tree_root: Path, catalogue: DraftCatalogue | None = None
) -> Triage:
    if not isinstance(issue, dict):
        raise BotError("an issue must be a JSON object (GitHub's REST issue shape)")
    catalogue = catalogue if catalogue is not None else load_catalogue()
    known = load_known_models(tree_root)
    reasons: list[str] = []
    parts = _issue_parts(issue, reasons)
    text = "\n".join(parts)

    signatures = _signatures(tree_root.resolve())
    signature = match_signature(text, signatures)
    if signature:
        reasons.append(
            f"the error `{signature.message_prefix}` matches the raise site {signature.location}"
        )

    method = _method(text, reasons)
    spec_spans = _spec_spans(text)
    issue_draft = _issue_draft(text, spec_spans, reasons)

    evidence = _Evidence()
    mentions = _target_mentions(text, spec_spans, known, catalogue)
    index = _NameIndex.build(known, catalogue)
    for mention in mentions:
        _resolve_mention(mention, index, evidence)
    for arch in _named_archs(text, tree_root.resolve()):
        evidence.add(arch, _SCORE_ARCH_NAMED, f"the issue names the architecture `{arch}`")
        mentions.append(arch)
    if issue_draft:
        entry = catalogue.find(issue_draft)
        if entry and entry.target_arch:
            evidence.add(
                entry.target_arch,
                _SCORE_DRAFT_TARGET,
                f"the draft `{issue_draft}` targets {entry.target_arch} ({entry.source})",
            )
    reasons.extend(evidence.reasons)

    architecture, confidence, alternatives = _decide(evidence)
    if alternatives:
        reasons.append(f"other candidate architectures: {', '.join(alternatives)}")
    if architecture and signature:
        confidence += _BONUS_SIGNATURE
    if architecture and method:
        confidence += _BONUS_METHOD
    confidence = round(min(confidence, 1.0), 3)

    draft = issue_draft if issue_draft and _HF_ID_FULL.match(issue_draft) else None
    if draft is None and architecture:
        choice = catalogue.choose(architecture)
        reasons.append(f"draft: {choice.reason}")
        draft = choice.draft.repo_id if choice.draft else None

    missing = _missing(architecture, alternatives, mentions, signature, method, signatures)
    return Triage(
        architecture=architecture,
        method=method,
        model_mentions=tuple(dict.fromkeys(mentions)),
        draft=draft,
        confidence=confidence,
        reasons=tuple(reasons),
        signature=signature.to_dict() if signature else None,
        missing=tuple(missing) if confidence < THRESHOLD else (),
        crash_site=signature.location if signature else None,
        alternatives=tuple(alternatives),
    )


# --- reading the issue ----------------------------------------------------------------------------


def clean_text(text: str) -> tuple[str, bool]:
    """Cap, drop HTML comments, strip bidi controls. Returns (text, was_truncated)."""
    truncated = len(text) > MAX_PART_CHARS
    text = text[:MAX_PART_CHARS]
    text = _HTML_COMMENT.sub(" ", text)
    return _BIDI.sub("", text), truncated


def _issue_parts(issue: dict[str, Any], reasons: list[str]) -> list[str]:
    raw: list[tuple[str, object]] = [("title", issue.get("title")), ("body", issue.get("body"))]
    comments = issue.get("comments_list") or []
    if not isinstance(comments, list):
        comments = []
    if len(comments) > MAX_COMMENTS:
        reasons.append(f"only the first {MAX_COMMENTS} of {len(comments)} comments were read")
    for number, comment in enumerate(comments[:MAX_COMMENTS], start=1):
        body = comment.get("body") if isinstance(comment, dict) else None
        raw.append((f"comment {number}", body))
    parts = []
    for where, value in raw:
        if not isinstance(value, str) or not value:
            continue
        cleaned, truncated = clean_text(value)
        if truncated:
            reasons.append(
                f"the {where} is longer than {MAX_PART_CHARS} characters; read the start"
            )
        parts.append(cleaned)
    return parts


@lru_cache(maxsize=8)
def _signatures(tree_root: Path) -> list[ErrorSignature]:
    return error_signatures(tree_root)


@lru_cache(maxsize=8)
def _generation_archs(tree_root: Path) -> frozenset[str]:
    """Architectures vLLM's model registry can serve as a target (not drafts, not poolers)."""
    from bot.tree.model_registry import load_model_registry

    registry = load_model_registry(tree_root)
    return frozenset(e.arch for e in registry.entries if e.category in GENERATION_CATEGORIES)


def _method(text: str, reasons: list[str]) -> str | None:
    for match in _SPEC_METHOD.finditer(text):
        value = match.group("method").lower()
        if value in METHODS:
            reasons.append(f"the speculative config sets method `{value}`")
            return value
    for method, pattern in _METHOD_WORDS:
        if pattern.search(text):
            reasons.append(f"the issue mentions {method}")
            return method
    return None


def _spec_spans(text: str) -> list[tuple[int, int]]:
    """Where speculative-decoding settings are written; a ``model`` there is the draft."""
    spans = []
    for match in _SPEC_START.finditer(text):
        start, end = match.start(), match.end()
        if text[end - 1] in "{(":
            limit = min(len(text), start + _SPEC_SPAN_CHARS)
            closing = [
                i for i in (text.find("}", end, limit), text.find(")", end, limit)) if i >= 0
            ]
            end = min(closing) + 1 if closing else limit
        spans.append((start, end))
    return spans


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= position < end for start, end in spans)


def _issue_draft(text: str, spans: list[tuple[int, int]], reasons: list[str]) -> str | None:
    for start, end in spans:
        match = _SPEC_DRAFT.search(text, start, end)
        if match:
            draft = _trim(match.group("name"))
            if _HF_ID_FULL.match(draft):
                reasons.append(f"the issue's speculative config uses the draft `{draft}`")
                return draft
            reasons.append(f"the issue's draft `{draft}` is a local path, not a public repo id")
            return draft
    return None


def _trim(name: str) -> str:
    return name.rstrip(".,:;/")


# --- mapping names to architectures ---------------------------------------------------------------


def _target_mentions(
    text: str, spans: list[tuple[int, int]], known: KnownModels, catalogue: DraftCatalogue
) -> list[str]:
    found: list[str] = []
    for pattern in _TARGET_PATTERNS:
        for match in pattern.finditer(text):
            if not _inside(match.start(), spans):
                found.append(_trim(match.group("name")))
    for match in _HF_ID.finditer(text):
        if not _inside(match.start(), spans) and catalogue.find(match.group("name")) is None:
            found.append(_trim(match.group("name")))
    return [m for m in dict.fromkeys(found) if m and not m.startswith("-")]


@dataclass(frozen=True)
class _NameIndex:
    exact: dict[str, list[str]]  # lower-cased repo id -> archs
    by_repo_name: dict[str, list[tuple[str, str]]]  # lower-cased repo name -> [(id, arch)]
    by_core: dict[str, list[tuple[str, str]]]
    by_family: dict[str, list[tuple[str, str]]]

    @classmethod
    def build(cls, known: KnownModels, catalogue: DraftCatalogue) -> _NameIndex:
        pairs = [(hf_id, arch) for hf_id, archs in known.id_to_archs().items() for arch in archs]
        pairs += [
            (e.target_repo_id, e.target_arch)
            for e in catalogue.entries
            if e.target_repo_id and e.target_arch
        ]
        exact: dict[str, list[str]] = {}
        by_repo_name: dict[str, list[tuple[str, str]]] = {}
        by_core: dict[str, list[tuple[str, str]]] = {}
        by_family: dict[str, list[tuple[str, str]]] = {}
        for hf_id, arch in dict.fromkeys(pairs):
            _append(exact, hf_id.lower(), arch)
            repo_name = hf_id.rsplit("/", 1)[-1]
            _append(by_repo_name, repo_name.lower(), (hf_id, arch))
            _append(by_core, core_name(repo_name), (hf_id, arch))
            _append(by_family, family_name(repo_name), (hf_id, arch))
        return cls(exact, by_repo_name, by_core, by_family)


def _append(mapping: dict[str, list[Any]], key: str, value: Any) -> None:
    if key:
        bucket = mapping.setdefault(key, [])
        if value not in bucket:
            bucket.append(value)


def core_name(name: str) -> str:
    """``Qwen3-Next-80B-A3B-Instruct-FP8`` -> ``qwen3-next-80b-a3b``: variant suffixes dropped."""
    tokens = [t for t in _SPLIT.split(name.rsplit("/", 1)[-1].lower()) if t]
    if len(tokens) > 1 and tokens[0] == "meta":  # Meta-Llama-3.1-8B is Llama-3.1-8B
        tokens.pop(0)
    while len(tokens) > 1 and (tokens[-1] in _VARIANT_TOKENS or _DATE_TOKEN.match(tokens[-1])):
        tokens.pop()
    return "-".join(tokens)


def family_name(name: str) -> str:
    """``core_name`` without sizes or minor versions: ``mistral-small-3.2-24b``
    -> ``mistral-small-3``.

    Versions are compared by major number only (Llama 3 and 3.1 share an architecture).
    """
    tokens = [
        _MINOR_VERSION.sub(r"\1", t) for t in core_name(name).split("-") if not _SIZE_TOKEN.match(t)
    ]
    return "-".join(tokens)


def _resolve_mention(name: str, index: _NameIndex, evidence: _Evidence) -> None:
    is_path = name.startswith(("/", "./", "~")) or name.count("/") > 1
    is_id = bool(_HF_ID_FULL.match(name)) and not is_path
    if is_id and name.lower() in index.exact:
        archs = index.exact[name.lower()]
        for arch in archs:
            evidence.add(
                arch,
                _SCORE_EXACT_ID / len(archs),
                f"`{name}` is an example model of {arch} in the vLLM tree",
            )
        return
    base = name.rstrip("/").rsplit("/", 1)[-1]
    how = f"`{name}` (model name `{base}`)" if base != name else f"`{name}`"
    if not base or len(base) < 3:
        return
    lookups = (
        (index.by_repo_name, base.lower(), _SCORE_EXACT_ID, "has the same name as"),
        (index.by_core, core_name(base), _SCORE_CORE_NAME, "without variant suffixes matches"),
        (index.by_family, family_name(base), _SCORE_FAMILY, "only by model family matches"),
    )
    for table, key, score, label in lookups:
        matches = table.get(key) if key else None
        if matches:
            archs = list(dict.fromkeys(arch for _, arch in matches))
            examples = ", ".join(f"{hf_id} ({arch})" for hf_id, arch in matches[:4])
            for arch in archs:
                evidence.add(arch, score / len(archs), f"{how} {label} {examples}")
            return
    evidence.reasons.append(f"{how} matches no model the vLLM tree or the draft catalogue knows")


def _named_archs(text: str, tree_root: Path) -> list[str]:
    try:
        archs = _generation_archs(tree_root)
    except BotError:
        return []
    return list(
        dict.fromkeys(m.group(0) for m in _ARCH_TOKEN.finditer(text) if m.group(0) in archs)
    )


def _decide(evidence: _Evidence) -> tuple[str | None, float, list[str]]:
    if not evidence.scores:
        return None, 0.0, []
    ranked = sorted(evidence.scores.items(), key=lambda item: -item[1])
    best, score = ranked[0]
    rivals = [arch for arch, other in ranked[1:] if other >= score - 0.15]
    if rivals:
        score *= _AMBIGUITY_FACTOR
    return best, score, rivals


def _missing(
    architecture: str | None,
    alternatives: list[str],
    mentions: list[str],
    signature: ErrorSignature | None,
    method: str | None,
    signatures: list[ErrorSignature],
) -> list[str]:
    questions = []
    if architecture is None and mentions:
        names = ", ".join(f"`{m}`" for m in mentions[:3])
        questions.append(
            f"We could not map {names} to a model vLLM knows: which model architecture "
            "(config.json `architectures`) does it use, and which Hugging Face model is it "
            "based on?"
        )
    elif architecture is None:
        questions.append(
            "Which model were you serving (the `--model` argument), and which model architecture "
            "(config.json `architectures`) does it use?"
        )
    elif alternatives:
        options = ", ".join(f"`{a}`" for a in [architecture, *alternatives])
        questions.append(f"Which of {options} does your model's config.json `architectures` list?")
    else:
        questions.append(
            f"Can you confirm your model's config.json `architectures` is `{architecture}`?"
        )
    if signature is None:
        expected = signatures[0].message_prefix if signatures else "Model does not support EAGLE3"
        questions.append(
            f"Please paste the full error and traceback (we expect a message like `{expected}`)."
        )
    if method is None:
        questions.append(
            "Which speculative decoding method (`--speculative-config` `method`: eagle3, dflash "
            "or dspark) and which draft model did you use?"
        )
    return questions
