"""A model's name -> the tree's classes: the index of the names the tree and the draft
catalogue know, and how a name the issue uses resolves through it (exactly, without variant
suffixes, by family and version, by prefix)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.drafts import DraftCatalogue
from bot.tree.known_models import KnownModels
from bot.triage.evidence import Evidence
from bot.triage.release import loads_family_class
from bot.triage.tree import append_unique

# Evidence strengths of a name's match (before ambiguity and corroboration).
_SCORE_EXACT_ID = 0.9
_SCORE_DRAFT_TARGET = 0.75
_SCORE_CORE_NAME = 0.75
_SCORE_FAMILY = 0.5


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


_SCORE_DRAFT_NAME = 0.7  # the target named inside a draft's own name (`...-EAGLE3-<target>`)


HF_ID_FULL = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


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


@dataclass(frozen=True)
class NameIndex:
    exact: dict[str, list[str]]  # lower-cased repo id -> archs
    by_repo_name: dict[str, list[tuple[str, str]]]  # lower-cased repo name -> [(id, arch)]
    by_core: dict[str, list[tuple[str, str]]]  # squashed core name -> [(id, arch)]
    by_family: dict[str, list[tuple[str, str]]]  # squashed family name -> [(id, arch)]
    by_major: dict[str, list[tuple[str, str]]]  # squashed family, minor version dropped
    by_major_words: dict[str, list[tuple[str, str]]]  # the same, its words in sorted order
    archs: frozenset[str] = frozenset()  # every architecture the index knows

    @classmethod
    def build(cls, known: KnownModels, catalogue: DraftCatalogue) -> NameIndex:
        return _build_index(known, catalogue)


# Keyed by the tree's (cached, long-lived) KnownModels and the catalogue's content: callers
# load a fresh but equal catalogue per issue.
_INDEX_CACHE: dict[tuple[int, DraftCatalogue], NameIndex] = {}


def _build_index(known: KnownModels, catalogue: DraftCatalogue) -> NameIndex:
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
        append_unique(exact, hf_id.lower(), arch)
        repo_name = hf_id.rsplit("/", 1)[-1]
        append_unique(by_repo_name, repo_name.lower(), (hf_id, arch))
        append_unique(by_core, squash(core_name(repo_name)), (hf_id, arch))
        append_unique(by_family, squash(family_name(repo_name)), (hf_id, arch))
        append_unique(by_major, squash(major_family(repo_name)), (hf_id, arch))
        append_unique(by_major_words, major_words(repo_name), (hf_id, arch))
    archs = frozenset(arch for _, arch in pairs) | frozenset(known.generation_archs())
    index = NameIndex(exact, by_repo_name, by_core, by_family, by_major, by_major_words, archs)
    if len(_INDEX_CACHE) > 8:
        _INDEX_CACHE.clear()
    _INDEX_CACHE[key] = index
    return index


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


def resolve_mention(
    name: str,
    index: NameIndex,
    evidence: Evidence,
    *,
    quiet: bool = False,
    score_cap: float = 1.0,
    how: str | None = None,
) -> bool:
    """Add the architectures ``name`` stands for to ``evidence``; False when it names none.

    ``quiet``: a name read in prose, most of which are not models; no reason when unresolved.
    """
    is_path = name.startswith(("/", "./", "~")) or name.count("/") > 1
    is_id = bool(HF_ID_FULL.match(name)) and not is_path
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
    core: str, index: NameIndex
) -> list[tuple[dict[str, list[tuple[str, str]]], str, float, str]]:
    """A known name with words added (`GLM-4.5-Air` is a `GLM-4.5`): the longest known name
    the user's starts with, version included (at least two words, one with a digit)."""
    tokens = core.split("-")
    for size in range(len(tokens) - 1, 1, -1):
        prefix = "-".join(tokens[:size])
        if any(ch.isdigit() for ch in prefix) and squash(prefix) in index.by_core:
            return [(index.by_core, squash(prefix), _SCORE_PREFIX, _BY_PREFIX)]
    return []


def resolve_phrase(phrase: str, index: NameIndex, evidence: Evidence) -> bool:
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


def draft_evidence(
    draft: str, catalogue: DraftCatalogue, index: NameIndex, evidence: Evidence
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
        resolve_mention(
            target,
            index,
            evidence,
            quiet=True,
            score_cap=_SCORE_DRAFT_NAME,
            how=f"the draft's name `{base}` (target `{target}`)",
        )
