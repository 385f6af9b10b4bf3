"""Scratch worktrees: the bot edits and tests a detached copy, never the user's working tree."""

from __future__ import annotations

import fcntl
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path

import git

from bot.errors import BotError
from bot.fileio import held_lock
from bot.github.gitrepo import Repo


def open_repo(path: Path) -> git.Repo:
    try:
        return Repo(path)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise BotError(
            f"{path} is not a git checkout; the bot needs one to branch from "
            "(`bot fetch VERSION` makes one from a release)"
        ) from None


def head_commit(path: Path) -> str:
    repo = open_repo(path)
    try:
        return repo.head.commit.hexsha
    except ValueError:
        raise BotError(f"{path} has no commits") from None
    finally:
        repo.close()


@contextmanager
def scratch_worktree(
    repo_path: Path, commit: str, paths: Sequence[str] | None = None
) -> Iterator[Path]:
    """A detached worktree of ``repo_path`` at ``commit``, removed afterwards whatever happens.

    With ``paths``, only those (and the files at the top of the tree, where tool configuration
    lives) are checked out: a full checkout of vLLM is most of the cost of a proposal.
    """
    repo = open_repo(repo_path)
    parent = Path(tempfile.mkdtemp(prefix=WORKTREE_PREFIX))
    path = parent / "tree"
    owner = open(parent / OWNER_LOCK, "w")  # noqa: SIM115 - held until the worktree is gone
    fcntl.flock(owner, fcntl.LOCK_EX)
    try:
        with worktrees_lock(repo):
            _reap_abandoned(repo)
            if paths is None:
                repo.git.worktree("add", "--detach", "--quiet", str(path), commit)
            else:
                repo.git.worktree("add", "--detach", "--quiet", "--no-checkout", str(path), commit)
        if paths is not None:
            # Older releases lack some paths (vllm/models/ came in 0.20): check out the rest.
            present = repo.git.ls_tree("--name-only", commit, "--", *paths).splitlines()
            with Repo(path) as scratch:
                scratch.git.checkout(commit, "--", ":(glob)*", *present)
        yield path
    finally:
        with worktrees_lock(repo):
            with suppress(git.GitCommandError):
                repo.git.worktree("remove", "--force", str(path))
            shutil.rmtree(parent, ignore_errors=True)
            with suppress(git.GitCommandError):
                repo.git.worktree("prune")
        owner.close()
        repo.close()


WORKTREE_PREFIX = "bot-worktree-"
OWNER_LOCK = "owner.lock"
# A worktree left by a bot from before owner locks existed is taken as abandoned this long after
# it was made: no proposal or verification holds one for hours.
UNOWNED_AGE = 2 * 3600.0


def _reap_abandoned(repo: git.Repo) -> None:
    """Remove the scratch worktrees of ``repo`` whose bot process died (killed, or the machine
    stopped) before it could remove them: each live one holds the ``flock`` on its owner file,
    which the kernel drops with the process. Called under ``worktrees_lock``."""
    listed = repo.git.worktree("list", "--porcelain").splitlines()
    for line in listed:
        if not line.startswith("worktree "):
            continue
        path = Path(line.removeprefix("worktree "))
        parent = path.parent
        if path.name != "tree" or not parent.name.startswith(WORKTREE_PREFIX):
            continue
        if _abandoned(parent):
            with suppress(git.GitCommandError):
                repo.git.worktree("remove", "--force", str(path))
            shutil.rmtree(parent, ignore_errors=True)


def _abandoned(parent: Path) -> bool:
    try:
        owner = open(parent / OWNER_LOCK)  # noqa: SIM115 - closed below
    except FileNotFoundError:
        try:
            return time.time() - parent.stat().st_mtime > UNOWNED_AGE
        except FileNotFoundError:
            return False  # already gone: `worktree prune` drops its entry
    with owner:
        try:
            fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def worktrees_lock(repo: git.Repo) -> AbstractContextManager[None]:
    """Held while a worktree is added to or removed from ``repo``. A cached release tree is
    shared by every bot process on the machine, and git's worktree bookkeeping is not safe
    against itself: two ``worktree add`` pick the same ``.git/worktrees/<name>`` entry, and a
    ``worktree prune`` removes an entry another process is still creating."""
    return held_lock(Path(repo.common_dir) / "bot-worktrees.lock")


def diff_worktree(path: Path, paths: Sequence[str] = ()) -> str:
    """The worktree's changes to ``paths`` (default: all) against its HEAD, as a patch for
    ``git apply``. A partial checkout must name its paths: the rest would diff as deleted."""
    repo = Repo(path)
    try:
        new_files = repo.git.ls_files("--others", "--exclude-standard", "--", *paths)
        if new_files:  # files an edit created: recorded as intent-to-add, so they diff as new
            repo.git.add("--intent-to-add", "--", *new_files.splitlines())
        text = repo.git.diff(
            "HEAD",
            "--no-color",
            "--no-ext-diff",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            "--",
            *paths,
        )
    finally:
        repo.close()
    return text + "\n" if text else ""
