"""How a multimodal wrapper builds its language model, and whether EAGLE-3 would reach it.

``SupportsEagle3``'s default methods follow ``get_language_model()`` and then its ``.model`` (or
the language model itself when it has no ``.model``); that holder must be an
``EagleModelMixin`` decoder whose ``forward`` collects the aux hidden states, and the wrapper's
``forward`` must hand the ``(hidden, aux)`` tuple back unchanged. Everything here answers those
questions from the ``ast`` class index, with the file:line a maintainer needs to check it.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import asdict, dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from bot.errors import BotError
from bot.recipes.base import ScanContext
from bot.recipes.eagle3_analysis import (
    EAGLE_MODEL_MIXIN,
    SUPPORTS_EAGLE3,
    aux_collection,
    constructed,
    declares_eagle3,
    forwards_decoder_output,
    is_multimodal,
    mixin_chain,
)
from bot.tree import facts_cache
from bot.tree.index import DECODER_ATTRIBUTE, ClassIndex, ClassRef
from bot.tree.layout import INTERFACES_MODULE, INTERFACES_PATH
from bot.tree.model_registry import GENERATION_CATEGORIES

# Where wrappers in the tree keep their language model, in the order tried.
LANGUAGE_MODEL_ATTRIBUTES = ("language_model", "llm", "model", "decoder", "text_model")
LANGUAGE_MODEL_ATTRIBUTE = LANGUAGE_MODEL_ATTRIBUTES[0]  # what the protocol's defaults may follow
SUPER_CALL = "super()"  # a forward returning super().forward(...): the parent's answer counts
PROTOCOL_METHODS = ("set_aux_hidden_state_layers", "get_eagle3_default_aux_hidden_state_layers")
SUPPORTS_EAGLE3_CHECK = "supports_eagle3"  # the check a forwarding default asks
# Bumped whenever what the cached answers below (the protocol's defaults, the tree's guard)
# hold changes; older cache entries are then ignored.
_CACHE_VERSION = 1

# Fix shapes.
INTERFACE_ONLY = "interface"  # the protocol's default methods reach the decoder
DELEGATE = "delegate"  # the wrapper forwards the two methods to its language model
RUNTIME = "runtime"  # the language model comes from the checkpoint's text_config


@dataclass(frozen=True)
class LanguageModel:
    """``self.<attribute> = ...`` in ``owner``'s methods (at ``line``), resolved to ``cls``."""

    attribute: str  # "" when get_language_model() returns the wrapper itself
    cls: ClassRef | None  # None: chosen from the checkpoint's text_config at run time
    owner: ClassRef
    line: int
    how: str  # "class", "architectures=[...]", "self.<helper>()", "get_language_model()"
    architecture: str | None = None


@dataclass(frozen=True)
class Assessment:
    """One wrapper: the fix shape when EAGLE-3 would work, else the reason it would not."""

    wrapper: ClassRef
    shape: str | None
    reason: str
    language_model: LanguageModel | None = None
    decoder: ClassRef | None = None
    forward_owner: ClassRef | None = None
    forward_line: int = 0
    forward_returns: str = ""
    depends_on: tuple[str, ...] = ()  # language models whose own fix must come first
    pinned: tuple[str, ...] = ()  # the language models the wrapper's code pins, if it does

    @property
    def ready(self) -> bool:
        return self.shape in (INTERFACE_ONLY, DELEGATE)


def assess(ctx: ScanContext, ref: ClassRef) -> Assessment:
    index = ctx.index
    sources, problem = language_model_sources(ctx, ref)
    if problem:
        return Assessment(ref, None, problem)
    if not sources:
        dispatch = index.find_method(ref, "__new__")
        if dispatch is not None:
            where = f"{index.path_of(dispatch[0])}:{dispatch[1]['line']}"
            why = f"picks the class it returns in __new__ ({where}) at run time; not followed"
            return Assessment(ref, None, why)
        return Assessment(ref, None, "builds no language model the bot can follow")
    classes = {s.cls for s in sources}
    if len(classes) > 1:
        names = ", ".join(sorted(c.name if c else "text_config" for c in classes))
        return Assessment(ref, None, f"builds one of several language models ({names})")
    lm = sources[0]
    passthrough, fwd_owner, fwd_line = _forward_paths(index, ref)
    if fwd_owner is None:
        return Assessment(ref, None, "has no forward of its own in the model packages", lm)
    base = dict(language_model=lm, forward_owner=fwd_owner, forward_line=fwd_line)
    if lm.cls is None and (pinned := pinned_language_models(ctx, lm)):
        return _assess_pinned(ctx, ref, pinned, passthrough, base)
    if lm.cls is None:
        returned = _returned_path(passthrough, lm.attribute, via_decoder=True)
        returned = returned or _returned_path(passthrough, lm.attribute, via_decoder=False)
        if returned is None:
            return Assessment(ref, None, _not_passed_through(lm), **base)
        why = "the language model comes from the checkpoint's text_config at run time"
        return Assessment(ref, RUNTIME, why, forward_returns=returned, **base)
    return _assess_class(ctx, ref, lm, passthrough, base)


