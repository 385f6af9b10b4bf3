"""The fork's publish lock against a real bare repository: the race where the holder releases
the lock between a waiting run's look (ls-remote) and its fetch of the lock commit."""

from __future__ import annotations

import os
from pathlib import Path

import git

from bot.config import github_settings
from bot.github.git import FORK_REMOTE
from bot.gitrepo import Repo
from bot.publish.lock import _LOCK_REF, _age, _lock_commit, _started, fork_lock


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


def _plant_lock(repo: Repo, settings, fingerprint: str, *, pid: int, started: str, host: str):
    """A lock commit as another run would have left it (its message is its holder's note)."""
    import socket as _socket

    message = (
        f"bot publish lock 1\n\nhost: {host or _socket.gethostname()[:60]}\npid: {pid}\n"
        f"started: {started}\nfingerprint: {fingerprint}"
    )
    sha = repo.git.commit_tree("4b825dc642cb6eb9a060e54bf8d69288fbee4904", "-m", message)
    repo.git.push(FORK_REMOTE, f"{sha}:{_LOCK_REF}")
    return sha


def _finished_process() -> tuple[int, str]:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"], env={})
    started = _started(child.pid)
    child.wait()
    return child.pid, started


def _take(repo: Repo, settings, fingerprint: str) -> bool:
    with fork_lock(
        repo.working_dir, settings, may_wait=lambda _s: False, ttl=600, fingerprint=fingerprint
    ) as held:
        return held


def test_a_lock_left_by_the_same_plan_is_taken_over_at_once(tmp_path):
    repo, _fork = _work_repo(tmp_path)
    settings = github_settings()
    alive = os.getppid()  # a live process: only the fingerprint lets the rerun in
    _plant_lock(repo, settings, "plan-a", pid=alive, started=_started(alive), host="elsewhere")
    assert _take(repo, settings, "plan-b") is False
    assert _take(repo, settings, "plan-a") is True


def test_a_dead_holder_on_this_host_is_recognised_before_the_ttl(tmp_path):
    repo, _fork = _work_repo(tmp_path)
    settings = github_settings()
    pid, started = _finished_process()
    _plant_lock(repo, settings, "plan-a", pid=pid, started=started, host="")
    assert _take(repo, settings, "plan-b") is True


def test_a_live_holder_or_one_on_another_machine_keeps_the_lock(tmp_path):
    repo, _fork = _work_repo(tmp_path)
    settings = github_settings()
    alive = os.getppid()
    _plant_lock(repo, settings, "plan-a", pid=alive, started=_started(alive), host="")
    assert _take(repo, settings, "plan-b") is False
    repo2, _ = _work_repo(tmp_path / "other")
    pid, started = _finished_process()  # dead here, but it ran on another machine
    _plant_lock(repo2, settings, "plan-a", pid=pid, started=started, host="runner-7")
    assert _take(repo2, settings, "plan-b") is False
    # A pid reused by a later process is not the holder.
    repo3, _ = _work_repo(tmp_path / "third")
    _plant_lock(repo3, settings, "plan-a", pid=alive, started="1", host="")
    assert _take(repo3, settings, "plan-b") is True
