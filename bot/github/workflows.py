"""`bot init-workflows DIR`: copy the bot's GitHub Actions workflows into a repository.

The workflow files ship inside the installed package as ``bot._workflows`` (pyproject.toml maps
the top-level workflows/ there) and are read with importlib.resources.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from bot.errors import BotError

GPU_WORKFLOW = "gpu-verify.yml"  # dispatched by verify, its runs read back by publish
WORKFLOW_NAMES = ("propose-on-label.yml", GPU_WORKFLOW, "scheduled-scan.yml")
# Declares the GPU runner's custom label; actionlint reads it from .github/actionlint.yaml.
ACTIONLINT_CONFIG = "actionlint.yaml"


WORKFLOWS_PACKAGE = "bot._workflows"


def workflows_source() -> Traversable:
    source = files(WORKFLOWS_PACKAGE)
    missing = [n for n in (*WORKFLOW_NAMES, ACTIONLINT_CONFIG) if not source.joinpath(n).is_file()]
    if missing:
        raise BotError(f"the bot's workflow files are missing from {source}: {', '.join(missing)}")
    return source


def init_workflows(dest: Path, *, force: bool = False) -> list[Path]:
    """Write the workflows into ``dest`` (usually ``.github/workflows``); returns what was written.

    Refuses to overwrite a file that differs unless ``force``. When ``dest`` is a
    ``.github/workflows`` directory, actionlint's config goes next to it in ``.github/``.
    """
    source = workflows_source()
    if dest.exists() and not dest.is_dir():
        raise BotError(f"{dest} exists and is not a directory")
    names = [(name, dest / name) for name in WORKFLOW_NAMES]
    if dest.name == "workflows" and dest.parent.name == ".github":
        names.append((ACTIONLINT_CONFIG, dest.parent / ACTIONLINT_CONFIG))
    plan = [(source.joinpath(name).read_bytes(), target) for name, target in names]
    clashes = [target for data, target in plan if target.exists() and target.read_bytes() != data]
    if clashes and not force:
        listed = ", ".join(str(t) for t in clashes)
        raise BotError(f"would overwrite {listed}; pass --force to replace them")
    written: list[Path] = []
    for data, target in plan:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written.append(target)
    return written
