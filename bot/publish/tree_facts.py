"""Facts a body states about the tree, read at the plan's base commit from a git repository.

Raw blobs only (``git cat-file``, ``git grep`` on a commit): no work tree is checked out, so no
filter, hook or attribute of the tree runs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

from bot.publish.contrib_rules import RULE_FILES, ContributionRules, read_rules
from bot.subprocess_env import minimal_env

_TIMEOUT = 120
_EAGLE3 = "eagle[-_ ]?3"  # EAGLE-3, eagle3, SupportsEagle3; not the Eagle2.5-VL model


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env=minimal_env(),
        timeout=_TIMEOUT,
        check=False,
    )


def file_at(repo: Path, commit: str, path: str) -> str | None:
    done = _git(repo, "cat-file", "blob", f"{commit}:{path}")
    return done.stdout if done.returncode == 0 else None


def rules_at(repo: Path, commit: str) -> ContributionRules:
    """The contribution rules of the tree at ``commit`` (files it lacks read as absent)."""
    texts = {path: file_at(repo, commit, path) for path in RULE_FILES}
    return read_rules(texts.get)


def docs_naming(repo: Path, commit: str, names: Iterable[str]) -> tuple[str, ...] | None:
    """The pages under ``docs/`` at ``commit`` that speak of EAGLE-3 and name one of ``names``
    (a class or an architecture) as a whole word: the pages a change to those classes' EAGLE
    support may have to update. None when git cannot say (not a repository, no such commit)."""
    wanted = [n for n in dict.fromkeys(names) if n]
    if not wanted:
        return ()
    about = _git(repo, "grep", "-l", "-i", "-I", "-E", "-e", _EAGLE3, commit, "--", "docs/")
    if about.returncode not in (0, 1):
        return None
    pages = [line.split(":", 1)[1] for line in about.stdout.splitlines() if ":" in line]
    if not pages:
        return ()
    args = ["grep", "-l", "-w", "-F", "-I"]
    for name in wanted:
        args += ["-e", name]
    named = _git(repo, *args, commit, "--", *pages)
    if named.returncode not in (0, 1):
        return None
    return tuple(sorted(line.split(":", 1)[1] for line in named.stdout.splitlines() if ":" in line))