def _assess_pinned(
    ctx: ScanContext,
    ref: ClassRef,
    pinned: list[LanguageModel],
    passthrough: list[str],
    base: dict[str, Any],
) -> Assessment:
    """A wrapper whose code pins the text model's architecture (PaliGemma sets
    ``text_config.architectures`` to Gemma or Gemma2, Glm4v passes ``architectures=`` Glm4 or
    Glm4Moe): the fix is what every pinned language model calls for, the same for all; one
    that is not capable yet makes the wrapper depend on that model's own fix."""
    results = [
        _assess_class(ctx, ref, lm, passthrough, {**base, "language_model": lm})
        if lm.cls is not None
        else Assessment(
            ref, None, "registered to a class the bot does not follow", lm, **_without_lm(base)
        )
        for lm in pinned
    ]
    names = ", ".join(lm.cls.name if lm.cls else str(lm.architecture) for lm in pinned)
    where = f"{ctx.index.path_of(pinned[0].owner)}:{pinned[0].line}"
    waiting = [r for r in results if r.shape is None and r.language_model is not None]
    if waiting:
        depends = tuple(_lm_name(r.language_model) for r in waiting if r.language_model)
        needs = "; ".join(f"{name}: {r.reason}" for name, r in zip(depends, waiting, strict=True))
        return replace(
            results[0],
            shape=None,
            reason=f"its code pins the language model to {names} ({where}), and not every one "
            f"supports EAGLE-3 yet ({needs}): depends on the fix for "
            f"{', '.join(depends)} first",
            depends_on=depends,
        )
    if len({r.shape for r in results}) > 1 or len({r.forward_returns for r in results}) > 1:
        return replace(
            results[0],
            shape=None,
            reason=f"its code pins the language model to {names} ({where}), which need "
            "different fixes",
        )
    return replace(
        results[0],
        reason=f"{results[0].reason} (pinned in code to {names})",
        pinned=tuple(_lm_name(lm) for lm in pinned),
    )


def _lm_name(lm: LanguageModel) -> str:
    return lm.cls.name if lm.cls is not None else str(lm.architecture)


def _without_lm(base: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in base.items() if k != "language_model"}


def pinned_language_models(ctx: ScanContext, lm: LanguageModel) -> list[LanguageModel]:
    """The language models a run-time construction is pinned to by the wrapper's own code:
    ``<x>.text_config.architectures = ["A"]`` or ``architectures=<name>`` with ``<name> =
    ["A"]`` in the method building it. Empty when nothing is pinned."""
    archs = pinned_architectures(ctx.index.class_facts(lm.owner), lm.line)
    return [
        LanguageModel(lm.attribute, cls, lm.owner, lm.line, f'pinned: ["{arch}"]', arch)
        for arch in archs
        for cls in (registered_classes(ctx, arch) or [None])
    ]


def pinned_architectures(class_facts: dict[str, Any] | None, line: int) -> list[str]:
    """The architectures the class's method spanning ``line`` pins (from the index's ``pins``
    facts, :func:`bot.tree.extract._pins`): the last ``architectures=<name>`` keyword of a call
    spanning ``line`` names the list, or the method sets ``text_config.architectures``."""
    methods = class_facts["methods"] if class_facts else {}
    pins = next(
        (
            m["pins"]
            for m in methods.values()
            if "pins" in m and m["line"] <= line <= m["pins"]["end_line"]
        ),
        None,
    )
    if pins is None:
        return []
    passed = None
    for start, end, name in pins["keywords"]:
        if start <= line <= end:
            passed = name
    archs = [a for target, values in pins["lists"] if target in (None, passed) for a in values]
    return list(dict.fromkeys(archs))


