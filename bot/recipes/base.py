"""What every recipe shares: the finding it reports, the context it reads, the fix it plans.

A recipe is the whole fix class: ``detect(ctx)`` reports findings, ``plan(finding, ctx)`` says
how to fix one as a frozen :class:`FixPlan` (the edits and where they may touch, the tests, the
registry-entry decision, the write-up's own sections, the commit title and the issue comment).
``bot.propose`` applies any FixPlan the same way and runs the do-no-harm checks on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, runtime_checkable

from bot.tree.index import ClassIndex
from bot.tree.model_registry import ModelRegistry

if TYPE_CHECKING:
    from bot.codemods.spans import Span  # libcst: only what plans and publishes needs it
    from bot.drafts import DraftCatalogue
    from bot.registry_plan import RegistryEntryPlan

# Platform sub-packages of vllm/models/<name>/, one of which is chosen at import time.
PLATFORMS = frozenset({"nvidia", "amd", "xpu", "cpu", "tpu"})


@dataclass(frozen=True)
class ScanContext:
    root: Path
    index: ClassIndex
    registry: ModelRegistry


@dataclass(frozen=True)
class Finding:
    recipe: str
    class_name: str
    module: str
    path: str  # relative to the tree root
    line: int
    architectures: tuple[str, ...]
    evidence: dict[str, Any]
    summary: str

    def to_json(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "class": self.class_name,
            "module": self.module,
            "path": self.path,
            "line": self.line,
            "architectures": list(self.architectures),
            "evidence": self.evidence,
            "summary": self.summary,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return cls(
            recipe=data["recipe"],
            class_name=data["class"],
            module=data["module"],
            path=data["path"],
            line=int(data["line"]),
            architectures=tuple(data.get("architectures", ())),
            evidence=dict(data.get("evidence", {})),
            summary=data.get("summary", ""),
        )

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies a finding across scans: its summary may change, this does not."""
        return (self.recipe, self.class_name, self.path)


def platform_variant(finding: Finding) -> str | None:
    """``amd`` for vllm/models/<pkg>/amd/..., the platform packages chosen at import time."""
    parts = Path(finding.path).parts
    if len(parts) > 4 and parts[:2] == ("vllm", "models") and parts[3] in PLATFORMS:
        return parts[3]
    return None


def follows_from(finding: Finding, fixed_class: str) -> bool:
    """Whether ``finding`` is a follow-up a fix on ``fixed_class`` makes possible, not harm: a
    multimodal wrapper over ``fixed_class``, now that it supports EAGLE-3, is reported as ready
    to declare it too (the re-scans of propose and verify accept exactly these new findings),
    also when the wrapper's code pins several language models and ``fixed_class`` was the last
    of them not capable yet (Glm4v's Glm4 and Glm4Moe)."""
    language_model = finding.evidence.get("language_model")
    if finding.recipe != "eagle3-wrapper" or not isinstance(language_model, dict):
        return False
    pinned = language_model.get("pinned")
    return language_model.get("name") == fixed_class or (
        isinstance(pinned, list) and fixed_class in pinned
    )


# -- the fix a recipe plans ------------------------------------------------------------------


@dataclass(frozen=True)
class CodemodStep:
    """One codemod call: ``codemod(source, **args)`` returns the new source (or refuses)."""

    codemod: Callable[..., str]
    args: tuple[tuple[str, Any], ...] = ()

    def apply(self, source: str) -> str:
        return self.codemod(source, **dict(self.args))


def step(codemod: Callable[..., str], **args: Any) -> CodemodStep:
    return CodemodStep(codemod, tuple(args.items()))


@dataclass(frozen=True)
class FileEdit:
    """Codemods applied in order to one file, allowed to change only the ``confined_to`` spans.

    ``path`` is relative to the tree root and may be any file of the scratch checkout (a base
    class in another module, a test file). ``kind`` and ``description`` go into plan.json and
    the write-up's change list; an edit that changes nothing is dropped from both.
    """

    path: str
    kind: str
    description: str
    steps: tuple[CodemodStep, ...]
    confined_to: tuple[Span, ...]
    # A new file (a contributed test): its codemods get "" and write the whole text, which
    # the kind's publish rule re-derives; the spans are not used.
    creates: bool = False

    def apply(self, source: str) -> str:
        for codemod in self.steps:
            source = codemod.apply(source)
        return source

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "description": self.description}


@dataclass(frozen=True)
class FixTests:
    """pytest node ids of the tree: CPU ones run by ``bot verify``, GPU ones on the runner."""

    cpu: tuple[str, ...] = ()
    gpu: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        return {"gpu": list(self.gpu), "cpu": list(self.cpu)}


