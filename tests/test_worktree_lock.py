"""Scratch worktrees of one shared repository, made by several processes at once (as several
`bot verify` / `bot engine` batches on the cached release tree do): each one must succeed, and
one a killed process left behind is removed by the next."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bot.github.gitrepo import Repo
from bot.tree.worktree import WORKTREE_PREFIX, scratch_worktree

# Each process waits for the go file, then adds and removes worktrees of the repository in a
# loop, alternating full and partial checkouts (both ways `scratch_worktree` is used).
WORKER = """
import sys, time
from pathlib import Path
from bot.tree.worktree import scratch_worktree

repo, commit, go, rounds = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
for index in range(rounds):
    with scratch_worktree(repo, commit, None if index % 2 else ["pkg"]) as tree:
        assert (tree / "pkg" / "f1.py").read_text() == "value = 1\\n"
print("done", flush=True)
"""

ROUNDS = 20
WORKERS = 3
IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def _repository(root: Path) -> tuple[Path, str]:
    root.mkdir()
    (root / "pkg").mkdir()
    for index in range(200):  # enough files that a checkout takes a moment
        (root / "pkg" / f"f{index}.py").write_text(f"value = {index}\n")
    (root / "pyproject.toml").write_text("[tool.ruff]\n")
    with Repo.init(root) as repo:
        repo.git.add("--all")
        repo.git.commit("-q", "--no-gpg-sign", "-m", "init", env=IDENTITY)
        return root, repo.head.commit.hexsha


def test_processes_add_worktrees_of_one_repository_at_once(tmp_path: Path) -> None:
    repo, commit = _repository(tmp_path / "repo")
    go = tmp_path / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(repo), commit, str(go), str(ROUNDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(WORKERS)
    ]
    for worker in workers:
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "ready"
    go.touch()
    results = [worker.communicate(timeout=300) for worker in workers]
    for worker, (out, err) in zip(workers, results, strict=True):
        assert worker.returncode == 0, err[-2000:]
        assert out.strip() == "done"
    with Repo(repo) as opened:  # every scratch worktree was removed again
        assert len(opened.git.worktree("list").splitlines()) == 1


# Enters a scratch worktree, says where, and stays in it until killed.
HOLDER = """
import sys, time
from pathlib import Path
from bot.tree.worktree import scratch_worktree

with scratch_worktree(Path(sys.argv[1]), sys.argv[2]) as tree:
    print(tree, flush=True)
    time.sleep(600)
"""


def _listed(repo: Path) -> list[Path]:
    with Repo(repo) as opened:
        lines = opened.git.worktree("list", "--porcelain").splitlines()
    return [Path(line.removeprefix("worktree ")) for line in lines if line.startswith("worktree ")]


def _holder(repo: Path, commit: str) -> tuple[subprocess.Popen[str], Path]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(repo), commit], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    return process, Path(process.stdout.readline().strip())


def test_a_worktree_left_by_a_killed_bot_is_removed_by_the_next_and_a_live_one_is_kept(
    tmp_path: Path,
) -> None:
    repo, commit = _repository(tmp_path / "repo")
    dead, dead_tree = _holder(repo, commit)
    live, live_tree = _holder(repo, commit)
    try:
        dead.kill()
        dead.wait()
        assert dead_tree in _listed(repo)  # a killed process removes nothing itself
        with scratch_worktree(repo, commit, ["pkg"]):
            listed = _listed(repo)
            assert dead_tree not in listed and not dead_tree.parent.exists()
            assert live_tree in listed and (live_tree / "pkg" / "f1.py").exists()
    finally:
        live.kill()
        live.wait()
    with scratch_worktree(repo, commit, ["pkg"]):
        pass
    assert _listed(repo) == [repo.resolve()]


def test_a_worktree_without_an_owner_is_removed_only_once_it_is_hours_old(tmp_path: Path) -> None:
    # What a bot from before owner locks left behind (and what a fresh one looks like).
    repo, commit = _repository(tmp_path / "repo")
    old = Path(tempfile.mkdtemp(prefix=WORKTREE_PREFIX)) / "tree"
    recent = Path(tempfile.mkdtemp(prefix=WORKTREE_PREFIX)) / "tree"
    with Repo(repo) as opened:
        for tree in (old, recent):
            opened.git.worktree("add", "--detach", "--quiet", str(tree), commit)
    hours_ago = time.time() - 3 * 3600
    os.utime(old.parent, (hours_ago, hours_ago))
    try:
        with scratch_worktree(repo, commit, ["pkg"]):
            pass
        assert _listed(repo) == [repo.resolve(), recent]
        assert not old.parent.exists()
    finally:
        shutil.rmtree(recent.parent, ignore_errors=True)
