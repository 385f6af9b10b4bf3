"""`bot init-workflows DIR`: copy the bot's GitHub Actions workflows into a repository."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.errors import BotError

WORKFLOW_NAMES = ("propose-on-label.yml", "gpu-verify.yml", "scheduled-scan.yml")
# Declares the GPU runner's custom label; actionlint reads it from .github/actionlint.yaml.
ACTIONLINT_CONFIG = "actionlint.yaml"


def workflows_source() -> Path:
    source = Path(__file__).resolve().parent.parent / "workflows"
    if not all((source / name).is_file() for name in WORKFLOW_NAMES):
        raise BotError(f"the bot's workflow files are missing from {source}")
    return source


def init_workflows(dest: Path, *, force: bool = False) -> list[Path]:
    """Write the workflows into ``dest`` (usually ``.github/workflows``); returns what was written.

    Refuses to overwrite a file that differs unless ``force``. When ``dest`` is a
    ``.github/workflows`` directory, actionlint's config goes next to it in ``.github/``.
    """
    source = workflows_source()
    if dest.exists() and not dest.is_dir():
        raise BotError(f"{dest} exists and is not a directory")
    plan = [(source / name, dest / name) for name in WORKFLOW_NAMES]
    if dest.name == "workflows" and dest.parent.name == ".github":
        plan.append((source / ACTIONLINT_CONFIG, dest.parent / ACTIONLINT_CONFIG))
    clashes = [
        target
        for origin, target in plan
        if target.exists() and target.read_bytes() != origin.read_bytes()
    ]
    if clashes and not force:
        names = ", ".join(str(t) for t in clashes)
        raise BotError(f"would overwrite {names}; pass --force to replace them")
    written: list[Path] = []
    for origin, target in plan:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(origin, target)
        written.append(target)
    return written
