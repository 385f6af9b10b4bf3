"""Where a release's speculative-decoding loaders reach a target's decoder and input embedding.

A target that declares ``SupportsEagle3`` is not reached through the interface's two methods
alone: when a drafter (EAGLE, DFlash, DSpark, ...) is loaded, the loader takes the target's
language model (``target_model.get_language_model()``, else the target), its decoder, and the
decoder's input embedding to share with the drafter. Releases write that in several ways, and
some refuse a target whose decoder is not ``.model`` or whose embedding has another name:

- a **decoder site** reads the decoder with no fallback: ``target_language_model.model``
  (an ``AttributeError`` for a decoder at ``.transformer``), or ``getattr(lm, "model", None)``
  followed by ``if inner is None: raise`` (0.23.0 to 0.32.0's V1 proposer);
  ``getattr(lm, "model", lm)`` (dflash, the protocol's own default) is no site;
- an **embedding site** looks the embedding up on the decoder by name only
  (``getattr(inner, "embed_tokens", None) or getattr(inner, "embedding", None)``, or the
  ``hasattr`` chain of older releases): a decoder keeping it at ``word_embeddings`` gives the
  drafter none. A function that also finds it by type (``isinstance(m, VocabParallelEmbedding)``)
  is no site.

Read from the tree, never assumed: the loaders are the files under ``vllm/`` whose path names
``spec_decode``; the language model is any name bound to a ``.get_language_model()`` call (and
a parameter of that name in another loader function); the decoder, any name bound to a decoder
read (and a parameter of that name). Only files mentioning ``language_model`` are parsed, and
the answer is cached by those files' content (a warm scan parses none of them).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from bot.tree import facts_cache

DECODER_ATTRIBUTE = "model"
BY_TYPE = "VocabParallelEmbedding"  # a lookup that walks the modules for one finds it by type
WALKS = ("modules", "named_modules", "children", "named_children")
DECODER = "decoder"
EMBEDDING = "embedding"
# The forms a site is written in: `lm.model`; `v = getattr(lm, "model", None)` with
# `if v is None: raise`; `getattr(d, "embed_tokens", None) or getattr(d, "embedding", None)`;
# one such getattr; `if hasattr(d, "embed_tokens"): v = d.embed_tokens elif ...`.
REWRITTEN = ("attribute", "none-guard", "or-getattr", "getattr", "hasattr-chain")
OTHER = "other"
# Bumped whenever what loader_sites finds changes; older cache entries are then ignored.
_CACHE_VERSION = 1


@dataclass(frozen=True)
class LoaderSite:
    path: str  # relative to the tree root
    line: int
    code: str  # the expression, as the tree writes it
    function: str = ""  # the function it is in
    kind: str = DECODER  # DECODER or EMBEDDING
    names: tuple[str, ...] = ()  # an embedding site's names, in the order it tries them
    # How it is written: a form in REWRITTEN (the core loader codemods rewrite it)
    # or OTHER (no codemod knows it)
    form: str = "attribute"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: `{self.code}`"


@dataclass(frozen=True)
class Loaders:
    """Every loader site of a tree, in path and line order."""

    sites: tuple[LoaderSite, ...]
    language_models: tuple[str, ...] = ()  # the names loaders give the language model
    decoders: tuple[str, ...] = ()  # the names loaders give its decoder

    @property
    def unwritten(self) -> list[LoaderSite]:
        """Sites in a form no codemod of the core plan rewrites."""
        return [s for s in self.sites if s.form not in REWRITTEN]

    @property
    def decoder_sites(self) -> list[LoaderSite]:
        return [s for s in self.sites if s.kind == DECODER]

    @property
    def embedding_sites(self) -> list[LoaderSite]:
        return [s for s in self.sites if s.kind == EMBEDDING]

    def refusing(self, decoder_attribute: str, holder_attributes: set[str]) -> list[LoaderSite]:
        """The sites that refuse a target whose decoder is ``self.<decoder_attribute>``:
        every decoder site when that is not ``model``; every embedding site whose names are
        none of ``holder_attributes`` (what the module the loader resolves holds: the decoder
        at ``.model``, else the target itself, which the fallback ``getattr`` hands over)."""
        found: list[LoaderSite] = []
        for site in self.sites:
            if site.kind == DECODER:
                if decoder_attribute != DECODER_ATTRIBUTE:
                    found.append(site)
            elif not holder_attributes & set(site.names):
                found.append(site)
        return found


def loader_sites(root: Path) -> Loaders:
    """Every decoder and embedding site of the tree's speculative-decoding loaders (read from
    the user cache when these loader files were seen before)."""
    files = list(_loader_files(root))
    content = b"".join(f"{rel}\0{len(data)}\0".encode() + data for rel, data in files)
    plain = facts_cache.remembered(
        "loaders",
        _CACHE_VERSION,
        root,
        content,
        lambda: _plain(_loader_sites(files)),
        _is_plain,
    )
    return _from_plain(plain)


def _plain(loaders: Loaders) -> dict[str, Any]:
    return {
        "sites": [astuple(site) for site in loaders.sites],
        "language_models": list(loaders.language_models),
        "decoders": list(loaders.decoders),
    }


def _from_plain(data: dict[str, Any]) -> Loaders:
    return Loaders(
        tuple(LoaderSite(*fields[:5], tuple(fields[5]), fields[6]) for fields in data["sites"]),
        tuple(data["language_models"]),
        tuple(data["decoders"]),
    )


def _is_plain(value: object) -> bool:
    return (
        isinstance(value, dict)
        and all(isinstance(value.get(k), list) for k in ("sites", "language_models", "decoders"))
        and all(isinstance(s, tuple | list) and len(s) == 7 for s in value["sites"])
    )


def _loader_sites(files: list[tuple[str, bytes]]) -> Loaders:
    parsed = [(rel, tree) for rel, data in files if (tree := _parsed(data, rel)) is not None]
    lm_names: set[str] = set()
    for _, tree in parsed:
        lm_names |= _language_model_names(tree)
    decoder_names: set[str] = set()
    for _, tree in parsed:
        for function in _functions(tree):
            decoder_names |= _decoder_bound(function, _scope_names(function, lm_names))
    sites: list[LoaderSite] = []
    for rel, tree in parsed:
        for function in _functions(tree):
            lms = _scope_names(function, lm_names)
            decoders = _decoder_bound(function, lms) | _params(function) & decoder_names
            sites += _decoder_sites(rel, function, lms)
            sites += _embedding_sites(rel, function, lms, decoders)
    unique = {(s.path, s.line, s.kind): s for s in sites}
    return Loaders(
        tuple(sorted(unique.values(), key=lambda s: (s.path, s.line, s.kind))),
        tuple(sorted(lm_names)),
        tuple(sorted(decoder_names)),
    )


def loader_dirs(root: Path) -> tuple[str, ...]:
    """The outermost ``spec_decode`` folders under ``vllm/``, relative to ``root`` (a scratch
    checkout needs them so that a re-scan reads the same loaders)."""
    found: list[str] = []
    vllm = root / "vllm"
    for folder, subfolders, _files in os.walk(vllm) if vllm.is_dir() else ():
        rel = Path(folder).relative_to(root)
        if rel.name == "spec_decode":
            found.append(rel.as_posix())
            subfolders[:] = []
        else:
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
    return tuple(sorted(found))


# -- reading the loader files -----------------------------------------------------------------


def _loader_files(root: Path) -> Iterator[tuple[str, bytes]]:
    """The loader files that mention ``language_model``, by path: (relative path, content), in
    ``os.walk``'s order (folders and files sorted, ``__pycache__`` and symlinked folders not
    entered)."""
    vllm = root / "vllm"
    if not vllm.is_dir():
        return
    for path in _spec_decode_files(str(vllm), "vllm", inside=False):
        try:
            with open(os.path.join(root, path), "rb") as file:
                data = file.read()
        except OSError:
            continue
        if b"language_model" in data:
            yield path, data


def _spec_decode_files(folder: str, relative: str, inside: bool) -> Iterator[str]:
    """The ``.py`` files under ``folder`` inside a ``spec_decode`` folder (``inside``: this
    one is), relative paths. One ``scandir`` per folder (~1000 under vllm/, a walk per scan)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    folders: list[os.DirEntry[str]] = []
    files: list[str] = []
    for entry in entries:
        try:
            is_folder = entry.is_dir()
        except OSError:
            is_folder = False
        if is_folder:
            folders.append(entry)
        else:
            files.append(entry.name)
    if inside:
        yield from (f"{relative}/{name}" for name in sorted(files) if name.endswith(".py"))
    for entry in sorted(folders, key=lambda e: e.name):
        if entry.name != "__pycache__" and not entry.is_symlink():
            below = inside or entry.name == "spec_decode"
            yield from _spec_decode_files(entry.path, f"{relative}/{entry.name}", below)


