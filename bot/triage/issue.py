"""Triage: a GitHub issue -> which architecture lacks ``SupportsEagle3``, and how sure we are.

Issue text is hostile input. It is only ever searched with bounded, linear regular expressions:
each part is capped at :data:`MAX_PART_CHARS`, HTML comments (invisible to readers) are dropped,
bidi controls are stripped, and extracted names are limited to ``[A-Za-z0-9_./:-]``, so nothing
taken from the issue can carry markup, shell syntax or template code onwards.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.drafts import DraftCatalogue, load_catalogue
from bot.errors import BotError
from bot.github.identity import is_status_comment
from bot.hub import Hub
from bot.tree.known_models import GENERATION_CATEGORIES, KnownModels, load_known_models
from bot.tree.signatures import ErrorSignature, error_signatures, match_signature
from bot.triage.checkpoint import MAX_CHECKPOINTS, Checkpoint, read_checkpoint, repo_id_like
from bot.triage.release import class_family, loads_family_class
from bot.triage.text import (
    INTERFACE_WORDS,
    drop_noise,
    hub_links,
    is_container_image,
    method_in_text,
    method_request,
    modality_words,
    model_tokens,
    model_types,
    normalise_method,
    spaced_phrases,
    url_repo_ids,
)
from bot.triage.tree import broken_claim, config_model_types, draft_archs
from bot.triage_outcome import ASK, PROPOSE, SILENT, THRESHOLD, Triage

if TYPE_CHECKING:
    from bot.recipes.base import ScanContext

MAX_PART_CHARS = 64 * 1024
MAX_COMMENTS = 50

# Evidence strengths for an architecture (before ambiguity and corroboration).
_SCORE_ARCH_NAMED = 0.95
_SCORE_EXACT_ID = 0.9
_SCORE_DRAFT_TARGET = 0.75
_SCORE_CORE_NAME = 0.75
_SCORE_FAMILY = 0.5
_SCORE_MODEL_TYPE = 0.85
_BY_CORE = "without variant suffixes matches"
_BY_FAMILY = "by model family and version matches"
_BY_MAJOR = "only by model family (major version) matches"
_BY_MAJOR_WORDS = "only by model family (major version, words in another order) matches"
_BY_RELEASE = (
    "a release the tree does not list, of a family whose class names its major version alone "
    "or none and that gives no minor release a class of its own: it loads"
)
_BY_PREFIX = "extends the name of"
_SCORE_VERSION_FAMILY = 0.72  # same family and version, another size: the class serves sizes alike
_SCORE_PREFIX = 0.72
_BY_FAMILY_MOE = "(total and active parameters: a mixture of experts) is the MoE class of"
_MAX_PROSE_NAMES = 400
_MAX_MENTIONS = 400
_SCORE_PROSE = 0.8  # a name read in prose, not in a command: never as strong as `--model X`
_SCORE_DRAFT_NAME = 0.7  # the target named inside a draft's own name (`...-EAGLE3-<target>`)
_BONUS_SIGNATURE = 0.1
_BONUS_METHOD = 0.05
_AMBIGUITY_FACTOR = 0.6
_TIE_RESOLVED = 0.3  # a shared checkpoint's tie broken by evidence (it was halved by the tie)

_BIDI = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
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
_HF_ID_FULL = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_ARCH_TOKEN = re.compile(r"\b[A-Z][A-Za-z0-9_]{2,100}\b")
_PLAIN_WORD = re.compile(r"^[A-Z][a-z]+$")
# A plain word is an architecture only where code or a log writes it.
_CODE_BEFORE = re.compile(r"""(?:[`"'\[]|architectures?\W{0,4}|Model\s*=\s*)$""", re.I)
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
_MINOR_VERSION = re.compile(r"^([a-z]*\d+)\.\d+$")  # `3.2`, `v2.5`, `qwen3.5`
_SPLIT = re.compile(r"[-_ ]+")
_QUANT_TOKEN = re.compile(r"^(?:q\d(?:k)?|iq\d|w\d+a\d+|g\d+|int\d+|e4m3|mxfp\d|fp\d+|\d+bit)$")


@dataclass
class _Evidence:
    scores: dict[str, float] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    alternatives: list[str] = field(default_factory=list)
    served: set[str] = field(default_factory=set)  # archs the served model's name resolves to
    corroborated: set[str] = field(default_factory=set)  # archs a log or config names
    loose: set[str] = field(default_factory=set)  # matched by major version only
    # matched by major version only, but the family's class naming says the release loads it:
    # the score such a match gave (enough to propose a fix, never to call the class fixed)
    release_guess: dict[str, float] = field(default_factory=dict)
    # archs a name names surely: the tree's example checkpoint, a re-upload of it (same repo
    # name) or a variant of it (quantisation, date); others are inferred from a family's naming
    sure: set[str] = field(default_factory=set)
    from_config: set[str] = field(default_factory=set)  # archs a checkpoint's config.json lists

    def add(self, arch: str, score: float, reason: str) -> None:
        if score > self.scores.get(arch, 0.0):
            self.scores[arch] = score
        self.reasons.append(reason)

    def from_config_add(self, arch: str, score: float, reason: str) -> None:
        """A class a checkpoint's own config names: strong, and corroborated."""
        self.add(arch, score, reason)
        self.from_config.add(arch)
        self.corroborated.add(arch)

    def guess_of(self, arch: str) -> float:
        return self.release_guess.get(arch, -1.0)


def triage_issue(
    issue: dict[str, Any],
    tree_root: Path,
    catalogue: DraftCatalogue | None = None,
    *,
    lacking: frozenset[str] | None = None,
    scan: ScanContext | None = None,
    checkpoints: Hub | None = None,
    own_logins: frozenset[str] = frozenset(),
) -> Triage:
    """Read ``issue`` against the tree at ``tree_root``.

    ``own_logins``: the bot's own GitHub logins (the token's user, ``BOT_LOGIN``); their
    comments, and any carrying the bot's status marker, are not the reporter's and are not read.

    ``lacking``: the architectures the tree's scan reports without the interface (read from the
    tree when needed and not given); it decides whether a plan may cover a text class and a
    multimodal class that share a checkpoint. ``scan``: the tree's scan context, where the
    caller has made one (``pipeline.propose`` has); else it is built when first needed.
    ``checkpoints``: where the configs of the checkpoints the issue names are read (default:
    the Hub of ``HF_ENDPOINT``, honouring ``HF_HUB_OFFLINE``; its local cache when offline).
    """
    if not isinstance(issue, dict):
        raise BotError("an issue must be a JSON object (GitHub's REST issue shape)")
    catalogue = catalogue if catalogue is not None else load_catalogue()
    root = tree_root.resolve()
    tree = _Tree(root, scan)
    known = load_known_models(root)
    reasons: list[str] = []
    parts = _issue_parts(issue, reasons, own_logins)
    raw_text = "\n".join(parts)
    text = drop_noise(raw_text)
    title = text.split("\n", 1)[0] if isinstance(issue.get("title"), str) else ""

    signatures = _signatures(root)
    signature = match_signature(raw_text, signatures)
    if signature:
        reasons.append(
            f"the error `{signature.message_prefix}` matches the raise site {signature.location}"
        )

    method = _method(text, reasons)
    spec_spans = _spec_spans(text)
    issue_draft = _issue_draft(text, spec_spans, reasons)

    evidence = _Evidence()
    index = _NameIndex.build(known, catalogue)
    mentions, served = _target_mentions(text, spec_spans, catalogue)
    if issue_draft is None or not _HF_ID_FULL.match(issue_draft):
        named = _named_draft(text, spec_spans, catalogue, served, reasons)
        issue_draft = named or issue_draft
    configs = _read_configs(
        root, checkpoints, _checkpoint_ids(text, mentions, served, issue_draft), reasons
    )
    issue_draft = _config_evidence(configs, served, issue_draft, evidence, reasons)
    for mention in mentions:
        if mention in configs.decided:
            continue  # its own config said which class it is (or that it is a draft)
        before = dict(evidence.scores)
        _resolve_mention(mention, index, evidence)
        if mention in served:
            evidence.served.update(a for a, v in evidence.scores.items() if v != before.get(a))
    for name in _prose_names(text, spec_spans, mentions, catalogue):
        if name in configs.decided or _resolve_mention(
            name, index, evidence, quiet=True, score_cap=_SCORE_PROSE
        ):
            mentions.append(name)
    if not evidence.scores:
        for phrase in spaced_phrases(text):
            if _resolve_phrase(phrase, index, evidence):
                mentions.append(phrase)
    for arch in _named_archs(text, root):
        evidence.add(arch, _SCORE_ARCH_NAMED, f"the issue names the architecture `{arch}`")
        evidence.corroborated.add(arch)
        mentions.append(arch)
    for model_type, archs in _model_type_archs(text, root):
        evidence.corroborated.update(archs)
        for arch in archs:
            evidence.add(
                arch,
                _SCORE_MODEL_TYPE / len(archs),
                f"the error's model_type `{model_type}` is the one of {arch} in the tree",
            )
    if issue_draft and not configs.names_target(issue_draft):
        _draft_evidence(issue_draft, catalogue, index, evidence)
    reasons.extend(evidence.reasons)
    _drop_drafts(root, evidence, reasons)
    _merge_aliases(root, evidence, reasons)
    _prefer_served(evidence, reasons)
    _drop_fixed_candidates(tree, evidence, reasons)

    architecture, confidence, alternatives = _decide(evidence)
    architectures: tuple[str, ...] = (architecture,) if architecture else ()
    modality_question = None
    if architecture and alternatives:
        decided = _modality_decision(
            tree, text, architecture, alternatives, evidence, catalogue, mentions, lacking, reasons
        )
        if decided is not None:
            architectures, confidence, modality_question = decided
            architecture = architectures[0] if architectures else architecture
            if modality_question is None:
                alternatives = []
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

    ours = _ours(issue, title, raw_text, signature, reasons)
    confident = confidence >= THRESHOLD
    candidates = [*architectures, *alternatives]
    broken = _broken_claims(tree, candidates, reasons) if ours else {}
    # "Already fixed" is said only of the class the checkpoint surely loads, and only when its
    # claim holds; a class matched loosely, or whose claim the tree shows broken, is asked about.
    # A release the tree does not list, matched through its family's class naming, is enough
    # to propose a fix for a class that lacks the interface, never to call the issue fixed.
    guessed = [a for a in candidates if evidence.scores.get(a, 0.0) <= evidence.guess_of(a)]
    surely = (confident and not guessed) or not (evidence.loose & set(candidates))
    fixed = _already_fixed(tree, candidates, reasons) if ours and surely and not broken else False
    if ours and confident and guessed and _already_fixed(tree, guessed, []):
        reasons.append(
            f"{', '.join(guessed)} already has the interface, but the release named is not one "
            "the tree lists: asked, not called fixed"
        )
        confident, confidence = False, round(confidence * _AMBIGUITY_FACTOR, 3)
    checkpoint_question = None
    if ours and architecture and not broken and not modality_question:
        checkpoint_question = _checkpoint_doubt(
            tree, text, architecture, candidates, evidence, configs, fixed, reasons
        )
        if checkpoint_question:
            fixed, confident = False, False
            confidence = round(min(confidence, THRESHOLD) * _AMBIGUITY_FACTOR, 3)
    outcome = _outcome(issue, ours and not fixed, confident and not broken, reasons)
    missing: tuple[str, ...] = ()
    if outcome == ASK:
        missing = (
            modality_question
            or checkpoint_question
            or _claim_question(broken)
            or _question(architecture, alternatives, mentions, signature, method, signatures),
        )
    return Triage(
        architecture=architecture,
        method=method,
        model_mentions=tuple(dict.fromkeys(mentions)),
        draft=draft,
        confidence=confidence,
        reasons=tuple(reasons),
        signature=signature.to_dict() if signature else None,
        missing=missing,
        crash_site=signature.location if signature else None,
        alternatives=tuple(alternatives),
        outcome=outcome,
        architectures=architectures,
    )


def _ours(
    issue: dict[str, Any],
    title: str,
    text: str,
    signature: ErrorSignature | None,
    reasons: list[str],
) -> bool:
    """The issue is the bot's business only for a reason: the tree's error, the interface named
    in a traceback, or an explicit request for EAGLE-3/DFlash/DSpark."""
    if signature is not None:
        return True
    interface = INTERFACE_WORDS.search(text)
    if interface:
        reasons.append(f"the issue names the interface `{interface.group(0)}`")
        return True
    request = method_request(title, text)
    if request:
        reasons.append(f'the issue asks for {request.method}: "{_quote(request.sentence)}"')
        return True
    reasons.append(
        "not ours: no error of the tree's EAGLE-3 signatures and no request for "
        "EAGLE-3/DFlash/DSpark support on a model"
    )
    return False


def _already_fixed(tree: _Tree, archs: list[str], reasons: list[str]) -> bool:
    """True when every candidate class has the interface on every platform variant; a class
    fixed on one platform only has its missing variants recorded as the finding."""
    if not archs:
        return False
    try:
        ctx = tree.context()
    except BotError:
        return False
    from bot.recipes.interface_status import already_fixed, missing_variants

    notes = [already_fixed(ctx, arch) for arch in archs]
    for arch in archs:
        lacking = missing_variants(ctx, arch)
        if lacking:
            sites = ", ".join(v.site for v in lacking)
            reasons.append(f"{arch} has the interface on some platforms but not in {sites}")
    if all(notes):
        reasons.extend(f"not ours: {note}" for note in notes if note)
        return True
    return False


def _drop_fixed_candidates(tree: _Tree, evidence: _Evidence, reasons: list[str]) -> None:
    """Of several candidate classes, those with the interface on every platform are not what
    the issue is about when others lack it: users name working models for contrast, and a
    class that has the interface cannot raise the missing-interface error."""
    if len(evidence.scores) < 2:
        return
    try:
        ctx = tree.context()
    except BotError:
        return
    from bot.recipes.interface_status import already_fixed

    fixed = [arch for arch in evidence.scores if already_fixed(ctx, arch)]
    if fixed and len(fixed) < len(evidence.scores):
        for arch in fixed:
            del evidence.scores[arch]
        reasons.append(f"set aside, they already have the interface: {', '.join(fixed)}")


def _drop_drafts(root: Path, evidence: _Evidence, reasons: list[str]) -> None:
    """A speculative-decoding draft or MTP head is never the class to fix: it is what the
    user attaches to the target, not the target."""
    try:
        drafts = draft_archs(root)
    except BotError:
        return
    dropped = [arch for arch in evidence.scores if arch in drafts]
    for arch in dropped:
        del evidence.scores[arch]
        evidence.served.discard(arch)
    if dropped:
        reasons.append(f"set aside, the tree registers them as drafts: {', '.join(dropped)}")


def _merge_aliases(root: Path, evidence: _Evidence, reasons: list[str]) -> None:
    """Registry keys that load the same class (`ExaoneMoeForCausalLM`, `ExaoneMoEForCausalLM`)
    are one candidate, not a tie."""
    if len(evidence.scores) < 2:
        return
    try:
        loads = _loaded_class(root)
    except BotError:
        return
    kept: dict[tuple[str, str], str] = {}
    for arch in sorted(evidence.scores, key=lambda a: -evidence.scores[a]):
        key = loads.get(arch)
        if key is None:
            continue
        if key in kept:  # the evidence was shared between the names: it is the class's
            evidence.scores[kept[key]] += evidence.scores.pop(arch)
            reasons.append(f"{arch} is another registry name of {kept[key]}'s class {key[1]}")
        else:
            kept[key] = arch


@lru_cache(maxsize=8)
def _loaded_class(tree_root: Path) -> dict[str, tuple[str, str]]:
    from bot.tree.model_registry import load_model_registry

    return {
        e.arch: (e.module, e.class_name)
        for e in load_model_registry(tree_root).entries
        if e.category in GENERATION_CATEGORIES
    }


def _prefer_served(evidence: _Evidence, reasons: list[str]) -> None:
    """The model the command serves is the one that failed: models named only in prose
    (contrasts, earlier attempts, plans) do not compete with it."""
    if not evidence.served:
        return
    prose_only = [arch for arch in evidence.scores if arch not in evidence.served]
    prose_only = [a for a in prose_only if a not in evidence.corroborated]
    if prose_only and len(prose_only) < len(evidence.scores):
        for arch in prose_only:
            del evidence.scores[arch]
        reasons.append(f"set aside, named only outside the serve command: {', '.join(prose_only)}")


def _broken_claims(tree: _Tree, archs: list[str], reasons: list[str]) -> dict[str, str]:
    """Candidates that declare the interface but that the tree shows would fail when used."""
    if not archs:
        return {}
    try:
        ctx = tree.context()
    except BotError:
        return {}
    from bot.recipes.interface_status import already_fixed

    found = {}
    for arch in archs:
        if already_fixed(ctx, arch):
            why = broken_claim(ctx, arch)
            if why:
                found[arch] = why
                reasons.append(f"{arch} declares SupportsEagle3 but would fail: {why}")
    return found


def _claim_question(broken: dict[str, str]) -> str | None:
    if not broken:
        return None
    arch = next(iter(broken))
    return (
        f"`{arch}` declares SupportsEagle3, but vLLM's tree shows it would fail when used. "
        f"Is `{arch}` the `architectures` entry of your model's config.json, and does your "
        "traceback end in `set_aux_hidden_state_layers` (please paste its last lines)?"
    )


@dataclass
class _Tree:
    """The tree triage reads: its root, and its scan context: the caller's, or (for a caller
    with only a path) built when first asked, once per tree."""

    root: Path
    scan: ScanContext | None = None

    def context(self) -> ScanContext:
        if self.scan is None:
            self.scan = _scan_context(self.root)
        return self.scan


@lru_cache(maxsize=4)
def _scan_context(root: Path) -> ScanContext:
    from bot.scan.findings import scan_context

    return scan_context(root)


def _quote(sentence: str) -> str:
    """A sentence of the issue, reduced to name characters and spaces for the reasons."""
    return re.sub(r"[^A-Za-z0-9_./:~ -]+", " ", sentence).strip()[:120]


def _is_closed(issue: dict[str, Any]) -> bool:
    """GitHub's ``state``; when the issue's timeline events are given (``events``, the REST
    ``/issues/N/events`` list), the latest ``closed``/``reopened`` event decides."""
    events = issue.get("events")
    if isinstance(events, list):
        kinds = [
            e.get("event")
            for e in events
            if isinstance(e, dict) and e.get("event") in ("closed", "reopened")
        ]
        if kinds:
            return kinds[-1] == "closed"
    return issue.get("state") == "closed"


def _outcome(issue: dict[str, Any], ours: bool, confident: bool, reasons: list[str]) -> str:
    if _is_closed(issue):
        reasons.append("the issue is closed: skipped (reopen it to triage again)")
        return SILENT
    if issue.get("state_reason") == "reopened":
        reasons.append("the issue was reopened")
    if not ours:
        return SILENT
    return PROPOSE if confident else ASK


# --- reading the issue ----------------------------------------------------------------------------


def clean_text(text: str) -> tuple[str, bool]:
    """Cap, drop HTML comments, strip bidi controls. Returns (text, was_truncated)."""
    truncated = len(text) > MAX_PART_CHARS
    text = text[:MAX_PART_CHARS]
    text = _HTML_COMMENT.sub(" ", text)
    return _BIDI.sub("", text), truncated


def _reporters_comments(
    comments: list[Any], own_logins: frozenset[str], reasons: list[str]
) -> list[Any]:
    """The thread without the bot's own comments: its sticky status comment (by its marker,
    whoever's token wrote it) and anything the token's login wrote. A rerun reads what people
    said, never the bot's own question or status as if the reporter had written it."""
    logins = {login.lower() for login in own_logins}
    kept, skipped = [], 0
    for comment in comments:
        if isinstance(comment, dict):
            body = comment.get("body")
            user = comment.get("user")
            login = user.get("login") if isinstance(user, dict) else None
            if (isinstance(body, str) and is_status_comment(body)) or (
                isinstance(login, str) and login.lower() in logins
            ):
                skipped += 1
                continue
        kept.append(comment)
    if skipped:
        reasons.append(f"{skipped} of the bot's own comments were not read")
    return kept


def _issue_parts(
    issue: dict[str, Any], reasons: list[str], own_logins: frozenset[str] = frozenset()
) -> list[str]:
    raw: list[tuple[str, object]] = [("title", issue.get("title")), ("body", issue.get("body"))]
    comments = issue.get("comments_list") or []
    if not isinstance(comments, list):
        comments = []
    comments = _reporters_comments(comments, own_logins, reasons)
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
        value = normalise_method(match.group("method"))
        if value in METHODS:
            reasons.append(f"the speculative config sets method `{value}`")
            return value
    method = method_in_text(text)
    if method:
        reasons.append(f"the issue mentions {method}")
    return method


def _spec_spans(text: str) -> list[tuple[int, int]]:
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
    """``spans`` as ``_spec_spans`` gives them: sorted and not overlapping."""
    index = bisect.bisect_right(spans, (position, _NO_END)) - 1
    return index >= 0 and position < spans[index][1]


_NO_END = 1 << 62


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


# --- what the checkpoints say of themselves -------------------------------------------------------

_SCORE_CONFIG = 0.95  # the checkpoint's own config.json lists the class
_SCORE_CONFIG_DRAFT = 0.9  # a draft's config (its verifier) or card (its base model) names it
# A repository named as a draft: `org/X-EAGLE3`, `org/X-DFlash-b16`, `org/X-speculator.eagle3`.
_DRAFT_NAME = re.compile(
    r"(?i)(?:^|[-_.])(?:eagle\d?|dflash\d*|dspark\d*|speculators?|draft(?:er)?|medusa)(?=$|[-_.\d])"
)


@dataclass(frozen=True)
class _Configs:
    """The checkpoints whose config.json triage asked for, and what they said."""

    read: tuple[Checkpoint, ...] = ()
    decided: frozenset[str] = frozenset()  # repo ids whose config says which class, or "a draft"
    unread_ids: tuple[str, ...] = ()  # repo ids whose config could not be read

    def names_target(self, repo_id: str) -> bool:
        """True when ``repo_id``'s config (or, for a draft, its verifier or card) names a class."""
        return any(c.repo_id == repo_id and c.archs for c in self.read)


def _named_draft(
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


def _checkpoint_ids(
    text: str, mentions: list[str], served: set[str], draft: str | None
) -> list[str]:
    """The repositories whose config.json may say which class the issue is about: the served
    model first, then the draft, the Hub links and the other `org/name` mentions."""
    ordered = [
        *(m for m in mentions if m in served),
        *([draft] if draft else []),
        *hub_links(text),
        *mentions,
    ]
    ids = [name for name in dict.fromkeys(ordered) if repo_id_like(name)]
    return ids[:MAX_CHECKPOINTS]


def _read_configs(root: Path, hub: Hub | None, ids: list[str], reasons: list[str]) -> _Configs:
    """Each repository's config.json, through the Hub or its local cache; without either, the
    class is inferred from names, and the reasons say so."""
    if not ids:
        return _Configs()
    hub = hub or Hub()
    offline = hub.unreachable_because()
    try:
        generation, drafts = _generation_archs(root), draft_archs(root)
    except BotError:
        return _Configs()
    found = tuple(read_checkpoint(hub, repo_id, generation, drafts) for repo_id in ids)
    decided, unread = [], []
    for checkpoint in found:
        if checkpoint.draft or checkpoint.archs or checkpoint.unregistered:
            decided.append(checkpoint.repo_id)
        elif not checkpoint.read:
            unread.append(checkpoint.repo_id)
            if offline is None:
                reasons.append(
                    f"`{checkpoint.repo_id}`'s config.json could not be read from the Hub "
                    f"({checkpoint.why}): its class is inferred from its name"
                )
    if offline is not None and unread:
        reasons.append(
            f"the Hugging Face Hub at {hub.shown} cannot be reached ({offline}): the class is "
            "inferred from the names the issue gives, not read from the checkpoint's config.json"
        )
    return _Configs(found, frozenset(decided), tuple(unread))


def _config_evidence(
    configs: _Configs,
    served: set[str],
    draft: str | None,
    evidence: _Evidence,
    reasons: list[str],
) -> str | None:
    """Add what each config says; returns the issue's draft (one a config shows to be a draft,
    when the issue gave none)."""
    for checkpoint in configs.read:
        if checkpoint.draft:
            if draft is None:
                draft = checkpoint.repo_id
                reasons.append(f"`{draft}` is a draft: its config.json says so")
            if checkpoint.archs:
                why = f"the draft `{checkpoint.repo_id}` targets {checkpoint.archs[0]} "
                why += f"({checkpoint.via}, read from {checkpoint.source})"
                evidence.from_config_add(checkpoint.archs[0], _SCORE_CONFIG_DRAFT, why)
            continue
        if checkpoint.archs:  # vLLM loads the first architecture it supports
            arch = checkpoint.archs[0]
            why = f"`{checkpoint.repo_id}`'s config.json lists architectures `{arch}` (read "
            why += f"from {checkpoint.source}): the class vLLM loads for it"
            evidence.from_config_add(arch, _SCORE_CONFIG, why)
            if checkpoint.repo_id in served:
                evidence.served.add(arch)
        elif checkpoint.unregistered:
            names = ", ".join(f"`{a}`" for a in checkpoint.unregistered[:3])
            reasons.append(
                f"`{checkpoint.repo_id}`'s config.json lists {names}, which this vLLM tree does "
                "not register: no class of the tree to fix for it"
            )
    return draft


def _checkpoint_doubt(
    tree: _Tree,
    text: str,
    architecture: str,
    candidates: list[str],
    evidence: _Evidence,
    configs: _Configs,
    fixed: bool,
    reasons: list[str],
) -> str | None:
    """The question to ask when only a checkpoint's config could say which class it loads: the
    class is inferred from a family's naming (not the tree's example, not a log, not a config)
    and either it already has the interface (so the issue would be called fixed on a guess), or
    the family has a class of the other modality whose interface status differs."""
    if evidence.from_config & set(candidates):
        return None
    unsure = [a for a in candidates if a not in evidence.sure | evidence.corroborated]
    if architecture not in unsure:
        return None
    where = (
        f"`{configs.unread_ids[0]}`'s config.json"
        if configs.unread_ids
        else "your model's config.json"
    )
    if fixed and configs.unread_ids:
        reasons.append(
            f"{architecture} already has the interface, but that class is inferred from a name "
            "whose config.json could not be read: asked, not called fixed"
        )
        return (
            f"Which class does {where} list under `architectures`? Its name suggests "
            f"`{architecture}`, which already declares SupportsEagle3 in this vLLM tree (if it "
            "is that class, upgrading vLLM fixes the error)."
        )
    sibling = _modality_sibling(tree, architecture, candidates)
    images, text_only = modality_words(text)
    multimodal = _is_multimodal(architecture, _categories(tree.root))
    if sibling is None or (images and not text_only and multimodal):
        return None
    if text_only and not images and not multimodal:  # the words say the class's own modality
        return None
    reasons.append(
        f"{architecture} is inferred from a name, and {sibling} (the same family, the other "
        "modality) differs in whether it has the interface: only the checkpoint's config says which"
    )
    return (
        f"Does {where} list `{architecture}` or `{sibling}` under `architectures`? The name does "
        "not say, and only one of them lacks the EAGLE-3 interface in this vLLM tree."
    )


def _modality_sibling(tree: _Tree, architecture: str, candidates: list[str]) -> str | None:
    """A registered class of ``architecture``'s family (the same name before ``For...``) of the
    other modality whose interface status differs from ``architecture``'s."""
    try:
        ctx = tree.context()
        categories = _categories(tree.root)
    except BotError:
        return None
    from bot.recipes.interface_status import already_fixed

    family = class_family(architecture)
    multimodal = _is_multimodal(architecture, categories)
    has_it = bool(already_fixed(ctx, architecture))
    for other in sorted(categories):
        if other in candidates or class_family(other) != family:
            continue
        if (
            _is_multimodal(other, categories) != multimodal
            and bool(already_fixed(ctx, other)) != has_it
        ):
            return other
    return None


# --- mapping names to architectures ---------------------------------------------------------------


def _target_mentions(
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


def _prose_names(
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


@dataclass(frozen=True)
class _NameIndex:
    exact: dict[str, list[str]]  # lower-cased repo id -> archs
    by_repo_name: dict[str, list[tuple[str, str]]]  # lower-cased repo name -> [(id, arch)]
    by_core: dict[str, list[tuple[str, str]]]  # squashed core name -> [(id, arch)]
    by_family: dict[str, list[tuple[str, str]]]  # squashed family name -> [(id, arch)]
    by_major: dict[str, list[tuple[str, str]]]  # squashed family, minor version dropped
    by_major_words: dict[str, list[tuple[str, str]]]  # the same, its words in sorted order
    archs: frozenset[str] = frozenset()  # every architecture the index knows

    @classmethod
    def build(cls, known: KnownModels, catalogue: DraftCatalogue) -> _NameIndex:
        return _build_index(known, catalogue)


# Keyed by the tree's (cached, long-lived) KnownModels and the catalogue's content: callers
# load a fresh but equal catalogue per issue.
_INDEX_CACHE: dict[tuple[int, DraftCatalogue], _NameIndex] = {}


def _build_index(known: KnownModels, catalogue: DraftCatalogue) -> _NameIndex:
    key = (id(known), catalogue)
    if key in _INDEX_CACHE:
        return _INDEX_CACHE[key]
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
    by_major: dict[str, list[tuple[str, str]]] = {}
    by_major_words: dict[str, list[tuple[str, str]]] = {}
    for hf_id, arch in dict.fromkeys(pairs):
        _append(exact, hf_id.lower(), arch)
        repo_name = hf_id.rsplit("/", 1)[-1]
        _append(by_repo_name, repo_name.lower(), (hf_id, arch))
        _append(by_core, squash(core_name(repo_name)), (hf_id, arch))
        _append(by_family, squash(family_name(repo_name)), (hf_id, arch))
        _append(by_major, squash(major_family(repo_name)), (hf_id, arch))
        _append(by_major_words, major_words(repo_name), (hf_id, arch))
    archs = frozenset(arch for _, arch in pairs) | frozenset(known.generation_archs())
    index = _NameIndex(exact, by_repo_name, by_core, by_family, by_major, by_major_words, archs)
    if len(_INDEX_CACHE) > 8:
        _INDEX_CACHE.clear()
    _INDEX_CACHE[key] = index
    return index


def _append(mapping: dict[str, list[Any]], key: str, value: Any) -> None:
    if key:
        bucket = mapping.setdefault(key, [])
        if value not in bucket:
            bucket.append(value)


def core_name(name: str) -> str:
    """``Qwen3-Next-80B-A3B-Instruct-FP8`` -> ``qwen3-next-80b-a3b``: variant tokens dropped
    (quantisation, fine-tune variant, release date), wherever they stand after the first.
    Versions are written one way: ``3_5``, ``3p5`` and ``3-5`` are ``3.5``."""
    tokens = [t for t in _SPLIT.split(dotted_versions(name.rsplit("/", 1)[-1].lower())) if t]
    if len(tokens) > 1 and tokens[0] == "meta":  # Meta-Llama-3.1-8B is Llama-3.1-8B
        tokens.pop(0)
    kept = tokens[:1] + [t for t in tokens[1:] if not _is_variant(t)]
    return "-".join(kept)


# `InternVL3_5`, `MiniCPM-V-4_5`, `Llama-3_3`, `step3p5`, `Qwen2-5-VL`: a minor version written
# with `_`, `p` or `-` between two digits (a size such as `3-8B` or `3-30B` is not one).
_GLUED_VERSION = re.compile(r"(?<=\d)[_p](?=\d)")
_DASHED_VERSION = re.compile(r"(?<![\d.])(\d{1,2})-(\d)(?=$|[-_ /])")


def dotted_versions(name: str) -> str:
    return _DASHED_VERSION.sub(r"\1.\2", _GLUED_VERSION.sub(".", name))


def _is_variant(token: str) -> bool:
    return token in _VARIANT_TOKENS or bool(_DATE_TOKEN.match(token) or _QUANT_TOKEN.match(token))


def family_name(name: str) -> str:
    """``core_name`` without sizes: ``mistral-small-3.2-24b`` -> ``mistral-small-3.2``. The
    version stays: `3.5` and `V2.5` are other models than `3` and `V2`."""
    return "-".join(t for t in core_name(name).split("-") if not _SIZE_TOKEN.match(t))


def major_family(name: str) -> str:
    """``family_name`` with minor versions dropped (``mistral-small-3``): Llama 3 and 3.1 share
    an architecture, so this names candidates, never a class whose version differs alone."""
    return "-".join(_MINOR_VERSION.sub(r"\1", t) for t in family_name(name).split("-"))


def major_words(name: str) -> str:
    """``major_family``'s words in sorted order: `AI21-Jamba-Mini-1.7` and `AI21-Jamba-1.5-Mini`
    are one family written in two orders. Empty for a one-word name (``squash`` covers it)."""
    words = [w for w in major_family(name).split("-") if w]
    return "-".join(sorted(words)) if len(words) > 1 else ""


def squash(name: str) -> str:
    """Separators dropped, so `GLM5.3-Flash` and `GLM-5.3-Flash`, `Qwen3 Next` and
    `Qwen3-Next` are one name; a minor version glued to a word (`glm5.3`) is kept."""
    return re.sub(r"[-_ ]+", "", name.lower())


def _resolve_mention(
    name: str,
    index: _NameIndex,
    evidence: _Evidence,
    *,
    quiet: bool = False,
    score_cap: float = 1.0,
    how: str | None = None,
) -> bool:
    """Add the architectures ``name`` stands for to ``evidence``; False when it names none.

    ``quiet``: a name read in prose, most of which are not models; no reason when unresolved.
    """
    is_path = name.startswith(("/", "./", "~")) or name.count("/") > 1
    is_id = bool(_HF_ID_FULL.match(name)) and not is_path
    if is_id and name.lower() in index.exact:
        archs = index.exact[name.lower()]
        evidence.sure.update(archs)
        for arch in archs:
            evidence.add(
                arch,
                min(_SCORE_EXACT_ID, score_cap) / len(archs),
                f"`{name}` is an example model of {arch} in the vLLM tree",
            )
        return True
    base = name.rstrip("/").rsplit("/", 1)[-1]
    how = how or (f"`{name}` (model name `{base}`)" if base != name else f"`{name}`")
    if not base or len(base) < 3:
        return False
    core = core_name(base)
    lookups = (
        (index.by_repo_name, base.lower(), _SCORE_EXACT_ID, "has the same name as"),
        (index.by_core, squash(core), _SCORE_CORE_NAME, _BY_CORE),
        (index.by_family, squash(family_name(base)), _SCORE_VERSION_FAMILY, _BY_FAMILY),
        *_prefix_lookups(core, index),
        (index.by_major, squash(major_family(base)), _SCORE_FAMILY, _BY_MAJOR),
        (index.by_major_words, major_words(base), _SCORE_FAMILY, _BY_MAJOR_WORDS),
    )
    for table, key, score, label in lookups:
        matches = table.get(key) if key else None
        if matches:
            archs = list(dict.fromkeys(arch for _, arch in matches))
            loose = label in (_BY_MAJOR, _BY_MAJOR_WORDS)
            if (table is index.by_family or loose) and _ACTIVE_PARAMS.search(base):
                moe = _mixture_of_experts(archs, index.archs)
                if moe:  # the family and the MoE naming together name one class
                    archs, score, label, loose = moe, _SCORE_CORE_NAME, _BY_FAMILY_MOE, False
            examples = ", ".join(f"{hf_id} ({arch})" for hf_id, arch in matches[:4])
            reason = f"{how} {label} {examples}"
            guess = loose and loads_family_class(family_name(base), archs, index.archs)
            if guess:
                score = _SCORE_VERSION_FAMILY
                reason += f"; {_BY_RELEASE} {', '.join(archs)}"
            if table is index.by_repo_name or (table is index.by_core and label == _BY_CORE):
                evidence.sure.update(archs)
            for arch in archs:
                evidence.add(arch, min(score, score_cap) / len(archs), reason)
                if guess:
                    evidence.release_guess[arch] = min(score, score_cap) / len(archs)
            if loose:
                evidence.loose.update(archs)
            return True
    if not quiet:
        evidence.reasons.append(
            f"{how} matches no model the vLLM tree or the draft catalogue knows"
        )
    return False


def _prefix_lookups(
    core: str, index: _NameIndex
) -> list[tuple[dict[str, list[tuple[str, str]]], str, float, str]]:
    """A known name with words added (`GLM-4.5-Air` is a `GLM-4.5`): the longest known name
    the user's starts with, version included (at least two words, one with a digit)."""
    tokens = core.split("-")
    for size in range(len(tokens) - 1, 1, -1):
        prefix = "-".join(tokens[:size])
        if any(ch.isdigit() for ch in prefix) and squash(prefix) in index.by_core:
            return [(index.by_core, squash(prefix), _SCORE_PREFIX, _BY_PREFIX)]
    return []


def _resolve_phrase(phrase: str, index: _NameIndex, evidence: _Evidence) -> bool:
    """A name written as words resolves only when it is exactly a known model's name."""
    key = squash(core_name(phrase))
    matches = index.by_core.get(key) if len(key) >= 5 else None
    if not matches:
        return False
    archs = list(dict.fromkeys(arch for _, arch in matches))
    examples = ", ".join(f"{hf_id} ({arch})" for hf_id, arch in matches[:4])
    for arch in archs:
        evidence.add(arch, _SCORE_CORE_NAME / len(archs), f"the words `{phrase}` name {examples}")
    return True


# `57B-A14B`, `30B-A3B`: total and active parameters, how mixture-of-experts checkpoints are named.
_ACTIVE_PARAMS = re.compile(r"(?i)(?:^|[-_])\d+(?:\.\d+)?B[-_]A\d+(?:\.\d+)?B(?:$|[-_])")


def _mixture_of_experts(archs: list[str], known: frozenset[str]) -> list[str]:
    """A family matched only by dense classes, for a name with active parameters: the
    family's MoE class (`Qwen2ForCausalLM` -> `Qwen2MoeForCausalLM`) when the tree has one."""
    if any("moe" in arch.lower() for arch in archs):
        return [arch for arch in archs if "moe" in arch.lower()]
    found = []
    for arch in archs:
        head, sep, tail = arch.partition("For")
        for candidate in (f"{head}Moe{sep}{tail}", f"{head}MoE{sep}{tail}"):
            if sep and candidate in known:
                found.append(candidate)
    return found


# Words a draft's name adds to its target's: `yuhuili/EAGLE3-LLaMA3.1-Instruct-8B`,
# `org/Qwen3-30B-A3B-speculator.eagle3`, `lmsys/SGLang-EAGLE3-Llama-4-Scout-17B-16E-Instruct-v1`.
_DRAFT_WORDS = re.compile(
    r"(?i)(?:^|[-_.])(?:eagle3?|dflash\d*|dspark\d*|speculators?|draft(?:er)?|mtp|sglang|"
    r"vllm|spec|head|v\d+)(?=$|[-_.])"
)


def _draft_evidence(
    draft: str, catalogue: DraftCatalogue, index: _NameIndex, evidence: _Evidence
) -> None:
    entry = catalogue.find(draft)
    if entry and entry.target_arch:
        evidence.add(
            entry.target_arch,
            _SCORE_DRAFT_TARGET,
            f"the draft `{draft}` targets {entry.target_arch} ({entry.source})",
        )
        return
    base = draft.rstrip("/").rsplit("/", 1)[-1]
    target = _DRAFT_WORDS.sub("-", base).strip("-_.")
    if target and target.lower() != base.lower():
        _resolve_mention(
            target,
            index,
            evidence,
            quiet=True,
            score_cap=_SCORE_DRAFT_NAME,
            how=f"the draft's name `{base}` (target `{target}`)",
        )


@lru_cache(maxsize=8)
def _model_type_table(tree_root: Path) -> dict[str, tuple[str, ...]]:
    """model_type -> generation architectures: the registry module named after it
    (``qwen3_next`` -> vllm...models.qwen3_next), else the architecture named after it."""
    from bot.tree.model_registry import load_model_registry

    registry = load_model_registry(tree_root)
    table: dict[str, list[str]] = {}
    for entry in registry.entries:
        if entry.category not in GENERATION_CATEGORIES:
            continue
        module = entry.module.rsplit(".", 1)[-1]
        if module in PLATFORM_PACKAGES:
            module = entry.module.rsplit(".", 2)[-2]
        _append(table, module.lower(), entry.arch)
    return {key: tuple(archs) for key, archs in table.items()}


PLATFORM_PACKAGES = frozenset({"nvidia", "amd", "common", "model"})


def _model_type_archs(text: str, tree_root: Path) -> list[tuple[str, tuple[str, ...]]]:
    found = []
    try:
        table = _model_type_table(tree_root)
        archs_known = _generation_archs(tree_root)
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


def _named_archs(text: str, tree_root: Path) -> list[str]:
    """Architectures the text names: a registry key, or the class vLLM loads for one."""
    try:
        archs = _generation_archs(tree_root)
        classes = _class_archs(tree_root)
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


@lru_cache(maxsize=8)
def _class_archs(tree_root: Path) -> dict[str, tuple[str, ...]]:
    from bot.tree.model_registry import load_model_registry

    table: dict[str, list[str]] = {}
    for entry in load_model_registry(tree_root).entries:
        if entry.category in GENERATION_CATEGORIES:
            _append(table, entry.class_name, entry.arch)
    return {name: tuple(archs) for name, archs in table.items()}


@lru_cache(maxsize=8)
def _categories(tree_root: Path) -> dict[str, str]:
    from bot.tree.model_registry import load_model_registry

    return {
        e.arch: e.category
        for e in load_model_registry(tree_root).entries
        if e.category in GENERATION_CATEGORIES
    }


def _without_interface(tree: _Tree, archs: list[str]) -> frozenset[str]:
    """Those of ``archs`` that lack the interface on at least one platform variant."""
    from bot.recipes.interface_status import already_fixed

    try:
        ctx = tree.context()
    except BotError:
        return frozenset()
    return frozenset(a for a in archs if not already_fixed(ctx, a))


def _decide(evidence: _Evidence) -> tuple[str | None, float, list[str]]:
    if not evidence.scores:
        return None, 0.0, []
    ranked = sorted(evidence.scores.items(), key=lambda item: -item[1])
    best, score = ranked[0]
    rivals = [arch for arch, other in ranked[1:] if other >= score - 0.15]
    if rivals:
        score *= _AMBIGUITY_FACTOR
    return best, score, rivals


def _modality_decision(
    tree: _Tree,
    text: str,
    best: str,
    rivals: list[str],
    evidence: _Evidence,
    catalogue: DraftCatalogue,
    mentions: list[str],
    lacking: frozenset[str] | None,
    reasons: list[str],
) -> tuple[tuple[str, ...], float, str | None] | None:
    """A text class and a multimodal class tied on one checkpoint (Gemma 4, Llama 4, ...):
    decided by evidence, else both when both lack the interface, else one precise question.

    Returns (architectures, confidence, question) or None when the tie is not of that kind.
    """
    categories = _categories(tree.root)
    tied = [best, *rivals]
    kinds = [_is_multimodal(a, categories) for a in tied]
    if len(tied) != 2 or sorted(kinds) != [False, True]:
        return None
    if evidence.loose & set(tied):  # two releases of a family (`3.5`, `3.7`), not one checkpoint
        return None
    mm_arch, text_arch = (tied[0], tied[1]) if kinds[0] else (tied[1], tied[0])
    score = max(evidence.scores[a] for a in tied)
    images, text_only = modality_words(text)
    checkpoint = [catalogue.target_arch_of(m) for m in mentions if "/" in m]
    known_as = {a for a in checkpoint if a in tied}
    if len(known_as) == 1:
        chosen = known_as.pop()
        reasons.append(f"the checkpoint's architecture is {chosen} (draft catalogue)")
        return (chosen,), score + _TIE_RESOLVED, None
    if images and not text_only:
        words = ", ".join(images[:3])
        reasons.append(f"the issue is about multimodal input ({words}): {mm_arch}")
        return (mm_arch,), score + _TIE_RESOLVED, None
    if text_only and not images:
        reasons.append(f"the issue serves text only ({', '.join(text_only[:2])}): {text_arch}")
        return (text_arch,), score + _TIE_RESOLVED, None
    if lacking is None:
        lacking = _without_interface(tree, tied)
    if text_arch in lacking and mm_arch in lacking:
        reasons.append(
            f"{text_arch} and {mm_arch} share the checkpoint and both lack the interface: "
            "the plan covers both"
        )
        return (mm_arch, text_arch), score + _TIE_RESOLVED, None
    question = (
        f"Do you serve the model with image/audio/video inputs (`{mm_arch}`) or text only "
        f"(`{text_arch}`, e.g. `--language-model-only`)? Both load this checkpoint."
    )
    reasons.append(
        f"{text_arch} and {mm_arch} share the checkpoint and the issue does not say which"
    )
    return (best,), score * _AMBIGUITY_FACTOR, question


def _is_multimodal(arch: str, categories: dict[str, str]) -> bool:
    """The registry's multimodal section, or (registries file some under text generation) the
    name vLLM gives classes that take non-text inputs."""
    if categories.get(arch) == "multimodal":
        return True
    return arch.endswith("ForConditionalGeneration") or "VL" in arch


def _question(
    architecture: str | None,
    alternatives: list[str],
    mentions: list[str],
    signature: ErrorSignature | None,
    method: str | None,
    signatures: list[ErrorSignature],
) -> str:
    """The one question that names what is missing (asked once: the comment is sticky)."""
    if architecture is None and mentions:
        names = ", ".join(f"`{m}`" for m in mentions[:3])
        return (
            f"We could not map {names} to a model vLLM knows: which model architecture "
            "(config.json `architectures`) does it use, and which Hugging Face model is it "
            "based on?"
        )
    if architecture is None:
        return (
            "Which model were you serving (the `--model` argument), and which model architecture "
            "(config.json `architectures`) does it use?"
        )
    if alternatives:
        options = ", ".join(f"`{a}`" for a in [architecture, *alternatives])
        return f"Which of {options} does your model's config.json `architectures` list?"
    return f"Can you confirm your model's config.json `architectures` is `{architecture}`?"
