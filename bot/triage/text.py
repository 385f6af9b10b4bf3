"""Reading issue text the way users write it: what is noise, which names are models, what is asked.

Every function here takes already-cleaned text (see ``bot.triage.thread.clean_text``) and uses
bounded, linear regular expressions only. Extracted names are limited to ``[A-Za-z0-9_./:~-]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# Shell lines that were commented out: `# vllm serve other/model`, `#   --model x \`. A markdown
# heading (`### Your current environment`) is not a command and stays.
_COMMENTED_COMMAND = re.compile(
    r"(?m)^[ \t]*#+[ \t]*(?:vllm\b|python\d?\b|--|docker\b|export\b|CUDA_|VLLM_|[A-Za-z_]+=|"
    r"lm_eval\b|torchrun\b|srun\b|sudo\b|llm\s*=).*$"
)
# vLLM's "Supported architectures: dict_keys([...])" (or a plain list) names every architecture
# the build knows: it says nothing about the user's model.
_DUMP_START = re.compile(r"Supported architectures:?\s*(?:dict_keys\()?\[|dict_keys\(\[", re.I)
_DUMP_CHARS = 200_000

_NAME_CHARS = r"[A-Za-z0-9_.-]"
# A token that may be a model name: letters and at least one digit (`Qwen3-30B-A3B`,
# `GLM5.3-Flash`), read anywhere, also as the last segment of a path or URL.
_MODEL_TOKEN = re.compile(
    rf"(?<![A-Za-z0-9_.])(?=[A-Za-z]{{2}}|[A-Za-z]-[A-Za-z])({_NAME_CHARS}{{3,120}})"
)  # `K-EXAONE-236B`: a one-letter first word too
# `Gemma 4`, `Llama 4 Scout`, `Qwen3 Next`: a family name written with spaces.
_SPACED_NAME = re.compile(
    r"\b([A-Z][A-Za-z]{2,20}\d?(?:[ ]+(?:\d+(?:\.\d+)?|[A-Z][a-z]{2,10})){1,2})\b"
)
_URL_REPO = re.compile(
    r"https?://[A-Za-z0-9.-]{1,100}/(?:models/)?(?P<name>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,95})"
)
# A container image: `vllm/vllm-openai:v0.23.0`, `docker run ... rocm/vllm`, `FROM x/y`.
_IMAGE_TAG = re.compile(r"^:[\w.-]")
_IMAGE_LINE_CHARS = 400  # how far back on the line a `docker run` is looked for
_IMAGE_CONTEXT = re.compile(r"(?:\bdocker\s+(?:run|pull)\b|\bimage\s*[:=]|^\s*FROM\s)[^\n]*$", re.I)

_MODEL_TYPE = re.compile(
    r"""model[_ ]type\s*(?:=|:|of|is)?\s*[`"']?(?P<type>[a-z][a-z0-9_]{1,60})[`"']?""", re.I
)
_NOT_MODEL_TYPES = frozenset({"is", "of", "the", "eagle", "eagle3", "none", "mtp", "dflash"})

# Method spellings users write: eagle-3, EAGLE3, Eagle 3; DFlash, Dflash2, d-flash; dspark.
METHOD_WORDS = (
    ("dflash", re.compile(r"\bd[-_ ]?flash\d*\b", re.I)),
    ("dspark", re.compile(r"\bd[-_ ]?spark\d*\b", re.I)),
    ("eagle3", re.compile(r"\beagle[-_ ]?3\b", re.I)),
)
_ANY_METHOD = re.compile(r"\beagle[-_ ]?3\b|\bd[-_ ]?(?:flash|spark)\d*\b", re.I)
# Asking for the method on a model: "support EAGLE-3 for X", "add DFlash", "X does not support
# eagle3", "is there any plan to enable dspark".
_REQUEST_WORDS = re.compile(
    r"\b(?:support(?:s|ed|ing)?|unsupported|add(?:s|ed|ing)?|enabl(?:e|es|ed|ing)|"
    r"implement(?:s|ed|ing|ation)?|plan(?:s|ned)?|roadmap|wir(?:e|ed|ing))\b",
    re.I,
)
# An affirmative "EAGLE-3 is supported / works / runs" is about using the method, not asking for it.
_AFFIRMATIVE = re.compile(r"\b(?:is|are)\s+(?:already\s+)?supported\b(?![^.\n]{0,30}\bnot\b)", re.I)
_NEGATION = re.compile(r"\b(?:not|n't|no|never|unsupported|lacks?|missing|without)\b", re.I)
_FEATURE_TITLE = re.compile(r"^\s*\[(?:feature|new model|rfc|model|feature request)\]", re.I)
_SENTENCE_END = re.compile(r"[.!?\n]")
_SENTENCE_CHARS = 600
_DIGIT = re.compile(r"\d")
# The tree's interface names, written in tracebacks and by users who read the code.
INTERFACE_WORDS = re.compile(r"\bSupportsEagle3\b|\bsupports_eagle3\b|\bEagleModelMixin\b")

