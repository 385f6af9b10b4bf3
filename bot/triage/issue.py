"""Triage: a GitHub issue -> which architecture lacks ``SupportsEagle3``, and how sure we are.

Issue text is hostile input. It is only ever searched with bounded, linear regular expressions:
each part is capped at :data:`bot.triage.thread.MAX_PART_CHARS`, HTML comments (invisible to
readers) are dropped, bidi controls are stripped, and extracted names are limited to
``[A-Za-z0-9_./:-]``, so nothing taken from the issue can carry markup, shell syntax or template
code onwards.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.drafts import DraftCatalogue, load_catalogue
from bot.errors import BotError
from bot.hub import Hub
from bot.tree.known_models import load_known_models
from bot.tree.signatures import ErrorSignature, match_signature
from bot.triage.configs import Configs, checkpoint_ids, config_evidence, read_configs
from bot.triage.evidence import Evidence
from bot.triage.mentions import (
    model_type_archs,
    named_archs,
    named_draft,
    prose_names,
    speculative_draft,
    speculative_method,
    speculative_spans,
    target_mentions,
)
from bot.triage.names import HF_ID_FULL, NameIndex, draft_evidence, resolve_mention, resolve_phrase
from bot.triage.release import class_family
from bot.triage.text import (
    INTERFACE_WORDS,
    drop_noise,
    method_request,
    modality_words,
    spaced_phrases,
)
from bot.triage.thread import issue_parts
from bot.triage.tree import (
    Tree,
    broken_claim,
    draft_archs,
    loaded_class,
    tree_categories,
    tree_signatures,
    without_interface,
)
from bot.triage_outcome import ASK, PROPOSE, SILENT, THRESHOLD, Triage

if TYPE_CHECKING:
    from bot.recipes.base import ScanContext


# Evidence strengths for an architecture (before ambiguity and corroboration).
_SCORE_ARCH_NAMED = 0.95


_SCORE_MODEL_TYPE = 0.85


_SCORE_PROSE = 0.8  # a name read in prose, not in a command: never as strong as `--model X`


_BONUS_SIGNATURE = 0.1
_BONUS_METHOD = 0.05
_AMBIGUITY_FACTOR = 0.6
_TIE_RESOLVED = 0.3  # a shared checkpoint's tie broken by evidence (it was halved by the tie)


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
    tree = Tree(root, scan)
    known = load_known_models(root)
    reasons: list[str] = []
    parts = issue_parts(issue, reasons, own_logins)
    raw_text = "\n".join(parts)
    text = drop_noise(raw_text)
    title = text.split("\n", 1)[0] if isinstance(issue.get("title"), str) else ""

    signatures = tree_signatures(root)
    signature = match_signature(raw_text, signatures)
    if signature:
        reasons.append(
            f"the error `{signature.message_prefix}` matches the raise site {signature.location}"
        )

    method = speculative_method(text, reasons)
    spec_spans = speculative_spans(text)
    issue_draft = speculative_draft(text, spec_spans, reasons)

    evidence = Evidence()
    index = NameIndex.build(known, catalogue)
    mentions, served = target_mentions(text, spec_spans, catalogue)
    if issue_draft is None or not HF_ID_FULL.match(issue_draft):
        named = named_draft(text, spec_spans, catalogue, served, reasons)
        issue_draft = named or issue_draft
    configs = read_configs(
        root, checkpoints, checkpoint_ids(text, mentions, served, issue_draft), reasons
    )
    issue_draft = config_evidence(configs, served, issue_draft, evidence, reasons)
    for mention in mentions:
        if mention in configs.decided:
            continue  # its own config said which class it is (or that it is a draft)
        before = dict(evidence.scores)
        resolve_mention(mention, index, evidence)
        if mention in served:
            evidence.served.update(a for a, v in evidence.scores.items() if v != before.get(a))
    for name in prose_names(text, spec_spans, mentions, catalogue):
        if name in configs.decided or resolve_mention(
            name, index, evidence, quiet=True, score_cap=_SCORE_PROSE
        ):
            mentions.append(name)
    if not evidence.scores:
        for phrase in spaced_phrases(text):
            if resolve_phrase(phrase, index, evidence):
                mentions.append(phrase)
    for arch in named_archs(text, root):
        evidence.add(arch, _SCORE_ARCH_NAMED, f"the issue names the architecture `{arch}`")
        evidence.corroborated.add(arch)
        mentions.append(arch)
    for model_type, archs in model_type_archs(text, root):
        evidence.corroborated.update(archs)
        for arch in archs:
            evidence.add(
                arch,
                _SCORE_MODEL_TYPE / len(archs),
                f"the error's model_type `{model_type}` is the one of {arch} in the tree",
            )
    if issue_draft and not configs.names_target(issue_draft):
        draft_evidence(issue_draft, catalogue, index, evidence)
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

    draft = issue_draft if issue_draft and HF_ID_FULL.match(issue_draft) else None
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


def _already_fixed(tree: Tree, archs: list[str], reasons: list[str]) -> bool:
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


def _drop_fixed_candidates(tree: Tree, evidence: Evidence, reasons: list[str]) -> None:
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


def _drop_drafts(root: Path, evidence: Evidence, reasons: list[str]) -> None:
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


def _merge_aliases(root: Path, evidence: Evidence, reasons: list[str]) -> None:
    """Registry keys that load the same class (`ExaoneMoeForCausalLM`, `ExaoneMoEForCausalLM`)
    are one candidate, not a tie."""
    if len(evidence.scores) < 2:
        return
    try:
        loads = loaded_class(root)
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


def _prefer_served(evidence: Evidence, reasons: list[str]) -> None:
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


def _broken_claims(tree: Tree, archs: list[str], reasons: list[str]) -> dict[str, str]:
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


def _checkpoint_doubt(
    tree: Tree,
    text: str,
    architecture: str,
    candidates: list[str],
    evidence: Evidence,
    configs: Configs,
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
    multimodal = _is_multimodal(architecture, tree_categories(tree.root))
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


def _modality_sibling(tree: Tree, architecture: str, candidates: list[str]) -> str | None:
    """A registered class of ``architecture``'s family (the same name before ``For...``) of the
    other modality whose interface status differs from ``architecture``'s."""
    try:
        ctx = tree.context()
        categories = tree_categories(tree.root)
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


def _decide(evidence: Evidence) -> tuple[str | None, float, list[str]]:
    if not evidence.scores:
        return None, 0.0, []
    ranked = sorted(evidence.scores.items(), key=lambda item: -item[1])
    best, score = ranked[0]
    rivals = [arch for arch, other in ranked[1:] if other >= score - 0.15]
    if rivals:
        score *= _AMBIGUITY_FACTOR
    return best, score, rivals


def _modality_decision(
    tree: Tree,
    text: str,
    best: str,
    rivals: list[str],
    evidence: Evidence,
    catalogue: DraftCatalogue,
    mentions: list[str],
    lacking: frozenset[str] | None,
    reasons: list[str],
) -> tuple[tuple[str, ...], float, str | None] | None:
    """A text class and a multimodal class tied on one checkpoint (Gemma 4, Llama 4, ...):
    decided by evidence, else both when both lack the interface, else one precise question.

    Returns (architectures, confidence, question) or None when the tie is not of that kind.
    """
    categories = tree_categories(tree.root)
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
        lacking = without_interface(tree, tied)
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