def _assess_class(
    ctx: ScanContext,
    ref: ClassRef,
    lm: LanguageModel,
    passthrough: list[str],
    base: dict[str, Any],
) -> Assessment:
    index = ctx.index
    assert lm.cls is not None
    if lm.attribute and mixin_chain(index, lm.cls):
        return Assessment(
            ref,
            None,
            f"self.{lm.attribute} is the bare decoder {lm.cls.name}; get_language_model() would "
            "pick it only by child order",
            **base,
        )
    decoder = _ready_decoder(index, lm.cls)
    if isinstance(decoder, str):
        if declares_eagle3(index, lm.cls) and _overrides_protocol(index, lm.cls):
            if not _decoder_collects(index, lm.cls):
                why = (
                    f"{lm.cls.name} declares SupportsEagle3 but its decoder collects no aux states"
                )
                return Assessment(ref, None, why, **base)
            returned = _returned_path(passthrough, lm.attribute, via_decoder=False)
            if returned is None or not forwards_decoder_output(index, lm.cls):
                return Assessment(ref, None, _not_passed_through(lm), **base)
            why = f"{lm.cls.name} sets its aux layers with its own methods: {decoder}"
            return Assessment(ref, DELEGATE, why, forward_returns=returned, **base)
        return Assessment(ref, None, decoder, **base)
    returned = _returned_path(passthrough, lm.attribute, via_decoder=True)
    if returned is None and forwards_decoder_output(index, lm.cls):
        returned = _returned_path(passthrough, lm.attribute, via_decoder=False)
    if returned is None:
        return Assessment(ref, None, _not_passed_through(lm), decoder=decoder, **base)
    if protocol_follows_language_model(ctx.root):
        shape, why = INTERFACE_ONLY, "the interface's default methods reach the decoder"
    elif declares_eagle3(index, lm.cls):
        shape, why = DELEGATE, "this release's SupportsEagle3 does not follow get_language_model()"
    else:
        return Assessment(
            ref,
            None,
            f"this release's interface does not follow get_language_model() and "
            f"{lm.cls.name} does not declare SupportsEagle3 to delegate to",
            decoder=decoder,
            **base,
        )
    return Assessment(ref, shape, why, decoder=decoder, forward_returns=returned, **base)


def _ready_decoder(index: ClassIndex, lm: ClassRef) -> ClassRef | str:
    """The EagleModelMixin decoder the default methods would reach, or why there is none."""
    decoders = constructed(index, lm, DECODER_ATTRIBUTE)
    if not decoders:
        return f"{lm.name} builds no self.model decoder"
    for construction in decoders:
        chain = mixin_chain(index, construction.cls)
        if chain is None:
            continue
        aux = aux_collection(index, construction.cls)
        if aux is None or not aux.collects:
            where = f"{index.path_of(aux.forward_owner)}:{aux.forward_line}" if aux else "?"
            return (
                f"{lm.name}'s decoder {construction.cls.name} has EagleModelMixin but its "
                f"forward ({where}) does not collect aux hidden states (eagle3-enable)"
            )
        return construction.cls
    names = ", ".join(sorted({c.cls.name for c in decoders}))
    return f"{lm.name}'s decoder ({names}) lacks EagleModelMixin"


def _decoder_collects(index: ClassIndex, lm: ClassRef) -> bool:
    for construction in constructed(index, lm, DECODER_ATTRIBUTE):
        aux = aux_collection(index, construction.cls)
        if aux is not None and aux.collects:
            return True
    return False


def _overrides_protocol(index: ClassIndex, ref: ClassRef) -> bool:
    found = index.find_method(ref, PROTOCOL_METHODS[0])
    return found is not None and found[0].module != INTERFACES_MODULE


