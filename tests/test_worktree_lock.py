"""Scratch worktrees of one shared repository, made by several processes at once (as several
`bot verify` / `bot engine` batches on the cached release tree do): each one must succeed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.gitrepo import Repo

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
