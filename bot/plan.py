"""The plan directory: the handoff between the unprivileged and the privileged half.

``bot propose`` writes it (no token needed); ``bot verify`` adds results to it; ``bot publish``
reads it and talks to GitHub. Files:

- ``plan.json``: the :class:`Plan` below, as JSON, each field read back as its record (the
  finding as its recipe's, the edits, tests, registry entry, triage, what it resolves, the
  verification), so a reader never re-validates a field;
- ``patch.diff``: a ``git apply``-able patch at ``base_commit`` (empty when there is nothing to do);
- ``pr.md``: the PR title on the first line, a blank line, then the body.

This module is the only one that reads or writes them.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import jsonio
from bot.duplicate_search import DuplicateSearch
from bot.errors import BotError
from bot.recipes.base import DeclaredEdit, Finding, FindingRef, FixTests
from bot.recipes.registry_plan import RegistryEntryPlan
from bot.triage_outcome import Triage
from bot.verification import Verification

# 3: a single-class plan records its platform variant (``variant``); before, it was read back
# out of its fingerprint.
PLAN_SCHEMA = 3

# What a plan can say about itself.
READY = "ready"  # a patch to publish
NOTHING_TO_FIX = "nothing-to-fix"  # already fixed, or not an issue of a known class
NEEDS_INFO = "needs-info"  # triage lacked confidence; `questions` says what is missing
NEEDS_HUMAN = "needs-human"  # a real gap the bot will not patch; `reason` lists the blockers
PLAN_STATUSES = (READY, NOTHING_TO_FIX, NEEDS_INFO, NEEDS_HUMAN)


@dataclass(frozen=True)
class Member(jsonio.JsonRecord):
    """One class a plan fixes. A single-class plan is a group of one; a group plan (one branch,
    one PR) has a member per class, each with its own fingerprint, so a class already in any PR
    is recognised whichever group it was published in.

    ``variant`` is the platform package the fix is for (``amd`` for vllm/models/<pkg>/amd/),
    None when it is for every variant or the class has none. ``patch`` is this member's commit
    on the group's branch (applied in order on the base commit, the members' patches add up to
    patch.diff); empty in a group of one, whose one commit is patch.diff. ``issues`` are the
    triaged issues the member resolves (each gets the sticky comment pointing at the PR).
    ``resolves`` are the findings the member's fix makes disappear, which verify's re-scan
    checks.
    """

    class_name: str
    recipe: str
    fingerprint: str
    finding: Finding
    variant: str | None = None
    registry_entry: RegistryEntryPlan | None = None
    tests: FixTests = FixTests()
    edits: tuple[DeclaredEdit, ...] = ()
    issues: tuple[int, ...] = ()
    title: str = ""
    reason: str = ""
    issue_comment: str | None = None
    patch: str = ""
    resolves: tuple[FindingRef, ...] = ()


@dataclass
class Plan:
    status: str
    reason: str
    recipe: str | None = None
    class_name: str | None = None
    variant: str | None = None  # as Member.variant
    repo_path: str = ""
    base_commit: str = ""
    vllm_version: str | None = None
    upstream: str = "vllm-project/vllm"
    issue_number: int | None = None
    issue_title: str | None = None
    finding: Finding | None = None
    triage: Triage | None = None
    edits: list[DeclaredEdit] = field(default_factory=list)
    registry_entry: RegistryEntryPlan | None = None
    tests: FixTests = FixTests()
    branch: str | None = None
    fingerprint: str | None = None
    title: str | None = None  # the commit's title line, also the PR's (pr.md starts with it)
    issue_comment: str | None = None  # the recipe's words for the sticky issue comment
    questions: list[str] = field(default_factory=list)
    verification: Verification | None = None  # what `bot verify` recorded
    group: str | None = None  # a group plan's key (recipe/shape), None for a single class
    members: list[Member] = field(default_factory=list)
    resolves: list[FindingRef] = field(default_factory=list)  # as Member.resolves
    # AGENTS.md's duplicate-work search as propose (or the CLI's publish) ran it; the body
    # quotes it, publish runs it again (bot/publish/duplicates.py). None: not run.
    duplicate_search: DuplicateSearch | None = None
    schema: int = PLAN_SCHEMA

    def __post_init__(self) -> None:
        # A ready single-class plan is a group of one, its member read from its own fields.
        if self.group is None and self.status == READY and not self.members and self.fingerprint:
            member = self.single_member()
            self.members = [member] if member is not None else []

    def single_member(self) -> Member | None:
        """The member a single-class plan's own fields describe (None without a recipe, a
        class or a finding)."""
        if not (self.recipe and self.class_name and self.finding):
            return None
        return Member(
            class_name=self.class_name,
            recipe=self.recipe,
            fingerprint=self.fingerprint or "",
            finding=self.finding,
            variant=self.variant,
            registry_entry=self.registry_entry,
            tests=self.tests,
            edits=tuple(self.edits),
            issues=(self.issue_number,) if self.issue_number else (),
            title=self.title or "",
            reason=self.reason,
            issue_comment=self.issue_comment,
            resolves=tuple(self.resolves),
        )

    @property
    def is_group(self) -> bool:
        return self.group is not None

    @property
    def member_fingerprints(self) -> list[str]:
        return [m.fingerprint for m in self.members]

    @property
    def issues(self) -> list[int]:
        """Every triaged issue the plan resolves (the plan's own first), once each."""
        numbers = [self.issue_number] if self.issue_number else []
        numbers += [n for m in self.members for n in m.issues]
        return list(dict.fromkeys(numbers))

    def to_json(self) -> str:
        data = jsonio.record_to_json(self)
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=True) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        """The plan plan.json holds, every field read as its record; a one-line BotError
        naming the field when one is missing, unknown or malformed."""
        if data.get("status") not in PLAN_STATUSES:
            raise BotError(f"plan.json has an unknown status: {data.get('status')!r}")
        if data.get("schema", 1) < 3 and "variant" not in data:
            data = {**data, "variant": _schema_2_variant(data.get("fingerprint"))}
        plain = {k: v for k, v in data.items() if k != "verification"}
        plan = jsonio.record_from_json(cls, plain, "plan.json")
        plan.schema = PLAN_SCHEMA  # what it holds now, whichever schema wrote it
        recorded = data.get("verification")
        plan.verification = None if recorded is None else Verification.from_json(recorded)
        _check_issue_numbers(plan)  # whatever the file lists, before a single plan's is replaced
        if not plan.is_group:
            # A single-class plan's member is always its own fields, whatever the file lists.
            member = plan.single_member() if plan.status == READY else None
            plan.members = [member] if member is not None and plan.fingerprint else []
        return plan


