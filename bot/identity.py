"""A plan's identity on GitHub: the deterministic branch a fix is pushed to.

Its own module so that ``bot publish``, which re-derives the branch from the plan's recipe and
class, does not import :mod:`bot.propose` (which imports triage and the codemods).
"""

from __future__ import annotations

import re


def branch_name(recipe: str, class_name: str, variant: str | None) -> str:
    return f"bot/{recipe}/{_class_slug(class_name)}" + (f"-{variant}" if variant else "")


def _class_slug(class_name: str) -> str:
    slug = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", class_name).lower()
    return _slug(slug)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
