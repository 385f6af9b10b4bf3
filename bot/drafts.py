"""The catalogue of public draft models (DFlash, EAGLE-3, ...) and the targets they serve.

Two layers, read together:

- shipped: ``bot/data/drafts.json``: :func:`seed_from_tree` run on vLLM's newest test registry,
  plus curated facts, each marked with its source;
- user: ``<cache_dir>/drafts.json``, written by ``bot drafts refresh`` from the Hugging Face Hub.
  The shipped file is never modified at run time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from bot.config import cache_dir
from bot.errors import BotError
from bot.fileio import write_atomic
from bot.hub import Hub, HubSettings, card_base_models, first_line, transport_error_type
from bot.tree.known_models import GENERATION_CATEGORIES, TEST_REGISTRY_PATH, load_known_models

CATALOGUE_SCHEMA = 1
# Methods a registry entry may use, best first. DSpark drafts exist but are not preferred.
PREFERRED_METHODS = ("dflash", "eagle3")
_HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# Method named by the registry key itself; checked before the section comment.
_KEY_METHODS = (("eagle3", "eagle3"), ("dflash", "dflash"), ("dspark", "dspark"))
_SECTION_METHODS = {
    "dflash": "dflash",
    "dspark": "dspark",
    "eagle": "eagle",
    "eagle3": "eagle3",
    "mtp": "mtp",
    "medusa": "medusa",
    "xpress": "xpress",
}


@dataclass(frozen=True)
class DraftEntry:
    repo_id: str  # the draft checkpoint on the Hub
    method: str  # "dflash", "eagle3", "dspark", "eagle", "mtp", ...
    target_repo_id: str | None
    target_arch: str | None
    source: str  # where this fact comes from
    available: bool = True  # False when the tree says the checkpoint is not published
    # Shipped facts (the tree's registry, curated) are reviewed; a Hub entry is data from a
    # model card until a maintainer accepts it (`bot drafts accept REPO_ID`).
    reviewed: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, reviewed_unless_said: bool = True) -> DraftEntry:
        """``reviewed_unless_said``: what an entry without a ``reviewed`` key is (the shipped
        file: reviewed; the user's file, which an older ``bot drafts refresh`` wrote without the
        key: not, so a Hub card never decides a registry entry)."""
        try:
            return cls(
                repo_id=str(data["repo_id"]),
                method=str(data["method"]),
                target_repo_id=_optional_str(data.get("target_repo_id")),
                target_arch=_optional_str(data.get("target_arch")),
                source=str(data.get("source", "")),
                available=bool(data.get("available", True)),
                reviewed=data.get("reviewed", reviewed_unless_said) is True,
            )
        except (KeyError, TypeError) as exc:
            raise BotError(f"malformed draft catalogue entry: missing {exc}") from None


def _optional_str(value: object) -> str | None:
    return str(value) if value else None


@dataclass(frozen=True)
class DraftChoice:
    draft: DraftEntry | None
    reason: str


@dataclass(frozen=True)
class DraftCatalogue:
    entries: tuple[DraftEntry, ...]

    def reviewed(self) -> DraftCatalogue:
        """Only the entries a registry entry may be built from (never an unreviewed Hub card)."""
        return DraftCatalogue(tuple(e for e in self.entries if e.reviewed))

    def for_arch(self, arch: str) -> list[DraftEntry]:
        return _unique(e for e in self.entries if e.target_arch == arch)

    def for_target_repo(self, repo_id: str) -> list[DraftEntry]:
        wanted = repo_id.lower()
        return _unique(e for e in self.entries if (e.target_repo_id or "").lower() == wanted)

    def find(self, repo_id: str) -> DraftEntry | None:
        """The entry for draft ``repo_id``, preferring one that names its target architecture."""
        wanted = repo_id.lower()
        matches = [e for e in self.entries if e.repo_id.lower() == wanted]
        with_arch = [e for e in matches if e.target_arch]
        return (with_arch or matches or [None])[0]

    def target_arch_of(self, target_repo_id: str) -> str | None:
        archs = {e.target_arch for e in self.for_target_repo(target_repo_id) if e.target_arch}
        return archs.pop() if len(archs) == 1 else None

    def choose(self, arch: str) -> DraftChoice:
        """The draft a registry entry should use for ``arch``: DFlash first, then EAGLE-3."""
        candidates = self.for_arch(arch)
        for method in PREFERRED_METHODS:
            published = [e for e in candidates if e.method == method and e.available]
            if published:
                chosen = published[0]
                return DraftChoice(chosen, f"{method} draft {chosen.repo_id} ({chosen.source})")
        if candidates:
            listed = ", ".join(
                f"{e.repo_id} ({e.method}, published={e.available})" for e in candidates
            )
            return DraftChoice(
                None, f"no published DFlash or EAGLE-3 draft for {arch}; catalogue has: {listed}"
            )
        return DraftChoice(None, f"the draft catalogue lists no public draft model for {arch}")


def _unique(entries: Iterable[DraftEntry]) -> list[DraftEntry]:
    """One entry per draft repo, keeping the first (the more specific layer comes first)."""
    seen: dict[str, DraftEntry] = {}
    for entry in entries:
        seen.setdefault(entry.repo_id.lower(), entry)
    return list(seen.values())


# --- seeding from a vLLM tree -------------------------------------------------------------------


def seed_from_tree(tree_root: Path) -> list[DraftEntry]:
    """Draft models named by ``speculative_model=`` in the tree's test registry."""
    known = load_known_models(tree_root)
    target_archs: dict[str, str] = {}
    for entry in known.examples:
        if entry.category in GENERATION_CATEGORIES:
            for hf_id in entry.hf_ids:
                target_archs.setdefault(hf_id, entry.arch)
    seeded = []
    for entry in known.examples:
        if entry.category != "speculative_decoding":
            continue
        draft = entry.kwargs.get("speculative_model")
        if not (isinstance(draft, str) and _HF_ID.match(draft)):
            continue  # absent, a local path, or a placeholder name
        target = entry.default if _HF_ID.match(entry.default) else None
        seeded.append(
            DraftEntry(
                repo_id=draft,
                method=_method_of(entry.arch, entry.section, entry.kwargs),
                target_repo_id=target,
                target_arch=target_archs.get(target) if target else None,
                source=f"vllm {tree_root.name} {TEST_REGISTRY_PATH} {entry.arch}",
                available=entry.kwargs.get("is_available_online", True) is not False,
            )
        )
    return seeded