_IMAGE_WORDS = re.compile(
    r"\b(?:images?|image_url|pixel_values|vision|visual|video|videos|audio|speech|"
    r"multi-?modal|mm_processor\w*|limit[-_]mm[-_]per[-_]prompt|VLM|OCR|screenshots?)\b",
    re.I,
)
_TEXT_ONLY_WORDS = re.compile(
    r"--language-model-only|\blanguage_model_only\b|\btext[- ]only\b|\bonly text\b", re.I
)


def drop_noise(text: str) -> str:
    """Remove what names models without being about the user's model."""
    text = _COMMENTED_COMMAND.sub(" ", text)
    return _drop_supported_dumps(text)


def _drop_supported_dumps(text: str) -> str:
    """Blank every architectures dump (its opening up to the first ``]`` within
    :data:`_DUMP_CHARS`). Each start looks for its ``]`` by reusing the last search, so a flood
    of unclosed openings costs one pass, not one window per opening."""
    pieces, done, close = [], 0, -1
    for match in _DUMP_START.finditer(text):
        start = match.start()
        if start < done:
            continue
        if close < match.end():
            close = text.find("]", match.end())
            if close < 0:
                break
        if close - match.end() > _DUMP_CHARS:
            continue
        end = close + 1
        if text.startswith(")", end):
            end += 1
        pieces += [text[done:start], " "]
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def model_tokens(text: str, limit: int = 400) -> list[str]:
    """Name-like tokens anywhere in prose, paths and URLs (resolved later; most resolve to
    nothing), the first ``limit`` distinct ones. Container images are left out."""
    found: dict[str, None] = {}
    seen: set[str] = set()
    for match in _MODEL_TOKEN.finditer(text):
        if len(found) >= limit:
            break
        token = match.group(1).strip(".-_")
        if token in seen:
            continue
        seen.add(token)
        if not any(ch.isdigit() for ch in token):
            continue
        if is_container_image(text, match.start(1), match.end(1)):
            continue
        found[token] = None
    for match in _SPACED_NAME.finditer(text):
        if len(found) >= limit:
            break
        found[re.sub(r" +", "-", match.group(1))] = None
    return list(found)


_WORD = re.compile(r"(?<!\S)[A-Za-z0-9][A-Za-z0-9.]{0,30}(?=[\s,;:!?)]|\.?$|\.\s)")
_MAX_PHRASE_WORDS = 4


def spaced_phrases(text: str, limit: int = 5000) -> list[str]:
    """Runs of 2-4 words, one with a digit (`step 3.5 flash`, `qwen3 next 80b`), joined with
    hyphens: how users write a model's name in a sentence. Resolved only by exact name."""
    found: list[str] = []
    for line in _lines_with_digits(text):
        words = [w.rstrip(".") for w in _WORD.findall(line)]
        for start in range(len(words)):
            for size in range(2, _MAX_PHRASE_WORDS + 1):
                window = words[start : start + size]
                if len(window) == size and any(ch.isdigit() for w in window for ch in w):
                    found.append("-".join(window))
        if len(found) > limit:
            break
    return list(dict.fromkeys(found))[:limit]


def _lines_with_digits(text: str) -> Iterator[str]:
    """The lines holding a digit, in order; each line is read once however many it holds."""
    done = 0
    for match in _DIGIT.finditer(text):
        if match.start() < done:
            continue
        start = max(done, text.rfind("\n", done, match.start()) + 1)
        end = text.find("\n", match.end())
        done = len(text) if end < 0 else end + 1
        yield text[start:done].rstrip("\n")


def url_repo_ids(text: str) -> list[str]:
    """``org/name`` from model-hub URLs (any host: resolved against the tree, never fetched)."""
    found = []
    for match in _URL_REPO.finditer(text):
        name = match.group("name").rstrip(".,:;/")
        for suffix in ("/tree", "/blob", "/resolve"):
            name = name.split(suffix, 1)[0]
        found.append(name)
    return list(dict.fromkeys(found))