@dataclass(frozen=True)
class RegistryDecision:
    """The tests/models/registry.py entry that puts the fix under a GPU test, or why none."""

    entry: RegistryEntryPlan | None
    why_none: str = ""


WRITEUP_SLOTS = ("summary", "claims", "root_cause")


@dataclass(frozen=True)
class WriteUp:
    """The recipe's own parts of the PR body.

    ``sections`` maps the slots of the generic PR templates (``summary``, ``claims``,
    ``root_cause``) to template names under templates/; ``context`` holds the values those
    templates read, next to the generic ones (cls, variant, archs, edits, entry, tests, ...).
    """

    sections: Mapping[str, str]
    context: Mapping[str, Any]

    def __post_init__(self) -> None:
        object.__setattr__(self, "sections", MappingProxyType(dict(self.sections)))
        object.__setattr__(self, "context", MappingProxyType(dict(self.context)))

    @classmethod
    def from_folder(cls, folder: str, context: Mapping[str, Any]) -> WriteUp:
        """Every slot filled from ``<folder>/<slot>.j2``, the layout each recipe uses."""
        return cls({slot: f"{folder}/{slot}.j2" for slot in WRITEUP_SLOTS}, context)


@dataclass(frozen=True)
class FixPlan:
    """Everything propose, the write-up and publish need to know about one fix.

    ``resolves`` are the findings the edits must make disappear on the re-scan (a fix on a
    shared base class may resolve several); no other finding may appear. ``commit_title`` is
    also the PR title; ``issue_comment`` completes "A fix is proposed in #N: ..." in the
    sticky issue comment (one sentence, Markdown, no mentions).
    """

    recipe: str
    finding: Finding
    resolves: tuple[Finding, ...]
    variant: str | None
    edits: tuple[FileEdit, ...]
    tests: FixTests
    registry: RegistryDecision
    writeup: WriteUp
    commit_title: str
    issue_comment: str


@dataclass(frozen=True)
class Declined:
    """``plan`` found the finding real but will not patch it here; ``reason`` says why."""

    reason: str


@dataclass(frozen=True)
class PlanContext:
    """What ``plan`` may read: the scan, the finding's platform variants, the architecture the
    issue (or the finding) names, the draft catalogue, and where links in the write-up point."""

    scan: ScanContext
    group: tuple[Finding, ...]  # the finding and the same class's other platform variants
    findings: tuple[Finding, ...]  # everything the scan reported (a shared base's other users)
    arch: str
    catalogue: DraftCatalogue
    preferred_draft: str | None
    upstream: str
    version: str | None
    base_commit: str

    @property
    def root(self) -> Path:
        return self.scan.root

    def url(self, path: str, line: int | None = None) -> str:
        from bot.writeup import blob_url

        ref = f"v{self.version}" if self.version else self.base_commit
        return blob_url(self.upstream, ref, path, line)


class Recipe(Protocol):
    """One fix class: how to find its instances in a tree (and, see :class:`FixingRecipe`,
    how to fix one). A recipe without ``plan`` is reported, not patched."""

    name: str
    description: str

    def detect(self, ctx: ScanContext) -> list[Finding]: ...


@dataclass(frozen=True)
class PublishedEdit:
    """One file of the commit ``bot publish`` is about to push, as a recipe's publish rule sees
    it: the text at the base commit, the text after the patch, and what the plan says about it.

    ``kind`` and ``class_name`` are the plan's (``class_name`` is a validated identifier, nothing
    more); ``finding`` is plan.json's finding, untrusted data: a rule that relies on one of its
    fields checks it against the base text.
    """

    path: str
    kind: str
    before: str
    after: str
    class_name: str
    finding: Mapping[str, Any]
    # The base commit's whole tree, for a rule that re-derives more than this file tells it.
    base: BaseTree | None = None


class BaseTree(Protocol):
    """The tree at the plan's base commit as publish fetched it (never the plan's repo_path)."""

    def scan(self) -> ScanContext: ...


PublishRule = Callable[[PublishedEdit], None]
"""Raises CodemodRefused unless the change is exactly what the recipe's edit of that kind makes."""


@runtime_checkable
class FixingRecipe(Protocol):
    name: str
    description: str
    # One rule per edit kind the recipe's FileEdits use: publish refuses any other kind.
    publish_rules: Mapping[str, PublishRule]

    def detect(self, ctx: ScanContext) -> list[Finding]: ...

    def plan(self, finding: Finding, ctx: PlanContext) -> FixPlan | Declined: ...


def fixes(recipe: Recipe) -> TypeGuard[FixingRecipe]:
    return callable(getattr(recipe, "plan", None))