def _forward_paths(index: ClassIndex, ref: ClassRef) -> tuple[list[str], ClassRef | None, int]:
    found = index.find_method(ref, "forward")
    if found is None or found[0].module == INTERFACES_MODULE:
        return [], None, 0
    owner, facts = found
    paths = list(facts.get("passthrough", []))
    parent: ClassRef | None = owner
    while SUPER_CALL in paths and parent is not None:  # `return super().forward(...)`
        paths.remove(SUPER_CALL)
        parent = _next_forward(index, ref, parent)
        if parent is not None:
            paths += (index.class_facts(parent) or {})["methods"]["forward"]["passthrough"]
    return paths, owner, facts["line"]


def _next_forward(index: ClassIndex, ref: ClassRef, after: ClassRef) -> ClassRef | None:
    """The class after ``after`` in ``ref``'s MRO that defines forward (super().forward)."""
    ancestors = [a for a in index.ancestors(ref) if isinstance(a, ClassRef)]
    for ancestor in ancestors[ancestors.index(after) + 1 :]:
        facts = index.class_facts(ancestor)
        if facts and "forward" in facts["methods"] and ancestor.module != INTERFACES_MODULE:
            return ancestor
    return None


def _returned_path(passthrough: list[str], attribute: str, *, via_decoder: bool) -> str | None:
    path = attribute if not via_decoder else f"{attribute}.{DECODER_ATTRIBUTE}".lstrip(".")
    return f"self.{path}(...)" if path in passthrough else None


def _not_passed_through(lm: LanguageModel) -> str:
    attr = f"self.{lm.attribute}" if lm.attribute else "self"
    return (
        f"forward does not hand back {attr}(...) or {attr}.model(...) unchanged, so the "
        "(hidden, aux) tuple would not survive"
    )


# -- where the language model comes from ------------------------------------------------


def language_model_sources(ctx: ScanContext, ref: ClassRef) -> tuple[list[LanguageModel], str]:
    """The language model(s) ``get_language_model()`` returns for ``ref``, or a reason."""
    index = ctx.index
    custom = index.find_method(ref, "get_language_model")
    if custom is not None and custom[0].module != INTERFACES_MODULE:
        owner, facts = custom
        paths = facts.get("returned_self", [])
        if paths == [""]:
            line = facts["line"]
            return [LanguageModel("", ref, owner, line, "get_language_model()")], ""
        if len(paths) == 1 and "." not in paths[0]:
            return _built(ctx, ref, paths[0]), ""
        shown = ", ".join(f"self.{p}" if p else "self" for p in paths) or "something else"
        return [], f"get_language_model() returns {shown}, which the bot does not follow"
    for attribute in LANGUAGE_MODEL_ATTRIBUTES:
        built = _built(ctx, ref, attribute)
        if built:
            return built, ""
    return [], ""


def _built(ctx: ScanContext, ref: ClassRef, attribute: str) -> list[LanguageModel]:
    index = ctx.index
    for owner in index.ancestors(ref):
        if not isinstance(owner, ClassRef) or owner.module == INTERFACES_MODULE:
            continue
        facts = index.class_facts(owner)
        if not facts:
            continue
        found: list[LanguageModel] = []
        for method in facts["methods"].values():
            for attr, callee, line in method["assigns"]:
                if attr == attribute:
                    found.extend(_from_callee(ctx, ref, owner, attribute, callee, line))
        if found:
            return found
    return []


def _from_callee(
    ctx: ScanContext, ref: ClassRef, owner: ClassRef, attribute: str, callee: list[Any], line: int
) -> list[LanguageModel]:
    index = ctx.index
    kind, value = callee[0], callee[1]
    if kind == "ref":
        classes = [r for r in index.resolve(owner.module, value) if isinstance(r, ClassRef)]
        return [LanguageModel(attribute, c, owner, line, "class") for c in classes]
    if kind == "registered":
        if not value:
            return [LanguageModel(attribute, None, owner, line, "text_config.architectures")]
        found = []
        for arch in value:
            for cls in registered_classes(ctx, arch):
                how = f'architectures=["{arch}"]'
                found.append(LanguageModel(attribute, cls, owner, line, how, arch))
        return found
    # self.<helper>(...): what the helper returns, looked up from the concrete class
    method = index.find_method(ref, value)
    if method is None:
        return []
    helper_owner, helper = method
    found = []
    for returned in helper["returns"]:
        for lm in _from_callee(ctx, ref, helper_owner, attribute, returned, line):
            how = f"self.{value}() -> {lm.how}" if lm.how != "class" else f"self.{value}()"
            found.append(LanguageModel(attribute, lm.cls, owner, line, how, lm.architecture))
    return found


