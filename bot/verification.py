"""What ``bot verify`` found, as one frozen value: the local checks, the GPU run, the verdict.

Verify makes it; plan.json carries it as JSON (:meth:`Verification.to_json`); the write-up,
the contribution section, the evidence gate and ``bot publish`` read it back through
:meth:`Verification.from_json`, which refuses a malformed record with a one-line error instead
of letting each reader guess. plan.json comes from the unprivileged half, so the parse is the
trust boundary: a record that parses is well-typed, which says nothing about whether it is
true (publish still re-derives what it acts on, e.g. the patch hash and the GPU run).

A value below the plan and outside ``bot/verify/``: plan.json holds it, and publish reads it
without the modules that run checks.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from bot.errors import BotError
from bot.jsonio import checked_fields

WHERE = "plan.json: `verification`"


@dataclass(frozen=True)
class Check:
    """One check's outcome, as verify records it and the write-up, the gate and publish read it."""

    name: str
    passed: bool | None  # None: not checked, neither passed nor failed
    detail: str
    log_excerpt: str = ""  # what the check ran printed, for the write-up's details
    # Typed figures of what the check ran (the engine check: each run's outcome and counts).
    record: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if self.record is None:
            del data["record"]
        return data


@dataclass(frozen=True)
class GpuRun:
    """The GPU test: where it ran (``local``, ``dispatch`` or ``skip``) and how it ended
    (``success``, ``failure``, ``timed_out``, ``skipped``, ``not_run``, ...). A dispatched run
    also names its workflow run and the commit it tested; ``tests`` are its JUnit counts."""

    mode: str
    conclusion: str
    log_excerpt: str = ""
    run_url: str | None = None
    run_id: int | None = None
    request_id: str | None = None
    repository: str | None = None
    sha: str | None = None
    tests: dict[str, int] | None = None
    # The run after the patch and, when asked for, before it: a workflow run's conclusion,
    # address and id (dispatch), or the local pytest run's counts (local).
    after: dict[str, Any] | None = None
    before: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: object) -> GpuRun:
        where = f"{WHERE}.gpu"
        if not isinstance(data, dict):
            raise BotError(f"{where} must be an object")
        if "mode" not in data or "conclusion" not in data:
            raise BotError(f"{where} must say its mode and conclusion")
        return cls(**checked_fields(cls, data, where))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        kept = ("mode", "conclusion", "log_excerpt")
        return {k: v for k, v in data.items() if k in kept or v is not None}


@dataclass(frozen=True)
class Verification:
    """``passed``: every local check passed and the GPU test succeeded. ``local_passed``: no
    local check failed (one not checked is not a failure). ``patch_hash`` names the patch the
    checks ran on; publish refuses any other."""

    passed: bool
    local_passed: bool
    message: str
    checks: tuple[Check, ...] = ()
    gpu: GpuRun | None = None
    finished_at: str | None = None
    patch_hash: str | None = None
    # Who ran `bot verify`: the submitter's git identity ("Name <email>") when configured,
    # "GitHub Actions run N of owner/repo" in Actions; None when nothing named them.
    ran_by: str | None = None

    @classmethod
    def from_json(cls, data: object) -> Verification:
        """The record plan.json holds, checked field by field; a BotError if malformed."""
        if not isinstance(data, dict):
            raise BotError(f"{WHERE} must be an object")
        checks = data.get("checks", [])
        if not isinstance(checks, list):
            raise BotError(f"{WHERE}: `checks` must be a list")
        gpu = data.get("gpu")
        plain = {k: v for k, v in data.items() if k not in ("checks", "gpu")}
        for required in ("passed", "local_passed", "message"):
            if required not in plain:
                raise BotError(f"{WHERE} has no `{required}`")
        return cls(
            **checked_fields(cls, plain, WHERE),
            checks=tuple(_check_from_json(c) for c in checks),
            gpu=None if gpu is None else GpuRun.from_json(gpu),
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "passed": self.passed,
            "local_passed": self.local_passed,
            "message": self.message,
            "checks": [c.to_json() for c in self.checks],
        }
        if self.gpu is not None:
            data["gpu"] = self.gpu.to_json()
        if self.finished_at is not None:
            data["finished_at"] = self.finished_at
        if self.patch_hash is not None:
            data["patch_hash"] = self.patch_hash
        if self.ran_by is not None:
            data["ran_by"] = self.ran_by
        return data

    @property
    def approvable(self) -> bool:
        """What a maintainer may approve for publishing: no local check failed (the recipe's
        required evidence among them) and no GPU run failed. A GPU run still to come does not
        hold a plan back: it needs the branch that publishing pushes, and until GitHub
        confirms it passed the PR stays a draft."""
        gpu_ok = self.gpu is None or self.gpu.conclusion in ("success", "skipped")
        return self.local_passed and gpu_ok

    def check(self, name: str) -> Check | None:
        """The first recorded check called ``name``."""
        return next((c for c in self.checks if c.name == name), None)

    def check_passed(self, name: str) -> bool:
        return any(c.name == name and c.passed is True for c in self.checks)


def runner_identity() -> str | None:
    """Who is running ``bot verify`` now, as the record names them (see ``ran_by``): the
    Actions run; else the submitter's identity as publishing takes it (``BOT_SUBMITTER_NAME``
    and ``_EMAIL``); else the identity git commits with here (``user.name``, ``user.email``),
    so that a submitter who verifies before setting the bot's variables is still named."""
    if os.environ.get("GITHUB_ACTIONS") == "true":
        run, repo = os.environ.get("GITHUB_RUN_ID", ""), os.environ.get("GITHUB_REPOSITORY", "")
        if run.isdigit() and repo:
            return f"GitHub Actions run {run} of {repo}"
        return "GitHub Actions"
    name = (os.environ.get("BOT_SUBMITTER_NAME") or "").strip()
    email = (os.environ.get("BOT_SUBMITTER_EMAIL") or "").strip()
    if not name and not email:
        name, email = _git_config("user.name"), _git_config("user.email")
    return f"{name} <{email}>" if name and email else None


# Where git looks for its configuration: passed on to the one git that reads it, which
# otherwise gets the bot's minimal environment (bot.gitrepo).
_GIT_CONFIG_LOCATION = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM")


def _git_config(key: str) -> str:
    """A value of git's own configuration as ``git config --get`` resolves it, or ""."""
    import git

    from bot.gitrepo import MinimalEnvGit

    where = {n: os.environ[n] for n in _GIT_CONFIG_LOCATION if n in os.environ}
    try:
        return str(MinimalEnvGit().config("--get", key, env=where)).strip()
    except (git.GitCommandError, git.GitCommandNotFound):
        return ""


def _check_from_json(data: object) -> Check:
    where = f"{WHERE}: each of `checks`"
    if not isinstance(data, dict):
        raise BotError(f"{where} must be an object")
    for required in ("name", "passed", "detail"):
        if required not in data:
            raise BotError(f"{where} must have `{required}`")
    return Check(**checked_fields(Check, data, where))
