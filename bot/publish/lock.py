"""One run at a time between "count the bot's PRs" and "open a PR": a lock branch on the fork.

Why a lock, and why this one. The caps are counted from GitHub, so two runs that count at the
same moment both see room and both open a PR (check-then-act). The count and the create must
be serialised across machines, and the only thing every run shares is GitHub:

* A GitHub Actions ``concurrency`` group is not a lock: it cancels older *pending* jobs.
* "Open, then recount and close our own PR if over the cap" opens PRs on the upstream that
  are then closed: notifications, CI runs, a cross-reference on the issue, and a closed PR
  that later runs would read as "a maintainer said no".
* A ref created only if absent is a compare-and-swap GitHub itself performs. The bot pushes
  a fresh commit to ``refs/heads/bot-publish-lock`` with ``--force-with-lease=<ref>:`` (an
  empty lease: the ref must not exist). receive-pack applies the update in a ref transaction
  that checks the old value, so of several runs pushing at once exactly one succeeds; the
  others are refused without effect. This is the same atomic "create ref, fail if it
  exists" as the REST create-ref endpoint, and it uses the push access the bot already has.

A holder releases the lock by deleting the ref with a lease on its own commit, so it can
never delete someone else's. A holder killed while holding it leaves the ref behind; the
lock commit's committer date says when it was taken, and a lock older than
``BOT_PUBLISH_LOCK_TTL`` seconds (default 600; it is held for a count and one create
request) is broken, again with a lease on the stale commit, so two runs cannot both break it
and both proceed. An unclear push (the connection dropped) is settled by reading the ref:
if it names our commit, we hold the lock.

A crashed holder need not block for the whole TTL. The lock commit's message records who holds
it: the plan's fingerprint, the host, the pid and that process's start time. Before waiting, a
run breaks the lock (with the same lease) when

* the holder published the same plan (same fingerprint): a rerun after a crash. Even if that
  run were still alive, both would create a PR from the same head branch, which GitHub allows
  only once (the second is adopted), and one plan opens one PR, so the caps still hold;
* the holder ran on this host and its process is gone (or the pid now names a process that
  started at another time). Actions runners are separate machines, where no such check is
  possible: there the TTL stays the bound.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import git

from bot.config import GitHubSettings
from bot.errors import BotError
from bot.github.git import FORK_REMOTE, auth_env, git_errors
from bot.gitrepo import Repo

LOCK_BRANCH = "bot-publish-lock"
_LOCK_REF = f"refs/heads/{LOCK_BRANCH}"
_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git knows it without storing it
_POLL_SECONDS = 1.0


def lock_ttl() -> float:
    text = os.environ.get("BOT_PUBLISH_LOCK_TTL", "600").strip()
    try:
        return float(text)
    except ValueError:
        raise BotError(
            f"BOT_PUBLISH_LOCK_TTL must be a number of seconds, not {text[:20]!r}"
        ) from None


@contextmanager
def fork_lock(
    work_dir: Path,
    settings: GitHubSettings,
    *,
    may_wait: Callable[[float], bool],
    ttl: float | None = None,
    fingerprint: str = "",
) -> Iterator[bool]:
    """Hold the fork's publish lock for the ``with`` body; yields False if it stayed taken.

    ``may_wait(seconds)`` is asked before every pause and answers False once the run's wait
    budget (``BOT_GITHUB_MAX_WAIT``) is spent, so waiting for the lock is bounded too.
    """
    ttl = lock_ttl() if ttl is None else ttl
    repo = Repo(work_dir)
    mine = _lock_commit(repo, settings, fingerprint)
    held = False
    unexplained = 0  # refused although nobody holds the lock: a push problem, not a lock
    while not held:
        if _push(repo, settings, f"--force-with-lease={_LOCK_REF}:", f"{mine}:{_LOCK_REF}"):
            held = True
            break
        holder = _holder(repo, settings)
        if holder == mine:  # our push landed; only its answer was lost
            held = True
            break
        if holder is None:
            unexplained += 1
            if unexplained >= 3:
                raise BotError("taking the fork's publish lock failed: the push was refused")
            continue
        # A lock dated in the future (a skewed clock, or planted) must expire too: by |age|.
        age, note = _age_and_note(repo, settings, holder)
        if abs(age) > ttl or _abandoned(note, fingerprint):
            _push(repo, settings, f"--force-with-lease={_LOCK_REF}:{holder}", f":{_LOCK_REF}")
            continue
        if not may_wait(_POLL_SECONDS):
            break
        time.sleep(_POLL_SECONDS)
    try:
        yield held
    finally:
        if held:
            # A failed release leaves the lock to expire after its TTL; the PR is opened
            # either way, so this is not an error of the run.
            _push(repo, settings, f"--force-with-lease={_LOCK_REF}:{mine}", f":{_LOCK_REF}")


def _lock_commit(repo: Repo, settings: GitHubSettings, fingerprint: str = "") -> str:
    identity = {
        "GIT_AUTHOR_NAME": settings.git_name,
        "GIT_AUTHOR_EMAIL": settings.git_email,
        "GIT_COMMITTER_NAME": settings.git_name,
        "GIT_COMMITTER_EMAIL": settings.git_email,
    }
    note = "\n".join(
        [
            f"bot publish lock {time.time_ns()}",
            "",
            f"host: {socket.gethostname()[:60]}",
            f"pid: {os.getpid()}",
            f"started: {_started(os.getpid())}",
            f"fingerprint: {fingerprint}",
        ]
    )
    with git_errors("preparing the publish lock"), repo.git.custom_environment(**identity):
        return repo.git.commit_tree(_EMPTY_TREE, "-m", note)


def _push(repo: Repo, settings: GitHubSettings, lease: str, refspec: str) -> bool:
    """True when the push was accepted; False when refused or its answer was lost."""
    try:
        with auth_env(repo, settings):
            repo.git.push("--porcelain", lease, FORK_REMOTE, refspec)
    except git.GitCommandError:
        return False
    return True


def _holder(repo: Repo, settings: GitHubSettings) -> str | None:
    with git_errors("reading the fork's publish lock"), auth_env(repo, settings):
        line = repo.git.ls_remote(FORK_REMOTE, _LOCK_REF).strip()
    return line.split()[0] if line else None


def _age(repo: Repo, settings: GitHubSettings, sha: str) -> float:
    return _age_and_note(repo, settings, sha)[0]


def _age_and_note(repo: Repo, settings: GitHubSettings, sha: str) -> tuple[float, dict[str, str]]:
    """The lock commit's age in seconds and its holder's note (empty when it changed hands)."""
    try:
        with auth_env(repo, settings):
            repo.git.fetch("--no-tags", FORK_REMOTE, _LOCK_REF)
    except git.GitCommandError:
        # The holder may release the lock between our look and this fetch: then it is free,
        # and the next round takes it. Any other failure is said as one line.
        if _holder(repo, settings) != sha:
            return 0.0, {}
        with git_errors("reading the fork's publish lock"), auth_env(repo, settings):
            repo.git.fetch("--no-tags", FORK_REMOTE, _LOCK_REF)
    with git_errors("reading the fork's publish lock"):
        fetched = repo.commit(repo.git.rev_parse("FETCH_HEAD"))
    if fetched.hexsha != sha:
        return 0.0, {}  # taken again meanwhile: fresh
    return time.time() - fetched.committed_date, _note(str(fetched.message))


def _note(message: str) -> dict[str, str]:
    fields = {}
    for line in message.splitlines()[2:]:
        key, sep, value = line.partition(": ")
        if sep:
            fields[key] = value.strip()
    return fields


def _abandoned(note: dict[str, str], fingerprint: str) -> bool:
    """Whether the holder described by ``note`` can be taken as gone (module docstring)."""
    if fingerprint and note.get("fingerprint") == fingerprint:
        return True
    if note.get("host") != socket.gethostname()[:60]:
        return False
    pid, recorded = note.get("pid", ""), note.get("started", "")
    if not pid.isdigit() or int(pid) == os.getpid() or not recorded or not _started(os.getpid()):
        return False  # no /proc here (or then): the TTL decides
    started = _started(int(pid))
    return started != recorded  # gone, or the pid now names a later process


def _started(pid: int) -> str:
    """The process's start time (clock ticks since boot, from /proc), "" when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name may hold spaces and parentheses: count fields after its last ")".
    return stat.rpartition(")")[2].split()[19]
