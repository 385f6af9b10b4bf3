"""The hashes that tie a plan's bytes to what was verified and what a maintainer reviewed.

``patch_hash`` covers patch.diff alone: verification records it, publish re-computes it.
``review_hash`` covers patch.diff and pr.md as shown on the dashboard: approval records it,
publish re-computes it. Both are over the exact bytes on disk, so any change after the fact,
however small, is caught.
"""

from __future__ import annotations

import hashlib


def patch_hash(patch: str) -> str:
    return "sha256:" + hashlib.sha256(patch.encode("utf-8", "surrogatepass")).hexdigest()


def review_hash(patch: str, pr_markdown: str) -> str:
    digest = hashlib.sha256()
    digest.update(patch.encode("utf-8", "surrogatepass"))
    digest.update(b"\0")
    digest.update(pr_markdown.encode("utf-8", "surrogatepass"))
    return "sha256:" + digest.hexdigest()
