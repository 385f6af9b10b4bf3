"""The tree a plan was made on, as ``bot publish`` reads it: never the plan's word for it.

A publish rule that must re-derive what the recipe decided from more than the one file it
checks (:mod:`bot.recipes.eagle3_enable.recipe`'s capture depends on the decoder's layers and on how
the tree's enabled decoders count) scans the base commit itself. :class:`CommitTree` is that commit,
fetched from the upstream into the bot's work repository, exported on first use (only
``vllm/``, all a scan reads, and :data:`EXPORTED`: the registry test, whose platform skips a
contributed test keeps, and what places a test through ``LLM``) and scanned once;
:class:`CheckedOutTree` is a tree already on disk (tests, and callers that have one).

The scan uses the facts cache: its entries are keyed by the hash of a file's bytes and written
only by the bot's own parser (the sandbox hides the cache from upstream code), and they hold
plain data, never code.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from bot.errors import BotError
from bot.recipes.base import ScanContext
from bot.subprocess_env import minimal_env
from bot.tree.layout import (
    AGENTS_RULES,
    REGISTRY_TEST,
    SPEC_DECODE_TESTS,
    TEST_AREAS,
    TEST_REGISTRY_PATH,
)

# What a rule reads beside vllm/: the registry test's platform skips, and where a test through
# LLM goes (the tree's test rules, the example models, the CI steps, the test folder).
EXPORTED = (
    REGISTRY_TEST,
    AGENTS_RULES,
    TEST_REGISTRY_PATH,
    TEST_AREAS,
    SPEC_DECODE_TESTS,
)


class CheckedOutTree:
    """A vLLM tree on disk, scanned once when a rule first asks."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._scanned: ScanContext | None = None

    def scan(self) -> ScanContext:
        if self._scanned is None:
            from bot.scan.findings import scan_context

            self._scanned = scan_context(self._files())
        return self._scanned

    def _files(self) -> Path:
        return self.root


class CommitTree(CheckedOutTree):
    """``commit`` of the git repository at ``git_dir``; its files live in a temporary
    directory from the first scan until :meth:`close`."""

    def __init__(self, git_dir: Path, commit: str) -> None:
        super().__init__(Path(tempfile.mkdtemp(prefix="bot-base-")))
        self.git_dir, self.commit = Path(git_dir), commit

    def _files(self) -> Path:
        archive = self.root / "base.tar"
        git = ["git", f"--git-dir={self.git_dir}", "archive", "--format=tar"]
        try:
            with archive.open("wb") as out:
                _run([*git, self.commit, "vllm"], stdout=out)
            _run(["tar", "-x", "--no-same-owner", "-f", str(archive), "-C", str(self.root)])
            self._export_beside()
        except (OSError, subprocess.SubprocessError) as exc:
            lines = (getattr(exc, "stderr", None) or str(exc)).strip().splitlines()
            detail = lines[0][:200] if lines else type(exc).__name__
            raise BotError(f"could not read the base commit's tree: {detail}") from None
        finally:
            archive.unlink(missing_ok=True)
        return self.root

    def _export_beside(self) -> None:
        """The files of :data:`EXPORTED` the commit has (a path it lacks is left out)."""
        archive = self.root / "beside.tar"
        present = [p for p in EXPORTED if self._has(p)]
        if not present:
            return
        git = ["git", f"--git-dir={self.git_dir}", "archive", "--format=tar", self.commit]
        try:
            with archive.open("wb") as out:
                _run([*git, "--", *present], stdout=out)
            _run(["tar", "-x", "--no-same-owner", "-f", str(archive), "-C", str(self.root)])
        finally:
            archive.unlink(missing_ok=True)

    def _has(self, path: str) -> bool:
        found = subprocess.run(
            ["git", f"--git-dir={self.git_dir}", "cat-file", "-e", f"{self.commit}:{path}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=300,
            env=minimal_env(),
        )
        return found.returncode == 0

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> CommitTree:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _run(command: list[str], **kwargs: object) -> None:
    subprocess.run(
        command,
        check=True,
        timeout=300,
        stderr=subprocess.PIPE,
        text=True,
        env=minimal_env(),  # no token reaches git or tar
        **kwargs,
    )