def _check_issue_numbers(plan: Plan) -> None:
    """Issue numbers reach GitHub (``Fixes #N``, the sticky comment) and the journal."""
    if plan.issue_number is not None:
        _issue_number(plan.issue_number, "plan.json: `issue_number`")
    for index, member in enumerate(plan.members):
        for number in member.issues:
            _issue_number(number, f"plan.json.members[{index}]: `issues`")


def _schema_2_variant(fingerprint: object) -> str | None:
    """A plan.json from before schema 3 has no ``variant``: its fingerprint
    (``recipe:Class@variant:base``) names the one the plan was made for."""
    if not isinstance(fingerprint, str):
        return None
    return fingerprint.rsplit(":", 1)[0].partition("@")[2] or None


# GitHub's issue numbers are GraphQL Ints (32-bit); a larger one names no issue, and would not
# fit the journal either.
_MAX_ISSUE_NUMBER = 2**31 - 1


def _issue_number(value: int, where: str) -> None:
    if not 0 < value <= _MAX_ISSUE_NUMBER:
        raise BotError(f"{where} holds {str(value)[:24]}, which is not an issue number")


class WithPrMarkdown:
    """The PR title and body of a ``pr_markdown`` (a plan directory's ``pr.md``: the title on
    its first line, a blank line, the body), for the values that carry one."""

    pr_markdown: str

    @property
    def pr_title(self) -> str:
        return split_pr_markdown(self.pr_markdown)[0]

    @property
    def pr_body(self) -> str:
        return split_pr_markdown(self.pr_markdown)[1]


@dataclass(frozen=True)
class PlanContents(WithPrMarkdown):
    """A plan directory's three files in memory: the plan, the patch and the write-up (``pr.md``).
    What propose makes and ``write_plan_dir`` writes."""

    plan: Plan
    patch: str
    pr_markdown: str


@dataclass(frozen=True)
class PlanDir(PlanContents):
    """A plan directory read back from disk: its contents and where it is."""

    path: Path


def split_pr_markdown(text: str) -> tuple[str, str]:
    """``pr.md`` holds the title on its first line, then a blank line, then the body."""
    title, _, body = text.partition("\n")
    return title, body.lstrip("\n")


def write_plan_dir(path: Path, plan: Plan, patch: str, pr_markdown: str) -> None:
    """Write all three files or none."""
    check_plan_target(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BotError(f"{path}: cannot create the plan directory ({exc.strerror})") from None
    _replace_files(path, {"patch.diff": patch, "pr.md": pr_markdown, "plan.json": plan.to_json()})


def check_plan_target(path: Path) -> None:
    """Refuse, before any work, a plan directory path that is taken by something else."""
    if path.exists() and not path.is_dir():
        raise BotError(f"{path} exists and is not a directory; choose another --out")


def update_plan(path: Path, plan: Plan, *, pr_markdown: str | None = None) -> None:
    """Rewrite plan.json (and pr.md, when given) of an existing plan directory, both or none
    (``bot verify`` records its results in both)."""
    contents = {} if pr_markdown is None else {"pr.md": pr_markdown}
    _replace_files(path, {**contents, "plan.json": plan.to_json()})


def _replace_files(path: Path, contents: dict[str, str]) -> None:
    """Each file goes to a temporary name first; once all are written, each is renamed, in
    order (plan.json last: its presence means the directory is complete)."""
    staged: list[tuple[str, Path]] = []
    try:
        for name, text in contents.items():
            fd, tmp = tempfile.mkstemp(dir=path, prefix=f".{name}.")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            staged.append((tmp, path / name))
        for tmp, final in staged:
            os.replace(tmp, final)
    finally:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)


def read_plan_dir(path: Path) -> PlanDir:
    plan_file = path / "plan.json"
    if not plan_file.is_file():
        raise BotError(f"{path} is not a plan directory (no plan.json); run `bot propose` first")
    try:
        text = plan_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BotError(f"{plan_file}: unreadable plan ({exc.__class__.__name__})") from None
    data = jsonio.loads(text, str(plan_file))
    if not isinstance(data, dict):
        raise BotError(f"{plan_file}: a plan is a JSON object")
    plan = Plan.from_dict(data)
    patch = _read_text(path / "patch.diff")
    pr_markdown = _read_text(path / "pr.md")
    return PlanDir(path=path, plan=plan, patch=patch, pr_markdown=pr_markdown)


def _read_text(path: Path) -> str:
    """A plan file's text ("" when absent); binary or non-UTF-8 content is refused."""
    if not path.is_file():
        return ""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BotError(f"{path}: not UTF-8 text (a binary file?)") from None
    except OSError as exc:
        raise BotError(f"{path}: unreadable ({exc.__class__.__name__})") from None
    if "\0" in text:
        raise BotError(f"{path}: holds NUL bytes (a binary file?)")
    return text