def _method_of(key: str, section: str | None, kwargs: dict[str, Any]) -> str:
    """``speculative_method=`` if given; else the section, refined by the key within a family.

    ``Eagle3LlamaForCausalLM`` under ``# [Eagle]`` is eagle3; ``DFlashQwen3XPressModel`` under
    ``# [XPress]`` stays xpress (its draft is an XPress checkpoint).
    """
    explicit = kwargs.get("speculative_method")
    if isinstance(explicit, str) and explicit:
        return explicit.lower()
    lowered = key.lower()
    from_key = next((method for needle, method in _KEY_METHODS if needle in lowered), None)
    from_section = None
    if section:
        name = section.strip().lower()
        from_section = _SECTION_METHODS.get(name, name)
    if from_section is None:
        return from_key or "unknown"
    if from_key and from_key.startswith(from_section):
        return from_key
    return from_section


# --- loading and saving -------------------------------------------------------------------------


def user_catalogue_path() -> Path:
    return cache_dir() / "drafts.json"


def shipped_entries() -> list[DraftEntry]:
    text = resources.files("bot").joinpath("data/drafts.json").read_text(encoding="utf-8")
    return _entries_from_text(text, "bot/data/drafts.json")


def load_catalogue(include_user: bool = True) -> DraftCatalogue:
    """Shipped entries plus, when present, the user's refreshed ones (which come first)."""
    entries = shipped_entries()
    path = user_catalogue_path()
    if include_user and path.is_file():
        entries = read_catalogue_file(path) + entries
    # Curated facts outrank derived ones for the same draft.
    entries.sort(key=lambda e: 0 if e.source.startswith("curated") else 1)
    return DraftCatalogue(tuple(entries))