def registered_classes(ctx: ScanContext, arch: str) -> list[ClassRef]:
    classes: list[ClassRef] = []
    for entry in ctx.registry.by_arch(arch):
        if entry.category in GENERATION_CATEGORIES:
            resolved = ctx.index.resolve(entry.module, entry.class_name)
            classes.extend(r for r in resolved if isinstance(r, ClassRef))
    return list(dict.fromkeys(classes))


def capable_language_models(ctx: ScanContext) -> list[str]:
    """Registered text-generation architectures a runtime wrapper would work with."""
    archs: list[str] = []
    for entry in ctx.registry.entries:
        if entry.category != "text_generation":
            continue
        for cls in registered_classes(ctx, entry.arch):
            if is_multimodal(ctx.index, cls) or not declares_eagle3(ctx.index, cls):
                continue
            if isinstance(_ready_decoder(ctx.index, cls), ClassRef):
                archs.append(entry.arch)
                break
    return sorted(set(archs))


# -- the release's protocol ---------------------------------------------------------------


@dataclass(frozen=True)
class ProtocolDefaults:
    """What this tree's ``SupportsEagle3`` default methods do, read once from interfaces.py.

    ``methods_follow_get_language_model``: both protocol methods call
    ``self.get_language_model()``, so a wrapper's declaration reaches its language model.
    How ``set_aux_hidden_state_layers`` finds the decoder: ``unwrap`` is ``optional`` for
    ``getattr(parent_ref, "model", parent_ref)`` (0.31+), ``required`` for ``parent_ref.model``
    (older releases), ``none`` when the parent itself is the holder.

    ``forwards``: both methods ask ``supports_eagle3(...)`` (themselves or in a module function
    they call), so they hand the call to a language model that declares the interface itself
    (what the core-eagle3-forwarding plan writes); the upstream defaults only unwrap.
    """

    methods_follow_get_language_model: bool
    follows_get_language_model: bool
    follows_language_model: bool
    unwrap: str
    line: int  # of set_aux_hidden_state_layers in interfaces.py (the evidence)
    assert_line: int  # of the isinstance(..., EagleModelMixin) check, 0 when none
    forwards: bool = False
    class_line: int = 0  # of class SupportsEagle3
    path: str = INTERFACES_PATH


def protocol_defaults(root: Path) -> ProtocolDefaults | None:
    """This tree's protocol defaults; None without a readable ``SupportsEagle3`` that has
    ``set_aux_hidden_state_layers`` (read from the user cache when this interfaces.py was seen
    before)."""
    try:
        data = (Path(root) / INTERFACES_PATH).read_bytes()
    except OSError:
        return None
    plain = facts_cache.remembered(
        "protocol-defaults",
        _CACHE_VERSION,
        Path(root),
        data,
        lambda: _plain_defaults(data),
        lambda value: (
            value is None
            or (
                isinstance(value, dict) and set(value) == set(ProtocolDefaults.__dataclass_fields__)
            )
        ),
    )
    return ProtocolDefaults(**plain) if plain is not None else None


def _plain_defaults(data: bytes) -> dict[str, Any] | None:
    try:
        defaults = _read_defaults(facts_cache.decoded(data))
    except UnicodeDecodeError:
        return None
    return asdict(defaults) if defaults is not None else None


def protocol_follows_language_model(root: Path) -> bool:
    """Whether this release's SupportsEagle3 default methods follow get_language_model()."""
    defaults = protocol_defaults(root)
    return defaults is not None and defaults.methods_follow_get_language_model


