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

from bot.errors import BotError
from bot.fileio import write_atomic

PLAN_SCHEMA = 1

# What a plan can say about itself.
READY = "ready"  # a patch to publish
NOTHING_TO_FIX = "nothing-to-fix"  # already fixed, or not an issue of a known class
NEEDS_INFO = "needs-info"  # triage lacked confidence; `questions` says what is missing
PLAN_STATUSES = (READY, NOTHING_TO_FIX, NEEDS_INFO)


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
    verification: dict[str, Any] | None = None
    schema: int = PLAN_SCHEMA

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True, ensure_ascii=True) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - known
        if unknown:
            raise BotError(f"plan.json has unknown fields: {', '.join(sorted(unknown))}")
        if data.get("status") not in PLAN_STATUSES:
            raise BotError(f"plan.json has an unknown status: {data.get('status')!r}")
        return cls(**data)


@dataclass
class PlanDir:
    path: Path
    plan: Plan
    patch: str
    pr_markdown: str

    @property
    def pr_title(self) -> str:
        return split_pr_markdown(self.pr_markdown)[0]

    @property
    def pr_body(self) -> str:
        return split_pr_markdown(self.pr_markdown)[1]


def split_pr_markdown(text: str) -> tuple[str, str]:
    """``pr.md`` holds the title on its first line, then a blank line, then the body."""
    title, _, body = text.partition("\n")
    return title, body.lstrip("\n")


def write_plan_dir(path: Path, plan: Plan, patch: str, pr_markdown: str) -> None:
    """Write all three files or none: each goes to a temporary name first, then is renamed."""
    path.mkdir(parents=True, exist_ok=True)
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


def update_plan(path: Path, plan: Plan) -> None:
    write_atomic(path / "plan.json", plan.to_json())


def read_plan_dir(path: Path) -> PlanDir:
    plan_file = path / "plan.json"
    if not plan_file.is_file():
        raise BotError(f"{path} is not a plan directory (no plan.json); run `bot propose` first")
    try:
        data = json.loads(plan_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BotError(f"{plan_file}: unreadable plan ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise BotError(f"{plan_file}: a plan is a JSON object")
    plan = Plan.from_dict(data)
    patch = _read_optional(path / "patch.diff")
    pr_markdown = _read_optional(path / "pr.md")
    return PlanDir(path=path, plan=plan, patch=patch, pr_markdown=pr_markdown)


def _read_optional(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""
