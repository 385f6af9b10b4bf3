"""The checkpoints an issue names, read through their own configs: which class each one loads,
or which target a draft's config names."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.errors import BotError
from bot.hub import Hub
from bot.triage.checkpoint import MAX_CHECKPOINTS, Checkpoint, read_checkpoint, repo_id_like
from bot.triage.evidence import Evidence
from bot.triage.text import hub_links
from bot.triage.tree import draft_archs, generation_archs

_SCORE_CONFIG = 0.95  # the checkpoint's own config.json lists the class
_SCORE_CONFIG_DRAFT = 0.9  # a draft's config (its verifier) or card (its base model) names it


@dataclass(frozen=True)
class Configs:
    """The checkpoints whose config.json triage asked for, and what they said."""

    read: tuple[Checkpoint, ...] = ()
    decided: frozenset[str] = frozenset()  # repo ids whose config says which class, or "a draft"
    unread_ids: tuple[str, ...] = ()  # repo ids whose config could not be read

    def names_target(self, repo_id: str) -> bool:
        """True when ``repo_id``'s config (or, for a draft, its verifier or card) names a class."""
        return any(c.repo_id == repo_id and c.archs for c in self.read)


def checkpoint_ids(
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


def read_configs(root: Path, hub: Hub | None, ids: list[str], reasons: list[str]) -> Configs:
    """Each repository's config.json, through the Hub or its local cache; without either, the
    class is inferred from names, and the reasons say so."""
    if not ids:
        return Configs()
    hub = hub or Hub()
    offline = hub.unreachable_because()
    try:
        generation, drafts = generation_archs(root), draft_archs(root)
    except BotError:
        return Configs()
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
    return Configs(found, frozenset(decided), tuple(unread))


def config_evidence(
    configs: Configs,
    served: set[str],
    draft: str | None,
    evidence: Evidence,
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
