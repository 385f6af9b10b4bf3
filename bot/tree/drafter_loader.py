"""Where a release's EAGLE drafter loader reaches the target's decoder as ``<target>.model``.

The interface's two methods are not the only way vLLM reaches a target's decoder: when the
drafter is loaded, the target's input embedding (and, in some releases, other buffers) is taken
from ``target_language_model.model`` (by attribute, raising when it is absent, or by
``getattr(..., "model", None)``, then missing the embedding). A target whose decoder sits at
``self.transformer`` or ``self.backbone`` cannot be fixed by two delegating methods on such a
release, and the enable recipe says so with the line found here.

Read from the tree, never assumed: the loader is every file under ``vllm/v1`` whose path names
both ``spec_decode`` and ``eagle``; the target is the name the loader gives it,
``target_language_model`` (the name every cached release, 0.19.1 to 0.34.0, uses). Only files
that mention that name are parsed, so a scan pays for two or three small files.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

TARGET_NAME = "target_language_model"
DECODER_ATTRIBUTE = "model"


@dataclass(frozen=True)
class LoaderSite:
    path: str  # relative to the tree root
    line: int
    code: str  # the expression, as the tree writes it

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: `{self.code}`"


def decoder_reads(root: Path) -> list[LoaderSite]:
    """Every place the tree's EAGLE drafter loader reads the target's ``.model``, in path and
    line order (empty when the tree's loader never does)."""
    v1 = root / "vllm" / "v1"
    if not v1.is_dir():
        return []
    sites: list[LoaderSite] = []
    for path in _loader_files(v1):
        rel = path.relative_to(root).as_posix()
        tree = _parsed(path, rel)
        if tree is None:
            continue
        sites += [
            LoaderSite(rel, node.lineno, ast.unparse(node))
            for node in ast.walk(tree)
            if _reads_decoder(node)
        ]
    return sorted(sites, key=lambda s: (s.path, s.line))


@dataclass(frozen=True)
class SharedEmbedding:
    """The attribute names the loader looks up on the target's decoder for the input embedding
    it shares with a drafter (``embed_tokens``, ``embedding``), and where it looks them up."""

    names: tuple[str, ...]
    site: LoaderSite


def shared_embedding(root: Path) -> SharedEmbedding | None:
    """Where the tree's EAGLE drafter loader reads the input embedding off the target's
    decoder: ``getattr``/``hasattr`` on a name bound to the decoder (``target_inner =
    target_language_model.model``, or a parameter of that name), of a constant naming an
    embedding. None when the loader shares no embedding that way."""
    v1 = root / "vllm" / "v1"
    found: list[tuple[LoaderSite, str]] = []
    for path in _loader_files(v1) if v1.is_dir() else []:
        rel = path.relative_to(root).as_posix()
        tree = _parsed(path, rel)
        if tree is None:
            continue
        bound = {
            target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and _reads_decoder(node.value)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id in bound
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and "embed" in node.args[1].value
            ):
                found.append((LoaderSite(rel, node.lineno, ast.unparse(node)), node.args[1].value))
    if not found:
        return None
    found.sort(key=lambda f: (f[0].path, f[0].line))
    return SharedEmbedding(tuple(sorted({name for _, name in found})), found[0][0])


def _parsed(path: Path, rel: str) -> ast.Module | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if TARGET_NAME not in text:
        return None
    try:
        return ast.parse(text, filename=rel)
    except SyntaxError:
        return None


def _loader_files(v1: Path) -> list[Path]:
    found: list[Path] = []
    for folder, subfolders, files in os.walk(v1):
        subfolders[:] = [d for d in subfolders if d != "__pycache__"]
        rel = os.path.relpath(folder, v1)
        if "spec_decode" not in rel:
            continue
        found += [
            Path(folder, name)
            for name in files
            if name.endswith(".py") and "eagle" in os.path.join(rel, name)
        ]
    return sorted(found)


def _reads_decoder(node: ast.AST) -> bool:
    """``target_language_model.model`` or ``getattr(target_language_model, "model", ...)``."""
    if isinstance(node, ast.Attribute):
        return (
            node.attr == DECODER_ATTRIBUTE
            and isinstance(node.value, ast.Name)
            and node.value.id == TARGET_NAME
        )
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        args = node.args
        return (
            len(args) >= 2
            and isinstance(args[0], ast.Name)
            and args[0].id == TARGET_NAME
            and isinstance(args[1], ast.Constant)
            and args[1].value == DECODER_ATTRIBUTE
        )
    return False
