"""The fork's publish lock against a real bare repository: the race where the holder releases
the lock between a waiting run's look (ls-remote) and its fetch of the lock commit."""

from __future__ import annotations

from pathlib import Path

import git

from bot.config import github_settings
from bot.git import FORK_REMOTE
from bot.gitrepo import Repo
from bot.publish_lock import _LOCK_REF, _age, _lock_commit


def _work_repo(tmp_path: Path) -> tuple[Repo, git.Repo]:
    fork = git.Repo.init(tmp_path / "fork.git", bare=True)
    git.Repo.init(tmp_path / "work")
    repo = Repo(tmp_path / "work")
    repo.create_remote(FORK_REMOTE, str(tmp_path / "fork.git"))
    return repo, fork


def test_a_lock_released_before_the_fetch_reads_as_free(tmp_path):
    repo, _fork = _work_repo(tmp_path)
    settings = github_settings()
    holder = _lock_commit(repo, settings)  # seen by ls-remote, gone by the time we fetch
    assert _age(repo, settings, holder) == 0.0


def test_a_held_lock_has_its_commits_age(tmp_path):
    repo, fork = _work_repo(tmp_path)
    settings = github_settings()
    holder = _lock_commit(repo, settings)
    repo.git.push(FORK_REMOTE, f"{holder}:{_LOCK_REF}")
    assert fork.git.rev_parse(_LOCK_REF) == holder
    assert 0.0 <= _age(repo, settings, holder) < 600.0