def read_catalogue_file(path: Path) -> list[DraftEntry]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BotError(f"cannot read draft catalogue {path}: {exc.strerror}") from None
    return _entries_from_text(text, str(path), reviewed_unless_said=False)


def _entries_from_text(
    text: str, where: str, *, reviewed_unless_said: bool = True
) -> list[DraftEntry]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BotError(f"draft catalogue {where} is not valid JSON (line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise BotError(f"draft catalogue {where} has no 'entries' list")
    return [
        DraftEntry.from_dict(item, reviewed_unless_said=reviewed_unless_said)
        for item in data["entries"]
        if isinstance(item, dict)
    ]


def catalogue_json(entries: Iterable[DraftEntry], note: str) -> str:
    payload = {
        "schema": CATALOGUE_SCHEMA,
        "note": note,
        "entries": [e.to_dict() for e in entries],
    }
    return json.dumps(payload, indent=2, ensure_ascii=True) + "\n"


def write_catalogue_file(path: Path, entries: Iterable[DraftEntry], note: str) -> None:
    write_atomic(path, catalogue_json(entries, note))


def merge_entries(old: list[DraftEntry], new: list[DraftEntry]) -> list[DraftEntry]:
    """``new`` replaces ``old`` for the same (draft, target); everything else is kept."""

    def key(entry: DraftEntry) -> tuple[str, str]:
        return entry.repo_id.lower(), (entry.target_repo_id or "").lower()

    merged = {key(e): e for e in old}
    for entry in new:
        before = merged.get(key(entry))
        # An accepted entry stays accepted while the Hub says the same; any change re-opens it.
        if before is not None and before.reviewed and replace(before, reviewed=False) == entry:
            continue
        merged[key(entry)] = entry
    return sorted(merged.values(), key=lambda e: (e.repo_id.lower(), e.target_repo_id or ""))


# Facts no vLLM test registry states in full, each with its evidence.
CURATED: tuple[DraftEntry, ...] = (
    DraftEntry(
        repo_id="z-lab/Qwen3-Coder-Next-DFlash",
        method="dflash",
        target_repo_id="Qwen/Qwen3-Coder-Next",
        target_arch="Qwen3NextForCausalLM",
        source=(
            "curated: vllm-project/vllm PR #45319 (fix for issue #33329) tests this draft "
            "against Qwen/Qwen3-Coder-Next, whose config.json architectures is "
            "Qwen3NextForCausalLM"
        ),
    ),
)


def shipped_catalogue_entries(tree_root: Path) -> list[DraftEntry]:
    """What ``bot/data/drafts.json`` holds: the tree's seed, then the curated facts."""
    return [*seed_from_tree(tree_root), *CURATED]


# --- refreshing from the Hugging Face Hub -------------------------------------------------------

DEFAULT_SEARCH_TERMS = ("dflash", "eagle3", "dspark")


def refresh_from_hub(
    endpoint: str | None = None,
    search_terms: Iterable[str] = DEFAULT_SEARCH_TERMS,
    limit_per_term: int = 100,
) -> list[DraftEntry]:
    """Find draft models on the Hub, merge them into the user catalogue, return what was found.

    Each candidate's ``config.json`` says which method it is (and, for speculators-format
    checkpoints, its verifier); its card's ``base_model`` names the target, whose own
    ``config.json`` gives the target architecture. No token is sent: this is public data.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    hub = Hub(HubSettings.from_env(endpoint))
    endpoint = hub.endpoint
    if hub.settings.offline:
        raise BotError("cannot refresh drafts: HF_HUB_OFFLINE is set")
    hub.require()
    api = HfApi(endpoint=endpoint, token=False)
    found: list[DraftEntry] = []
    try:
        candidates: dict[str, Any] = {}
        for term in search_terms:
            for info in api.list_models(search=term, limit=limit_per_term, cardData=True):
                candidates.setdefault(info.id, info)
        for repo_id, info in sorted(candidates.items()):
            entry = _entry_from_hub(repo_id, info, hub)
            if entry is not None:
                found.append(entry)
    except (OfflineModeIsEnabled, transport_error_type(), HfHubHTTPError, OSError) as exc:
        raise BotError(f"cannot refresh drafts from {hub.shown}: {first_line(exc)}") from None
    path = user_catalogue_path()
    old = read_catalogue_file(path) if path.is_file() else []
    write_catalogue_file(
        path, merge_entries(old, found), f"Draft models found on {hub.shown} by bot drafts refresh"
    )
    return found


def accept_draft(repo_id: str) -> list[DraftEntry]:
    """Mark the user catalogue's entries for draft ``repo_id`` reviewed; returns them."""
    path = user_catalogue_path()
    entries = read_catalogue_file(path) if path.is_file() else []
    wanted = repo_id.lower()
    accepted = [replace(e, reviewed=True) for e in entries if e.repo_id.lower() == wanted]
    if not accepted:
        raise BotError(f"{repo_id!r} is not in the refreshed catalogue {path}")
    kept = [e for e in entries if e.repo_id.lower() != wanted]
    write_catalogue_file(
        path, merge_entries(kept, accepted), "Draft models found by bot drafts refresh"
    )
    return accepted


def _config(hub: Hub, repo_id: str) -> dict[str, Any]:
    """A repository's config.json, or ``{}`` when it has none the Hub gives out."""
    return hub.config(repo_id).config or {}


def _entry_from_hub(repo_id: str, info: Any, hub: Hub) -> DraftEntry | None:
    config = _config(hub, repo_id)
    method = hub_method(repo_id, config)
    if method is None:
        return None
    verifier = (config.get("speculators_config") or {}).get("verifier") or {}
    target = _first_str(verifier.get("name_or_path")) or _first_str(list(card_base_models(info)))
    target_arch = _first_str(verifier.get("architectures"))
    if target and not target_arch:
        target_arch = _first_str(_config(hub, target).get("architectures"))
    return DraftEntry(
        repo_id=repo_id,
        method=method,
        target_repo_id=target if target and _HF_ID.match(target) else None,
        target_arch=target_arch,
        source=f"hub {hub.shown}: {repo_id} config.json and model card",
        reviewed=False,
    )


def hub_method(repo_id: str, config: dict[str, Any]) -> str | None:
    architectures = " ".join(str(a) for a in config.get("architectures") or []).lower()
    algorithm = str((config.get("speculators_config") or {}).get("algorithm", "")).lower()
    name = repo_id.lower()
    if "dflash_config" in config or "dflash" in architectures or algorithm == "dflash":
        return "dflash"
    if "dspark" in architectures or algorithm == "dspark":
        return "dspark"
    if "eagle3" in architectures or algorithm == "eagle3" or "eagle_config" in config:
        return "eagle3"
    for method in ("dflash", "dspark", "eagle3"):
        if method in name:
            return method
    return None


def _first_str(value: object) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, list) and value and isinstance(value[0], str):
        return value[0]
    return None


def shown(*values: object) -> list[str]:
    """Catalogue values made safe for a terminal: Hub metadata is anyone's text, and an escape
    sequence in it (``\\x1b]...``) would otherwise drive the reader's terminal. Every character
    that is not printable (controls, escapes, bidi overrides, tabs, newlines) is shown escaped."""
    return [
        "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(value)) for value in values
    ]


def listing_line(entry: DraftEntry) -> str:
    """One line of ``bot drafts list``: method, draft, target, architecture, review state."""
    review = "reviewed" if entry.reviewed else "unreviewed"
    fields = shown(
        entry.method, entry.repo_id, entry.target_repo_id or "-", entry.target_arch or "-", review
    )
    return "\t".join(fields)