@cache
def _read_defaults(source: str) -> ProtocolDefaults | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    protocol = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == SUPPORTS_EAGLE3.name),
        None,
    )
    methods = {
        n.name: n
        for n in (protocol.body if protocol else [])
        if isinstance(n, ast.FunctionDef) and n.name in PROTOCOL_METHODS
    }
    method = methods.get(PROTOCOL_METHODS[0])
    if method is None:
        return None
    nodes = list(ast.walk(method))
    self_attrs = {
        n.attr
        for n in nodes
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
    }
    optional = any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == "getattr"
        and len(n.args) == 3
        and isinstance(n.args[1], ast.Constant)
        and n.args[1].value == DECODER_ATTRIBUTE
        for n in nodes
    )
    required = any(
        isinstance(n, ast.Attribute)
        and n.attr == DECODER_ATTRIBUTE
        and isinstance(n.value, ast.Name)
        and n.value.id != "self"
        for n in nodes
    )
    assert_line = next(
        (
            n.lineno
            for n in nodes
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id == "isinstance"
            and len(n.args) == 2
            and isinstance(n.args[1], ast.Name)
            and n.args[1].id == EAGLE_MODEL_MIXIN.name
        ),
        0,
    )
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    return ProtocolDefaults(
        methods_follow_get_language_model=len(methods) == len(PROTOCOL_METHODS)
        and all(_calls_self_method(m, "get_language_model") for m in methods.values()),
        follows_get_language_model="get_language_model" in self_attrs,
        follows_language_model=LANGUAGE_MODEL_ATTRIBUTE in self_attrs,
        unwrap="optional" if optional else "required" if required else "none",
        line=method.lineno,
        assert_line=assert_line,
        forwards=len(methods) == len(PROTOCOL_METHODS)
        and all(_asks_declaration(m, functions) for m in methods.values()),
        class_line=protocol.lineno if protocol else 0,
    )


def _asks_declaration(method: ast.FunctionDef, functions: dict[str, ast.FunctionDef]) -> bool:
    """Whether ``method`` calls ``supports_eagle3(...)``, itself or in a module function it
    calls by name (it then tells a language model that declares the interface from one that
    does not)."""
    bodies = [method] + [
        functions[node.func.id]
        for node in ast.walk(method)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in functions
    ]
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == SUPPORTS_EAGLE3_CHECK
        for body in bodies
        for node in ast.walk(body)
    )


def _calls_self_method(func: ast.FunctionDef, name: str) -> bool:
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
        for node in ast.walk(func)
    )


# -- the tree's own guard for wrappers whose language model is chosen at run time ------------


@dataclass(frozen=True)
class Guard:
    """A method of a wrapper declaring SupportsEagle3 that raises a clear error when its
    language model (``self.<attribute>``) does not support EAGLE-3; its text is the style.
    ``owner`` is the wrapper that has it; None for a guard written in the words of the tree's
    own error (``path``/``line``: that raise), where no wrapper has one yet."""

    name: str
    attribute: str
    source: str  # the method, dedented
    owner: ClassRef | None
    path: str
    line: int

    def to_json(self) -> dict[str, Any]:
        owner = self.owner.name if self.owner else None
        return {"name": self.name, "owner": owner, "path": self.path, "line": self.line}

    @property
    def provenance(self) -> str:
        if self.owner is not None:
            return f"as {self.owner.name} has it"
        return f"in the words of the tree's own error at {self.path}:{self.line}"

    def text_for(self, attribute: str) -> str:
        return self.source.replace(f"self.{self.attribute}", f"self.{attribute}")

    @property
    def error(self) -> str | None:
        """The error class the guard raises by name (``RuntimeError`` for Pixtral's)."""
        for node in ast.walk(ast.parse(self.source)):
            if (
                isinstance(node, ast.Raise)
                and isinstance(node.exc, ast.Call)
                and isinstance(node.exc.func, ast.Name)
            ):
                return node.exc.func.id
        return None


def wrapper_guard(ctx: ScanContext) -> Guard | None:
    """The guard a wrapper whose language model is chosen at run time gets: the tree's own
    (:func:`runtime_guard`), else one written in the words of the tree's own error."""
    return runtime_guard(ctx) or written_guard(ctx)


# What a guard written for a tree without one is called: what it checks, as upstream names it.
WRITTEN_GUARD = "_require_language_model_eagle3"
_LANGUAGE_MODEL = "language_model"