def _parsed(data: bytes, rel: str) -> ast.Module | None:
    try:
        text = facts_cache.decoded(data)
    except UnicodeDecodeError:
        return None
    try:
        return ast.parse(text, filename=rel)
    except SyntaxError:
        return None


Function = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(tree: ast.Module) -> list[Function]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _params(function: Function) -> set[str]:
    args = function.args
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}


def _own_nodes(function: Function) -> Iterator[ast.AST]:
    """The nodes of ``function``'s body, not of the functions nested in it."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                stack.append(child)


def _language_model_names(tree: ast.Module) -> set[str]:
    """Names bound to a value calling ``.get_language_model()``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _calls_get_language_model(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _calls_get_language_model(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "get_language_model"
        for n in ast.walk(node)
    )


def _scope_names(function: Function, lm_names: set[str]) -> set[str]:
    """The language-model names ``function`` binds or takes as parameters."""
    bound = {
        t.id
        for node in _own_nodes(function)
        if isinstance(node, ast.Assign) and _calls_get_language_model(node.value)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    return bound | (_params(function) & lm_names)


def _is_name(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _getattr_model(node: ast.AST, lms: set[str]) -> ast.Call | None:
    """``getattr(<lm>, "model", <default>)``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) == 3
        and _is_name(node.args[0], lms)
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value == DECODER_ATTRIBUTE
    ):
        return node
    return None


def _is_fallback(node: ast.AST, lms: set[str]) -> bool:
    """``getattr(lm, "model", lm)``: the decoder, or the language model itself."""
    call = _getattr_model(node, lms)
    return call is not None and ast.dump(call.args[2]) == ast.dump(call.args[0])


def _strict_read(node: ast.AST, lms: set[str]) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == DECODER_ATTRIBUTE
        and _is_name(node.value, lms)
        and isinstance(node.ctx, ast.Load)
    )


def _decoder_read(node: ast.AST, lms: set[str]) -> bool:
    return _strict_read(node, lms) or _getattr_model(node, lms) is not None


def _decoder_bound(function: Function, lms: set[str]) -> set[str]:
    return {
        t.id
        for node in _own_nodes(function)
        if isinstance(node, ast.Assign) and _decoder_read(node.value, lms)
        for t in node.targets
        if isinstance(t, ast.Name)
    }


def _decoder_sites(rel: str, function: Function, lms: set[str]) -> list[LoaderSite]:
    sites: list[LoaderSite] = []
    raised_on_none = _names_raised_on_none(function)
    for node in _own_nodes(function):
        if _strict_read(node, lms):
            sites.append(_site(rel, function, node, DECODER, form="attribute"))
        elif (
            isinstance(node, ast.Assign)
            and (call := _getattr_model(node.value, lms)) is not None
            and not _is_fallback(call, lms)
            and any(_is_name(t, raised_on_none) for t in node.targets)
        ):
            form = "none-guard" if _is_none(call.args[2]) else OTHER
            sites.append(_site(rel, function, call, DECODER, form=form))
    return sites


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _names_raised_on_none(function: Function) -> set[str]:
    """Names an ``if <name> is None: raise ...`` in ``function`` refuses."""
    names: set[str] = set()
    for node in _own_nodes(function):
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and len(node.test.ops) == 1
            and isinstance(node.test.ops[0], ast.Is)
            and isinstance(node.test.comparators[0], ast.Constant)
            and node.test.comparators[0].value is None
            and any(isinstance(s, ast.Raise) for s in node.body)
        ):
            names.add(node.test.left.id)
    return names


def _embedding_sites(
    rel: str, function: Function, lms: set[str], decoders: set[str]
) -> list[LoaderSite]:
    """One site per function: where it first looks an embedding up by name on the decoder,
    with every name it tries; none when the function also finds it by type."""
    lookups: list[tuple[ast.AST, str]] = []
    for node in _own_nodes(function):
        name = _embedding_lookup(node, lms, decoders)
        if name is not None:
            lookups.append((node, name))
    if not lookups or _finds_by_type(function):
        return []
    lookups.sort(key=lambda item: (item[0].lineno, item[0].col_offset))  # type: ignore[attr-defined]
    first = lookups[0][0]
    names = tuple(dict.fromkeys(name for _, name in lookups))
    form = _embedding_form(function, [node for node, _ in lookups])
    return [_site(rel, function, _whole_expression(function, first), EMBEDDING, names, form)]


def _embedding_form(function: Function, lookups: list[ast.AST]) -> str:
    """The one form every lookup of ``function`` is written in, else OTHER."""
    forms = {_lookup_form(function, node) for node in lookups}
    return forms.pop() if len(forms) == 1 else OTHER


def _lookup_form(function: Function, node: ast.AST) -> str:
    parent = _whole_expression(function, node)
    if isinstance(parent, ast.BoolOp):
        plain = isinstance(parent.op, ast.Or) and all(_getattr_none(v) for v in parent.values)
        return "or-getattr" if plain else OTHER
    if _getattr_none(node):
        return "getattr"
    for chain in _hasattr_chains(function):
        if node in chain:
            return "hasattr-chain"
    return OTHER


def _getattr_none(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) == 3
        and _is_none(node.args[2])
    )


def _hasattr_chains(function: Function) -> list[set[ast.AST]]:
    """The nodes of each ``if hasattr(d, "x"): v = d.x elif ...`` chain (tests and values)."""
    chains: list[set[ast.AST]] = []
    nested: set[ast.AST] = set()
    for node in _own_nodes(function):
        if not isinstance(node, ast.If) or node in nested:
            continue
        covered: set[ast.AST] = set()
        current: ast.stmt | None = node
        while isinstance(current, ast.If):
            test = current.test
            body = current.body
            if not (
                isinstance(test, ast.Call)
                and isinstance(test.func, ast.Name)
                and test.func.id == "hasattr"
                and len(body) == 1
                and isinstance(body[0], ast.Assign)
                and isinstance(body[0].value, ast.Attribute)
            ):
                break
            covered |= {test, body[0].value}
            nested.add(current)
            current = current.orelse[0] if len(current.orelse) == 1 else None
        if covered:
            chains.append(covered)
    return chains


def _embedding_lookup(node: ast.AST, lms: set[str], decoders: set[str]) -> str | None:
    """The embedding name ``node`` looks up on the decoder (``getattr``/``hasattr`` with a
    constant, or an attribute), else None."""

    def on_decoder(target: ast.AST) -> bool:
        return _is_name(target, decoders) or _decoder_read(target, lms)

    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
        and len(node.args) >= 2
        and on_decoder(node.args[0])
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
        and "embed" in node.args[1].value
    ):
        return node.args[1].value
    if isinstance(node, ast.Attribute) and "embed" in node.attr and on_decoder(node.value):
        return node.attr
    return None


def _finds_by_type(function: Function) -> bool:
    """Whether ``function`` also walks the module for a ``VocabParallelEmbedding`` (a
    function that only checks the type of what it found by name is no such function)."""
    nodes = list(_own_nodes(function))
    walks = any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in WALKS
        for node in nodes
    )
    return walks and any(
        isinstance(node, ast.Name | ast.Attribute)
        and (node.id if isinstance(node, ast.Name) else node.attr) == BY_TYPE
        for node in nodes
    )


def _whole_expression(function: Function, node: ast.AST) -> ast.AST:
    """A lookup inside ``a or b`` is shown as the whole ``or`` expression."""
    for parent in _own_nodes(function):
        if isinstance(parent, ast.BoolOp) and node in parent.values:
            return parent
    return node


def _site(
    rel: str,
    function: Function,
    node: ast.AST,
    kind: str,
    names: tuple[str, ...] = (),
    form: str = "attribute",
) -> LoaderSite:
    return LoaderSite(
        rel,
        node.lineno,  # type: ignore[attr-defined]
        ast.unparse(node),
        function.name,
        kind,
        names,
        form,
    )
