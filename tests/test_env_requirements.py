"""A tree's requirements install only from the package index, by name and version: no URL,
no local path, no ``-r`` include from outside the tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import BotError
from bot.verify.env import read_requirements


def _tree(tmp_path: Path, common: str, cuda: str = "-r common.txt\n") -> Path:
    tree = tmp_path / "vllm-tree"
    (tree / "requirements").mkdir(parents=True)
    (tree / "requirements" / "common.txt").write_text(common)
    (tree / "requirements" / "cuda.txt").write_text(cuda)
    return tree


@pytest.mark.parametrize(
    "line",
    [
        "evil @ http://attacker.invalid/evil-1.0.tar.gz",
        "evil @ file:///tmp/evil-1.0.tar.gz",
        "evil @ git+https://attacker.invalid/evil.git",
    ],
)
def test_a_url_or_local_file_requirement_is_skipped_and_listed(tmp_path: Path, line: str) -> None:
    wanted = read_requirements(_tree(tmp_path, f"regex\n{line}\n"))
    assert not any("evil" in r for r in wanted.install)
    assert "regex" in wanted.install
    assert [s.requirement for s in wanted.skipped if "evil" in s.requirement] == [line]
    assert "package index" in next(s.reason for s in wanted.skipped if "evil" in s.requirement)


def test_a_plain_path_line_is_never_installed(tmp_path: Path) -> None:
    wanted = read_requirements(_tree(tmp_path, "regex\n./evil\n/tmp/evil.whl\n"))
    assert [r for r in wanted.install if "evil" in r] == []


def test_an_include_from_outside_the_tree_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("evil==1.0\n")
    tree = _tree(tmp_path, "regex\n-r ../../outside.txt\n")
    with pytest.raises(BotError) as refused:
        read_requirements(tree)
    assert "outside the vLLM tree" in str(refused.value) and "\n" not in str(refused.value)


def test_an_include_inside_the_tree_is_read(tmp_path: Path) -> None:
    tree = _tree(tmp_path, "regex\n-r extra.txt\n")
    (tree / "requirements" / "extra.txt").write_text("tqdm\n")
    assert "tqdm" in read_requirements(tree).install