# A link to a model on the Hugging Face Hub (or its mirror): `https://huggingface.co/org/name`.
_HUB_LINK = re.compile(
    r"https?://(?:www\.)?(?:huggingface\.co|hf\.co|hf-mirror\.com)/(?:models/)?"
    r"(?P<name>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,95})"
)
_NOT_REPOS = frozenset({"datasets", "spaces", "docs", "blog", "api", "collections", "papers"})


def hub_links(text: str, limit: int = 50) -> list[str]:
    """``org/name`` of links to models on the Hub (not its datasets, spaces or docs)."""
    found: dict[str, None] = {}
    for match in _HUB_LINK.finditer(text):
        name = match.group("name").rstrip(".,:;/")
        if name.split("/", 1)[0].lower() in _NOT_REPOS:
            continue
        found[name] = None
        if len(found) >= limit:
            break
    return list(found)


def is_container_image(text: str, start: int, end: int) -> bool:
    """True when the name at ``text[start:end]`` is a container image: tagged (``x/y:tag``) or
    on a ``docker run``/``docker pull``/``FROM``/``image:`` line without ``--model``."""
    if _IMAGE_TAG.match(text[end : end + 2]):
        return True
    window = max(0, start - _IMAGE_LINE_CHARS)
    line_start = text.rfind("\n", window, start)  # -1: the line is longer than the window
    before = text[line_start + 1 if line_start >= 0 else window : start]
    lowered = before.lower()
    if "docker" not in lowered and "image" not in lowered and "from" not in lowered:
        return False
    return bool(_IMAGE_CONTEXT.search(before)) and "--model" not in before


def model_types(text: str) -> list[str]:
    """``model_type`` values vLLM's and Transformers' errors print (``model type `glm5_next```)."""
    found = []
    for match in _MODEL_TYPE.finditer(text):
        value = match.group("type").lower()
        if value not in _NOT_MODEL_TYPES:
            found.append(value)
    return list(dict.fromkeys(found))


def method_in_text(text: str) -> str | None:
    for method, pattern in METHOD_WORDS:
        if pattern.search(text):
            return method
    return None


def normalise_method(value: str) -> str | None:
    """``EAGLE-3`` / ``eagle3`` -> eagle3, ``dflash2`` -> dflash; other methods -> None."""
    for method, pattern in METHOD_WORDS:
        if pattern.fullmatch(value.strip()):
            return method
    return None


@dataclass(frozen=True)
class Request:
    method: str
    sentence: str  # the sentence that asks, capped, for the reasons


def method_request(title: str, text: str) -> Request | None:
    """The sentence asking for EAGLE-3/DFlash/DSpark support, if the issue has one."""
    if _FEATURE_TITLE.search(title) and _ANY_METHOD.search(title):
        return Request(method_in_text(title) or "eagle3", title.strip()[:160])
    for sentence in _sentences_naming_a_method(text):
        if not _REQUEST_WORDS.search(sentence):
            continue
        if _AFFIRMATIVE.search(sentence) and not _NEGATION.search(sentence):
            continue
        return Request(method_in_text(sentence) or "eagle3", sentence.strip()[:160])
    return None


def _sentences_naming_a_method(text: str) -> Iterator[str]:
    """Each sentence (up to :data:`_SENTENCE_CHARS` either side of the name, cut at ``.!?`` and
    line ends) around a method's name, once; the text is read once in all."""
    done = 0
    for match in _ANY_METHOD.finditer(text):
        if match.start() < done:
            continue
        floor = max(done, match.start() - _SENTENCE_CHARS)
        before = _SENTENCE_END.search(text[floor : match.start()][::-1])
        start = match.start() - before.start() if before else floor
        after = _SENTENCE_END.search(text, match.end(), match.end() + _SENTENCE_CHARS)
        done = after.start() if after else min(len(text), match.end() + _SENTENCE_CHARS)
        yield text[start:done]


def modality_words(text: str) -> tuple[list[str], list[str]]:
    """(words about images/audio/video, words saying text only), each deduplicated."""
    images = list(dict.fromkeys(m.group(0).lower() for m in _IMAGE_WORDS.finditer(text)))
    text_only = list(dict.fromkeys(m.group(0).lower() for m in _TEXT_ONLY_WORDS.finditer(text)))
    return images, text_only
