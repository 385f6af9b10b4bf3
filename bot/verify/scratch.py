"""Applying a plan's patch to a scratch worktree, after checking which files it touches."""

from __future__ import annotations

from pathlib import Path

import git

from bot.errors import BotError
from bot.gitrepo import Repo
from bot.tree.ci_steps import is_ci_step_file
from bot.tree.fetch import release_tree
from bot.tree.layout import TEST_AREAS
from bot.tree.worktree import open_repo

# The fixes the bot makes edit Python files of vLLM and its tests (and a CI step's YAML, to
# select the test); a patch reaching anywhere else did not come from the bot and is refused
# before anything runs.
_ALLOWED_PREFIXES = ("vllm/", "tests/")


def resolve_repo(repo_path: str, vllm_version: str | None, base_commit: str) -> Path:
    """The checkout holding ``base_commit``: the plan's own, or the cached release tree
    (in CI the plan was made on another machine, so its path does not exist here)."""
    candidates = [Path(repo_path)] if repo_path else []
    if vllm_version and not (candidates and (candidates[0] / ".git").exists()):
        candidates.append(release_tree(vllm_version))
    for path in candidates:
        if (path / ".git").exists() and _has_commit(path, base_commit):
            return path
    raise BotError(
        f"no checkout holds the plan's base commit {base_commit[:12] or '(none)'} "
        f"(repo_path {repo_path or '(none)'}, vLLM {vllm_version or 'unknown'})"
    )


def _has_commit(path: Path, commit: str) -> bool:
    if not commit:
        return False
    repo = open_repo(path)
    try:
        repo.git.cat_file("-e", f"{commit}^{{commit}}")
        return True
    except git.GitCommandError:
        return False
    finally:
        repo.close()


def touched_files(tree: Path, patch_file: Path) -> list[str]:
    """The paths the patch changes; refuses renames and anything outside vllm/ and tests/."""
    repo = Repo(tree)
    try:
        numstat = repo.git.apply("--numstat", str(patch_file))
    except git.GitCommandError as exc:
        raise BotError(f"the patch is not a valid git patch: {_first_line(exc)}") from None
    finally:
        repo.close()
    paths = [line.split("\t", 2)[2] for line in numstat.splitlines() if line.count("\t") >= 2]
    if not paths:
        raise BotError("the patch changes no file")
    for path in paths:
        python = path.startswith(_ALLOWED_PREFIXES) and path.endswith(".py")
        if " => " in path or not (python or is_ci_step_file(path)):
            raise BotError(
                f"the patch touches {path[:200]!r}: only .py files under vllm/, tests/ and "
                f"the CI steps' {TEST_AREAS}/*.yaml"
            )
    return paths


def apply_patch(
    tree: Path, patch_file: Path, *, only: str | None = None, reverse: bool = False
) -> str | None:
    """Apply the patch (or, with ``only="tests/*"``, the part of it under tests/; with
    ``reverse``, take it back); None on success, else git's reason in one line."""
    options = ["--whitespace=nowarn"]
    if only:
        options.append(f"--include={only}")
    if reverse:
        options.append("--reverse")
    repo = Repo(tree)
    try:
        repo.git.apply(*options, str(patch_file))
        return None
    except git.GitCommandError as exc:
        return _first_line(exc)
    finally:
        repo.close()


def _first_line(exc: git.GitCommandError) -> str:
    text = str(exc.stderr or exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[0] if lines else "git apply failed")[:300]
