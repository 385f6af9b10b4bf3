"""The plan directory: the handoff between the unprivileged and the privileged half.

``bot propose`` writes it (no token needed); ``bot verify`` adds results to it; ``bot publish``
reads it and talks to GitHub. Files:

- ``plan.json``: the :class:`Plan` below, as JSON;
- ``patch.diff``: a ``git apply``-able patch at ``base_commit`` (empty when there is nothing to do);
- ``pr.md``: the PR title on the first line, a blank line, then the body.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bot import jsonio
from bot.errors import BotError
from bot.fileio import write_atomic
from bot.publish.duplicates import DuplicateSearch
from bot.verify.verification import Verification

PLAN_SCHEMA = 2

# What a plan can say about itself.
READY = "ready"  # a patch to publish
NOTHING_TO_FIX = "nothing-to-fix"  # already fixed, or not an issue of a known class
NEEDS_INFO = "needs-info"  # triage lacked confidence; `questions` says what is missing
NEEDS_HUMAN = "needs-human"  # a real gap the bot will not patch; `reason` lists the blockers
PLAN_STATUSES = (READY, NOTHING_TO_FIX, NEEDS_INFO, NEEDS_HUMAN)


@dataclass(frozen=True)
class Member:
    """One class a plan fixes. A single-class plan is a group of one; a group plan (one branch,
    one PR) has a member per class, each with its own fingerprint, so a class already in any PR
    is recognised whichever group it was published in.

    ``patch`` is this member's commit on the group's branch (applied in order on the base
    commit, the members' patches add up to patch.diff); empty in a group of one, whose one
    commit is patch.diff. ``issues`` are the triaged issues the member resolves (each gets the
    sticky comment pointing at the PR). ``resolves`` are the keys (recipe, class, path) of the
    findings the member's fix makes disappear, which verify's re-scan checks.
    """

    class_name: str
    recipe: str
    fingerprint: str
    variant: str | None = None
    finding: dict[str, Any] = field(default_factory=dict)
    registry_entry: dict[str, Any] | None = None
    tests: dict[str, list[str]] = field(default_factory=lambda: {"gpu": [], "cpu": []})
    edits: list[dict[str, Any]] = field(default_factory=list)
    issues: list[int] = field(default_factory=list)
    title: str = ""
    reason: str = ""
    issue_comment: str | None = None
    patch: str = ""
    resolves: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: object) -> Member:
        if not isinstance(data, dict):
            raise BotError("plan.json: each of `members` must be an object")
        member = cls(**jsonio.checked_fields(cls, data, "plan.json: members"))
        for number in member.issues:
            _issue_number(number, "plan.json: members: `issues`")
        return member


@dataclass
class Plan:
    status: str
    reason: str
    recipe: str | None = None
    class_name: str | None = None
    repo_path: str = ""
    base_commit: str = ""
    vllm_version: str | None = None
    upstream: str = "vllm-project/vllm"
    issue_number: int | None = None
    issue_title: str | None = None
    finding: dict[str, Any] | None = None
    triage: dict[str, Any] | None = None
    edits: list[dict[str, Any]] = field(default_factory=list)
    registry_entry: dict[str, Any] | None = None
    tests: dict[str, list[str]] = field(default_factory=lambda: {"gpu": [], "cpu": []})
    branch: str | None = None
    fingerprint: str | None = None
    title: str | None = None  # the commit's title line, also the PR's (pr.md starts with it)
    issue_comment: str | None = None  # the recipe's words for the sticky issue comment
    questions: list[str] = field(default_factory=list)
    verification: Verification | None = None  # what `bot verify` recorded
    group: str | None = None  # a group plan's key (recipe/shape), None for a single class
    members: list[Member] = field(default_factory=list)
    resolves: list[dict[str, str]] = field(default_factory=list)  # as Member.resolves
    # AGENTS.md's duplicate-work search as propose (or the CLI's publish) ran it; the body
    # quotes it, publish runs it again (bot/publish/duplicates.py). None: not run.
    duplicate_search: DuplicateSearch | None = None
    schema: int = PLAN_SCHEMA

    def __post_init__(self) -> None:
        # plan.json before groups (schema 1) had no members: a ready single-class plan is a
        # group of one, its member read from the plan's own fields.
        single = self.group is None and self.status == READY
        if single and not self.members and self.recipe and self.class_name and self.fingerprint:
            self.members = [self.single_member()]

    def single_member(self) -> Member:
        """The member a single-class plan's own fields describe."""
        variant = (self.fingerprint or "").rsplit(":", 1)[0].partition("@")[2] or None
        return Member(
            class_name=str(self.class_name),
            recipe=str(self.recipe),
            fingerprint=str(self.fingerprint),
            variant=variant,
            finding=dict(self.finding or {}),
            registry_entry=self.registry_entry,
            tests=self.tests,
            edits=self.edits,
            issues=[self.issue_number] if self.issue_number else [],
            title=self.title or "",
            reason=self.reason,
            issue_comment=self.issue_comment,
            resolves=self.resolves,
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
        data = asdict(self)
        data["verification"] = self.verification.to_json() if self.verification else None
        search = self.duplicate_search
        data["duplicate_search"] = search.to_json() if search is not None else None
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=True) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        if data.get("status") not in PLAN_STATUSES:
            raise BotError(f"plan.json has an unknown status: {data.get('status')!r}")
        members = data.get("members", [])
        if not isinstance(members, list):
            raise BotError("plan.json: `members` must be a list")
        typed = ("members", "verification", "duplicate_search")
        plain = {k: v for k, v in data.items() if k not in typed}
        rest = jsonio.checked_fields(cls, plain, "plan.json")
        if rest.get("issue_number") is not None:
            _issue_number(rest["issue_number"], "plan.json: `issue_number`")
        search = data.get("duplicate_search")
        rest["duplicate_search"] = (
            None
            if search is None
            else DuplicateSearch.from_json(search, "plan.json: `duplicate_search`")
        )
        checked = [Member.from_dict(m) for m in members]
        recorded = data.get("verification")
        rest["verification"] = None if recorded is None else Verification.from_json(recorded)
        # A single-class plan's member is always its own fields, whatever the file lists.
        return cls(**rest, members=checked if rest.get("group") is not None else [])


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
    """Write all three files or none: each goes to a temporary name first, then is renamed."""
    check_plan_target(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BotError(f"{path}: cannot create the plan directory ({exc.strerror})") from None
    contents = {"patch.diff": patch, "pr.md": pr_markdown, "plan.json": plan.to_json()}
    staged: list[tuple[str, Path]] = []
    try:
        for name, text in contents.items():
            fd, tmp = tempfile.mkstemp(dir=path, prefix=f".{name}.")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            staged.append((tmp, path / name))
        # plan.json goes last: its presence means the directory is complete.
        for tmp, final in staged:
            os.replace(tmp, final)
    finally:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)


def check_plan_target(path: Path) -> None:
    """Refuse, before any work, a plan directory path that is taken by something else."""
    if path.exists() and not path.is_dir():
        raise BotError(f"{path} exists and is not a directory; choose another --out")


def update_plan(path: Path, plan: Plan) -> None:
    write_atomic(path / "plan.json", plan.to_json())


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
