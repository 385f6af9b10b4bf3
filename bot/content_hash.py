"""The hashes that tie a plan's bytes to what was verified and what a maintainer reviewed.

``patch_hash`` covers patch.diff alone: verification records it, publish re-computes it.
``review_hash`` covers what a maintainer approves: patch.diff and pr.md as shown on the
dashboard, and every plan.json field publish reads to write anything (branch, fingerprint,
title, reason, issue number and comment, upstream, recipe, class, finding, edits, base commit,
status, questions, verification...). Approval records it, publish re-computes it. Both are
over the exact content on disk, so any change after the fact, however small, is caught.

Left out of the review hash: ``repo_path``, which publish never reads.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from bot.errors import BotError
from bot.plan import Plan

# plan.json fields publish never reads (so a change to them cannot change what ships).
NOT_REVIEWED = frozenset({"repo_path"})


def patch_hash(patch: str) -> str:
    return "sha256:" + hashlib.sha256(patch.encode("utf-8", "surrogatepass")).hexdigest()


def review_hash(patch: str, pr_markdown: str, plan: Plan | Mapping[str, Any]) -> str:
    digest = hashlib.sha256()
    digest.update(patch.encode("utf-8", "surrogatepass"))
    digest.update(b"\0")
    digest.update(pr_markdown.encode("utf-8", "surrogatepass"))
    digest.update(b"\0")
    digest.update(reviewed_plan_fields(plan).encode("ascii"))
    return "sha256:" + digest.hexdigest()


def reviewed_plan_fields(plan: Plan | Mapping[str, Any]) -> str:
    """The plan's reviewed fields as canonical JSON (a journal's dict and the plan.json it
    writes give the same text: both go through :class:`Plan`)."""
    try:
        read = plan if isinstance(plan, Plan) else Plan.from_dict(dict(plan))
        data = json.loads(read.to_json())
    except BotError:
        # Not a plan publish could read (it would refuse it): hash it as it is, so showing or
        # listing it never fails, and an approval of it can never match.
        data = {"unreadable": dict(plan) if isinstance(plan, Mapping) else None}
    fields = {k: v for k, v in data.items() if k not in NOT_REVIEWED}
    return json.dumps(
        fields, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=repr
    )
