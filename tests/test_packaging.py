"""A plain (non-editable) install works: built as a wheel, installed into a fresh venv, run from
there, away from the source tree. The wheel is built offline with the test venv's setuptools and
the fresh venv borrows the test venv's dependencies, so nothing is downloaded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from tests.cli import EXAMPLE_ISSUE

ROOT = Path(__file__).resolve().parents[1]
# What `pip install ./bot` reads; everything else in the checkout must not matter.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "bot", "templates", "workflows")
MAPPED = {"bot._templates": "templates", "bot._workflows": "workflows"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _files(root: Path, pattern: str = "*") -> set[str]:
    return {
        str(p.relative_to(root))
        for p in root.rglob(pattern)
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_the_wheel_ships_the_package_and_the_mapped_directories_file_for_file(
    wheel_venv: Path,
) -> None:
    """Every file of bot/ (a fix class's package and its templates/ included, found without a
    list naming them) and of the two mapped directories, and nothing else."""
    assert _pyproject()["tool"]["setuptools"]["package-dir"] == MAPPED
    site = next((wheel_venv / "lib").glob("python*/site-packages"))
    wanted = _files(ROOT / "bot")
    for package, directory in MAPPED.items():
        prefix = package.removeprefix("bot.")
        wanted |= {f"{prefix}/{name}" for name in _files(ROOT / directory)}
    assert any(name.startswith("recipes/eagle3_interface/templates/") for name in wanted)
    assert _files(site / "bot") == wanted


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    assert result.returncode == 0, f"{command[:3]}...: {result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv with only the built wheel installed (plus a path to our dependencies)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    source.mkdir()
    for name in SOURCES:
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, source / name)
    dist = root / "dist"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["--quiet", "--wheel-dir", str(dist), str(source)]
    )
    (wheel,) = dist.glob("bot-*.whl")
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps"]
        + ["--no-index", "--quiet", str(wheel)]
    )
    # The dependencies come from the test venv. A bare path in a .pth file does not run that
    # directory's own .pth files, so the editable install there stays inactive.
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
        ).stdout.strip()
    )
    (site / "test-venv-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    yield venv


def _bot_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["BOT_HOME"] = str(tmp_path / "bot-home")
    # The borrowed dependencies' commands (ruff) live beside the test venv's python.
    env["PATH"] = os.pathsep.join([env.get("PATH", ""), str(Path(sys.executable).parent)])
    return env


def test_the_installed_package_is_the_wheel_not_the_checkout(
    wheel_venv: Path, tmp_path: Path
) -> None:
    code = "import bot, bot._templates as t; print(bot.__file__); print(t.__file__)"
    out = _run(
        [str(wheel_venv / "bin" / "python"), "-c", code], cwd=tmp_path, env=_bot_env(tmp_path)
    )
    for line in out.stdout.split():
        assert Path(line).resolve().is_relative_to(wheel_venv.resolve()), line


# The test venv's own (editable) install, run the same way.
EDITABLE = [sys.executable, "-m", "bot"]


@pytest.mark.vllm_tree
def test_propose_from_the_wheel_writes_the_editable_installs_plan(
    wheel_venv: Path, tmp_path: Path
) -> None:
    from bot.tree.fetch import release_tree

    checkout = tmp_path / "checkout"
    git.Repo.clone_from(str(release_tree("0.23.0")), str(checkout), shared=True).close()
    plans = {}
    for install, bot in (("wheel", [str(wheel_venv / "bin" / "bot")]), ("editable", EDITABLE)):
        out = plans[install] = tmp_path / f"plan-{install}"
        result = subprocess.run(
            [*bot, "propose", "--issue", "33329", "--issue-file", str(EXAMPLE_ISSUE)]
            + ["--repo", str(checkout), "--out", str(out), "--dry-run"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=_bot_env(tmp_path),
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert "ready" in result.stdout
    out = plans["wheel"]
    for name in ("patch.diff", "pr.md"):
        assert (out / name).read_text() == (plans["editable"] / name).read_text(), name
    assert "SupportsEagle3" in (out / "patch.diff").read_text()


def test_init_workflows_from_the_wheel(wheel_venv: Path, tmp_path: Path) -> None:
    dest = tmp_path / "repo" / ".github" / "workflows"
    _run(
        [str(wheel_venv / "bin" / "bot"), "init-workflows", str(dest)],
        cwd=tmp_path,
        env=_bot_env(tmp_path),
    )
    names = sorted(p.name for p in (ROOT / "workflows").glob("*.yml"))
    assert sorted(p.name for p in dest.iterdir()) == names
    for name in names:
        assert (dest / name).read_bytes() == (ROOT / "workflows" / name).read_bytes()
    config = dest.parent / "actionlint.yaml"
    assert config.read_bytes() == (ROOT / "workflows" / "actionlint.yaml").read_bytes()