def written_guard(ctx: ScanContext) -> Guard | None:
    """A guard for a tree where no wrapper has one yet, in the words of the tree's own clear
    error: the exception class and message of its missing-interface ``raise`` (the first of
    its error signatures that raises a plain named exception), followed by the language model's
    class; the check is the tree's own ``supports_eagle3``. None when the tree has neither."""
    from bot.tree.signatures import error_signatures

    interfaces = ctx.root / INTERFACES_PATH
    try:
        if "def supports_eagle3(" not in interfaces.read_text(encoding="utf-8"):
            return None
        signatures = error_signatures(ctx.root)
    except (OSError, UnicodeDecodeError, BotError):
        return None
    for signature in signatures:
        error = _raised_class(ctx.root / signature.path, signature.line)
        message = signature.message_prefix.strip().rstrip(".:")
        if error is None or not message or "{" in message or "}" in message:
            continue
        lm = f"self.{_LANGUAGE_MODEL}"
        source = (
            f"def {WRITTEN_GUARD}(self) -> None:\n"
            f"    if not supports_eagle3({lm}):\n"
            f"        raise {error}(\n"
            f"            {message + ': the language model '!r}\n"
            f'            f"{{type({lm}).__name__}} does not support it"\n'
            "        )\n"
        )
        return Guard(WRITTEN_GUARD, _LANGUAGE_MODEL, source, None, signature.path, signature.line)
    return None


def _raised_class(path: Path, line: int) -> str | None:
    """The exception class the ``raise`` at ``path:line`` raises by its plain name."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Raise)
            and node.lineno == line
            and isinstance(node.exc, ast.Call)
            and isinstance(node.exc.func, ast.Name)
        ):
            return node.exc.func.id
    return None


def runtime_guard(ctx: ScanContext) -> Guard | None:
    """The first such guard in the tree (by module), or None when the tree has none (once per
    scan; read from the user cache when the files that could hold one were seen before)."""
    return ctx.remembered(f"{__name__}.runtime_guard", lambda: _runtime_guard(ctx))


def _runtime_guard(ctx: ScanContext) -> Guard | None:
    index = ctx.index
    candidates: list[tuple[str, str, bytes, list[str]]] = []  # module, path, text, owners
    for module in sorted(index.modules):
        owners = [
            name
            for name in index.modules[module].facts["classes"]
            if is_multimodal(index, ClassRef(module, name))
            and declares_eagle3(index, ClassRef(module, name))
        ]
        if not owners:  # only a module with a candidate owner is read
            continue
        path = index.modules[module].path
        try:
            data = (ctx.root / path).read_bytes()
        except OSError:
            continue
        if b"supports_eagle3(self." in data:
            candidates.append((module, path, data, owners))
    content = b"".join(
        f"{module}\0{path}\0{','.join(owners)}\0{len(data)}\0".encode() + data
        for module, path, data, owners in candidates
    )
    plain = facts_cache.remembered(
        "runtime-guard",
        _CACHE_VERSION,
        ctx.root,
        content,
        lambda: _first_guard(candidates),
        lambda value: value is None or (isinstance(value, list) and len(value) == 7),
    )
    if plain is None:
        return None
    name, attribute, source, module, owner, path, line = plain
    return Guard(name, attribute, source, ClassRef(module, owner), path, line)


def _first_guard(candidates: list[tuple[str, str, bytes, list[str]]]) -> list[Any] | None:
    for module, path, data, owners in candidates:
        try:
            source = facts_cache.decoded(data)
        except UnicodeDecodeError:
            continue
        for name in owners:
            found = _guard_in(source, ClassRef(module, name), path)
            if found is not None:
                return [found.name, found.attribute, found.source, module, name, path, found.line]
    return None


def _guard_in(source: str, owner: ClassRef, path: str) -> Guard | None:
    lines = source.splitlines(keepends=True)
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef) or node.name != owner.name:
            continue
        for method in node.body:
            if not isinstance(method, ast.FunctionDef) or len(method.args.args) != 1:
                continue
            attribute = _checked_attribute(method)
            if attribute is None or not any(isinstance(n, ast.Raise) for n in ast.walk(method)):
                continue
            start = (method.decorator_list[0] if method.decorator_list else method).lineno
            text = textwrap.dedent("".join(lines[start - 1 : method.end_lineno]))
            return Guard(method.name, attribute, text, owner, path, method.lineno)
    return None


def _checked_attribute(method: ast.FunctionDef) -> str | None:
    """``x`` when the method calls ``supports_eagle3(self.x)``."""
    for node in ast.walk(method):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "supports_eagle3"
            and len(node.args) == 1
            and (path := _attribute_of_self(node.args[0])) is not None
        ):
            return path
    return None


def _attribute_of_self(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id == "self" else None
    return None
