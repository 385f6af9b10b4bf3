"""The git edge: build the fix commit and push it to the fork, via GitPython.

The bot works in its own bare repository (default ``home_dir()/work/<upstream slug>``). The
plan's base commit is fetched from the configured upstream (else the fork), never from a path
the plan names: the plan artifact is untrusted, and its ``repo_path`` is ignored here. The
commit is built with a private index file, so no working tree is ever checked out, and its
tree is handed to a check (:mod:`bot.confinement`) before anything is committed. The fork's
branch is only rewritten while every commit on it is the bot's own: once anyone else commits
there, the bot leaves it alone (Renovate's rule).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import git

from bot.base_tree import CommitTree
from bot.config import GitHubSettings, github_settings, home_dir
from bot.confinement import FileChange
from bot.errors import BotError
from bot.fileio import held_lock
from bot.github.identity import BOT_BRANCH
from bot.gitrepo import Repo
from bot.plan import Plan
from bot.recipes.base import BaseTree
from bot.redact import redact

FORK_REMOTE = "fork"
UPSTREAM_REMOTE = "upstream"
_SHA = re.compile(r"^[0-9a-f]{40}$")
# How much of a fork branch's history is fetched to tell whose it is: a group's branch holds a
# commit per member, and the commit it was built on must be reached.
_BRANCH_DEPTH = 64
_DAY = 24 * 3600


@dataclass(frozen=True)
class CommitInfo:
    branch: str
    sha: str  # what the fork's branch should point at
    base_commit: str
    reused: bool  # the fork already had an equivalent commit of ours
    human_edited: bool  # someone else committed to the branch; the bot will not push
    remote_sha: str | None  # the fork branch's tip when we looked (None: no such branch)


def default_work_dir(settings: GitHubSettings) -> Path:
    return home_dir() / "work" / settings.upstream.replace("/", "__")


@contextmanager
def work_repo_lock(work_dir: Path) -> Iterator[None]:
    """The work repository to one user at a time, across processes and threads (an ``flock``
    beside it, dropped by the kernel when its holder dies): its remotes, shallow history,
    ``FETCH_HEAD`` and the fork branches it reads are shared state, so two publishes at once
    (two CLI runs in one BOT_HOME, the dashboard's approvals in its thread pool) each failed
    on the other's half-done work."""
    work_dir.parent.mkdir(parents=True, exist_ok=True)
    with held_lock(work_dir.parent / f".{work_dir.name}.lock"):
        yield


def fork_url(settings: GitHubSettings) -> str:
    """``BOT_FORK_URL`` if set, else ``https://<web host>/<fork owner>/<upstream name>.git``."""
    override = os.environ.get("BOT_FORK_URL")
    if override:
        return _without_credentials(override, "BOT_FORK_URL")
    if not settings.fork_owner:
        raise BotError("no fork configured: set BOT_FORK_OWNER (or BOT_FORK_URL)")
    name = settings.upstream.split("/", 1)[1]
    return f"https://{_web_host(settings)}/{settings.fork_owner}/{name}.git"


def upstream_url(settings: GitHubSettings) -> str:
    """``BOT_UPSTREAM_URL`` if set, else ``https://<web host>/<upstream>.git``."""
    override = os.environ.get("BOT_UPSTREAM_URL")
    if override:
        return _without_credentials(override, "BOT_UPSTREAM_URL")
    return f"https://{_web_host(settings)}/{settings.upstream}.git"


def _without_credentials(url: str, name: str) -> str:
    """``url``, refused when it carries a user or password: the remote's URL is saved in the
    work repository's git config (and shown by git), where a token must never be."""
    parts = urlsplit(url)
    # ssh://git@host/... names an account, not a secret; over HTTP a user name may be a token.
    if parts.password or (parts.scheme.lower() in ("http", "https") and parts.username):
        raise BotError(
            f"{name} carries credentials in its URL; give it without them (the token comes "
            "from GITHUB_TOKEN, handed to git through its environment)"
        )
    return url


def _web_host(settings: GitHubSettings) -> str:
    api = urlsplit(settings.api_url)
    return "github.com" if api.hostname == "api.github.com" else api.netloc


TreeCheck = Callable[[list[FileChange]], None]


def prepare_branch(
    plan: Plan,
    patch: str,
    work_dir: Path | None = None,
    settings: GitHubSettings | None = None,
    *,
    message: str,
    check_tree: TreeCheck,
    steps: list[CommitStep] | None = None,
    author: tuple[str, str] | None = None,
) -> CommitInfo:
    """The commit the fork's ``plan.branch`` should carry: reused if already there, else new.

    ``check_tree`` sees every file the new tree changes against the base and raises to refuse;
    ``message`` is the commit message (built by the caller from validated fields). Safe to
    re-run: when the fork already has a bot commit with the same tree on the same base, that
    commit is returned and nothing new is created. With ``steps`` (a group plan), the branch
    is one commit per step instead, each step's changes checked by its own check, and
    together they must make the tree of ``patch``. ``author`` (name, e-mail) authors each new
    commit (the person who signs it off); ``settings``' identity commits it, and a branch is
    the bot's own while every commit on it down to its base was committed so.
    """
    settings = settings or github_settings()
    branch, base = _checked_branch(plan), _checked_base(plan)
    if not patch.strip():
        raise BotError("the plan has an empty patch; there is nothing to commit")
    repo = _work_repo(work_dir or default_work_dir(settings))
    with git_errors("reading the fork"):
        _set_remote(repo, FORK_REMOTE, fork_url(settings))
        _set_remote(repo, UPSTREAM_REMOTE, upstream_url(settings))
        _ensure_base(repo, base, settings)
        remote_sha = _fetch_fork_branch(repo, branch, settings)
    tree = _tree_with_patch(repo, base, patch)
    with CommitTree(Path(repo.git_dir), base) as base_tree:
        if steps is None:
            check_tree(tree_changes(repo, base, tree, base_tree))
            chain = [(tree, message)]
        else:
            chain = _step_trees(repo, base, steps, tree, base_tree)
    if remote_sha is not None:
        ours = _only_bot_commits(repo, remote_sha, settings)
        if not ours:
            return CommitInfo(branch, remote_sha, base, False, True, remote_sha)
        if _same_chain(repo, remote_sha, base, [t for t, _ in chain]):
            return CommitInfo(branch, remote_sha, base, True, False, remote_sha)
    sha = base
    for step_tree, step_message in chain:
        sha = _commit(repo, step_tree, sha, step_message, settings, author)
    return CommitInfo(branch, sha, base, False, False, remote_sha)


def base_files(
    plan: Plan, paths: tuple[str, ...], work_dir: Path, settings: GitHubSettings
) -> dict[str, str | None]:
    """The text of ``paths`` at the plan's base commit (fetched from the upstream, never from
    the plan's tree), None for a path the commit does not have."""
    base = _checked_base(plan)
    repo = _work_repo(work_dir)
    with git_errors("reading the upstream"):
        _set_remote(repo, FORK_REMOTE, fork_url(settings))
        _set_remote(repo, UPSTREAM_REMOTE, upstream_url(settings))
        _ensure_base(repo, base, settings)
    texts: dict[str, str | None] = {}
    for path in paths:
        try:
            blob = repo.commit(base).tree / path
            texts[path] = blob.data_stream.read().decode("utf-8", "replace")
        except KeyError:
            texts[path] = None
    return texts


@dataclass(frozen=True)
class CommitStep:
    """One commit of a group's branch: its patch (against the commit before it), its message
    and the check its changes must pass (the member's recipe rules)."""

    patch: str
    message: str
    check: TreeCheck


def _step_trees(
    repo: git.Repo, base: str, steps: list[CommitStep], whole: str, base_tree: BaseTree
) -> list[tuple[str, str]]:
    """Each step's tree, checked against the tree before it (``base_tree``: the plan's base,
    for the rules that scan it); together they must make exactly the tree of the whole patch
    (what was verified)."""
    chain: list[tuple[str, str]] = []
    previous = base
    for step in steps:
        if not step.patch.strip():
            raise BotError("a commit of the plan has an empty patch")
        tree = _tree_with_patch(repo, previous, step.patch)
        step.check(tree_changes(repo, previous, tree, base_tree))
        chain.append((tree, step.message))
        previous = tree
    if previous != whole:
        raise BotError("the members' commits do not add up to patch.diff; re-run `bot propose`")
    return chain


def _same_chain(repo: git.Repo, tip: str, base: str, trees: list[str]) -> bool:
    """Whether the fork's branch is exactly our chain of trees on ``base``, one commit each."""
    commit = repo.commit(tip)
    for tree in reversed(trees):
        if commit.tree.hexsha != tree or len(commit.parents) != 1:
            return False
        commit = commit.parents[0]
    return commit.hexsha == base


def push_branch(
    commit: CommitInfo, work_dir: Path | None = None, settings: GitHubSettings | None = None
) -> bool:
    """Point the fork's branch at ``commit.sha``. True if something was pushed.

    The push is guarded by ``--force-with-lease`` on the tip seen in :func:`prepare_branch`,
    so a commit someone pushed in between is never overwritten.
    """
    settings = settings or github_settings()
    if commit.human_edited or commit.remote_sha == commit.sha:
        return False
    repo = Repo(work_dir or default_work_dir(settings))
    lease = f"refs/heads/{commit.branch}:{commit.remote_sha or ''}"
    action = f"pushing {commit.branch} to the fork"
    with git_errors(f"reading the upstream's history down to the fork's for {action}"):
        _connect_to_fork(repo, commit.base_commit, settings)
    try:
        with git_errors(action), auth_env(repo, settings):
            repo.git.push(
                "--porcelain",
                f"--force-with-lease={lease}",
                FORK_REMOTE,
                f"{commit.sha}:refs/heads/{commit.branch}",
            )
    except BotError:
        # The push may have landed with only its answer lost (a dropped connection): look
        # again, and take the branch at our commit as pushed rather than failing the run.
        with git_errors(action), auth_env(repo, settings):
            now = repo.git.ls_remote(FORK_REMOTE, f"refs/heads/{commit.branch}").split()
        if now[:1] != [commit.sha]:
            raise
    return True


# --- steps --------------------------------------------------------------------------------


def _checked_branch(plan: Plan) -> str:
    if not plan.branch or not BOT_BRANCH.match(plan.branch) or ".." in plan.branch:
        raise BotError(f"the plan's branch {plan.branch!r} is not bot/<recipe>/<class-slug>")
    return plan.branch


def _checked_base(plan: Plan) -> str:
    if not _SHA.match(plan.base_commit or ""):
        raise BotError("the plan's base_commit is not a full commit sha")
    return plan.base_commit


def _work_repo(work_dir: Path) -> git.Repo:
    if (work_dir / "objects" / "info" / "alternates").exists():
        # Made by an older bot that borrowed objects from a plan's repo_path: start afresh.
        shutil.rmtree(work_dir)
    if (work_dir / "HEAD").is_file():
        return Repo(work_dir)
    work_dir.parent.mkdir(parents=True, exist_ok=True)
    return Repo.init(work_dir, bare=True)


def _ensure_base(repo: git.Repo, base: str, settings: GitHubSettings) -> None:
    """The base commit, fetched (shallow) from the upstream, else from the fork."""
    if _has_commit(repo, base):
        return
    with auth_env(repo, settings):
        for remote in (UPSTREAM_REMOTE, FORK_REMOTE):
            try:
                repo.git.fetch("--no-tags", "--depth=1", remote, base)
            except git.GitCommandError:
                continue
            if _has_commit(repo, base):
                return
    raise BotError(
        f"base commit {base[:12]} is in neither the upstream nor the fork; "
        "re-run `bot propose` on a current upstream checkout"
    )


def _connect_to_fork(repo: git.Repo, base: str, settings: GitHubSettings) -> None:
    """Make ``base``'s history here reach down to the fork's default branch.

    The base was fetched shallow (one commit). A push whose commits reach a shallow commit the
    fork's own branches do not reach is refused ("shallow update not allowed"; GitHub refuses
    it for a fork too, although a fork shares its network's objects), and a fork is usually
    behind its upstream. So, unless the fork's tip is the base or already in its history
    here, the upstream's history is fetched from a day before the fork's tip was made: the
    commits between the two, not the whole history."""
    with auth_env(repo, settings):
        listing = repo.git.ls_remote(FORK_REMOTE, "HEAD").split()
        if not listing or listing[0] == base:
            return  # an empty fork, or one at the base
        tip = listing[0]
        if not _has_commit(repo, tip):
            repo.git.fetch("--no-tags", "--depth=1", FORK_REMOTE, tip)
        if _is_ancestor(repo, tip, base):
            return
        since = repo.commit(tip).committed_date - _DAY
        try:
            repo.git.fetch("--no-tags", f"--shallow-since={since}", UPSTREAM_REMOTE, base)
        except git.GitCommandError:
            # "No commits selected": the base is older than the fork's tip, which has it.
            return


def _is_ancestor(repo: git.Repo, ancestor: str, descendant: str) -> bool:
    try:
        repo.git.merge_base("--is-ancestor", ancestor, descendant)
    except git.GitCommandError:
        return False
    return True


def tree_changes(
    repo: git.Repo, base: str, tree: str, base_tree: BaseTree | None = None
) -> list[FileChange]:
    """Every path ``tree`` changes against ``base``'s tree, with both blobs' bytes (and
    ``base_tree``, the whole base, for the checks that read more than one file)."""
    raw = repo.git.diff_tree("-r", "-z", "--no-renames", "--raw", base, tree)
    fields = raw.split("\0")
    changes = []
    for at in range(0, len(fields) - 1, 2):
        meta, path = fields[at], fields[at + 1]
        old_mode, new_mode, old_sha, new_sha, status = meta.lstrip(":").split()
        changes.append(
            FileChange(
                path=path,
                status=status[:1],
                old_mode=old_mode,
                new_mode=new_mode,
                before=_blob(repo, old_sha),
                after=_blob(repo, new_sha),
                base=base_tree,
            )
        )
    return changes


def _blob(repo: git.Repo, sha: str) -> bytes:
    if set(sha) == {"0"}:
        return b""
    return repo.odb.stream(bytes.fromhex(sha)).read()


def _has_commit(repo: git.Repo, sha: str) -> bool:
    try:
        repo.git.cat_file("-e", f"{sha}^{{commit}}")
    except git.GitCommandError:
        return False
    return True


def _set_remote(repo: git.Repo, name: str, url: str) -> None:
    if name in [r.name for r in repo.remotes]:
        if repo.remotes[name].url != url:
            repo.git.remote("set-url", name, url)
    else:
        repo.git.remote("add", name, url)


def _fetch_fork_branch(repo: git.Repo, branch: str, settings: GitHubSettings) -> str | None:
    with auth_env(repo, settings):
        listing = repo.git.ls_remote(FORK_REMOTE, f"refs/heads/{branch}").strip()
        if not listing:
            return None
        sha = listing.split()[0]
        if not _has_commit(repo, sha):
            repo.git.fetch(
                "--no-tags",
                f"--depth={_BRANCH_DEPTH + 1}",
                FORK_REMOTE,
                f"+refs/heads/{branch}:refs/fork/{branch}",
            )
    return sha


def _tree_with_patch(repo: git.Repo, base: str, patch: str) -> str:
    # Re-runs are common (every step is re-run safe), and rebuilding a 6k-file index costs a
    # second, so the resulting tree is remembered under a ref named by (base, patch).
    key = hashlib.sha256(f"{base}\0{patch}".encode()).hexdigest()
    cache_ref = f"refs/bot/trees/{key}"
    try:
        return repo.git.rev_parse("--verify", "--quiet", f"{cache_ref}^{{tree}}")
    except git.GitCommandError:
        tree = _apply_to_base(repo, base, patch)
        repo.git.update_ref(cache_ref, tree)
        return tree


def _apply_to_base(repo: git.Repo, base: str, patch: str) -> str:
    # A private index: the patch is applied to base's tree without any checkout.
    with tempfile.TemporaryDirectory(prefix="bot-index-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        with repo.git.custom_environment(**env):
            repo.git.read_tree(base)
            try:
                with _stdin(patch, scratch) as stdin:
                    repo.git.apply("--cached", "-", istream=stdin)
            except git.GitCommandError as exc:
                detail = redact(str(exc.stderr or "").strip()).splitlines()
                reason = detail[0] if detail else "git apply failed"
                raise BotError(f"the patch does not apply at {base[:12]}: {reason}") from None
            return repo.git.write_tree()


def _stdin(text: str, scratch: str) -> BinaryIO:
    path = Path(scratch) / "stdin"
    path.write_text(text, encoding="utf-8")
    return open(path, "rb")  # noqa: SIM115 - callers use it as a context manager


def _only_bot_commits(repo: git.Repo, tip: str, settings: GitHubSettings) -> bool:
    """Whether the fork's branch is the bot's own: from its tip, one or more commits that we
    committed (an approving maintainer may have authored them), one parent each, down to the
    first commit that is not ours, the upstream commit the branch was built on (any base: the
    plan's, or an older one when the upstream has moved since). A commit of anyone else's on
    top, or a merge, makes it theirs; history that ends before a commit not ours is reached is
    not taken as ours either."""
    commit = repo.commit(tip)
    for depth in range(_BRANCH_DEPTH):
        if not _made_by(commit, settings.git_email):
            return depth > 0
        if len(commit.parents) != 1:
            return False  # a merge, or the end of the history we fetched
        commit = commit.parents[0]
    return False


def _made_by(commit: git.Commit, email: str) -> bool:
    return commit.committer.email == email


def _commit(
    repo: git.Repo,
    tree: str,
    base: str,
    message: str,
    settings: GitHubSettings,
    author: tuple[str, str] | None = None,
) -> str:
    author_name, author_email = author or (settings.git_name, settings.git_email)
    identity = {
        "GIT_AUTHOR_NAME": author_name,
        "GIT_AUTHOR_EMAIL": author_email,
        "GIT_COMMITTER_NAME": settings.git_name,
        "GIT_COMMITTER_EMAIL": settings.git_email,
    }
    with (
        tempfile.TemporaryDirectory(prefix="bot-msg-") as scratch,
        repo.git.custom_environment(**identity),
        _stdin(message, scratch) as stdin,
    ):
        return repo.git.commit_tree(tree, "-p", base, "-F", "-", istream=stdin)


@contextmanager
def auth_env(repo: git.Repo, settings: GitHubSettings) -> Iterator[None]:
    """Hand git the token through its environment: never argv, never a config file."""
    url = repo.remotes[FORK_REMOTE].url
    token = settings.token
    env = {"GIT_TERMINAL_PROMPT": "0"}
    if token and url.startswith("https://"):
        parts = urlsplit(url)
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env |= {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": f"http.https://{parts.netloc}/.extraheader",
            "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {basic}",
        }
    with repo.git.custom_environment(**env):
        yield


@contextmanager
def git_errors(action: str) -> Iterator[None]:
    try:
        yield
    except git.GitCommandError as exc:
        stderr = redact(str(exc.stderr or "")).strip().splitlines()
        detail = stderr[-1].strip() if stderr else f"exit {exc.status}"
        # A push's own reason ("[remote rejected] (shallow update not allowed)") is on stdout
        # with --porcelain; stderr only says that it failed.
        refused = [line for line in str(exc.stdout or "").splitlines() if line.startswith("!")]
        if refused:
            detail = redact(refused[0].split("\t")[-1].strip())
        raise BotError(f"{action} failed: {detail[:200]}") from None
