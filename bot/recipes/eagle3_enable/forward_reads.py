"""What the forward test needs of a decoder's ``forward``, re-read from its file with ``ast``:
the residual stream's names, the inputs fed per layer, the final norm, a stand-in fit, a scaled
embedding."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.recipes.base import Declined, ScanContext
from bot.recipes.eagle3_enable.analysis import DecoderShape
from bot.recipes.eagle3_enable.candidate import Candidate
from bot.tree.index import DECODER_ATTRIBUTE, ClassIndex, ClassRef


def capture_norm(scan: ScanContext, candidate: Candidate, shape: DecoderShape) -> str | None:
    """The attribute of the final norm the captured decoder applies before returning, which
    the LLM test passes the last captured state through; None where the target applies it."""
    path = scan.root / scan.index.path_of(candidate.captured)
    return _norm_attribute(path, candidate.captured.name, shape)


# The residual semantics the contributed forward test has a stand-in layer for (the keys of
# bot.codemods.aux_forward_test's stand-ins; a test keeps the two equal). Named here so that
# the scan, which asks every candidate for its test's fields, does not import the codemods.
FORWARD_TEST_RESIDUALS = frozenset(
    {"residual-stream", "explicit-add", "full-stream-pair", "no-residual"}
)


def forward_test_fields(
    scan: ScanContext, candidate: Candidate, shape: DecoderShape
) -> dict[str, Any] | Declined:
    """The contributed forward test's fields (:func:`bot.codemods.aux_forward_test.
    new_aux_test_file`), all read from the tree: the target's module, the decoder, the residual
    semantics, the final norm's attribute and the stream multipliers set to 1.0."""
    path = scan.index.path_of(candidate.ref)
    if scan.index.path_of(candidate.decoder) != path:
        return Declined(
            f"needs a human: {candidate.decoder.name} is not in {candidate.ref.name}'s module, "
            "and the contributed forward test imports one module"
        )
    if shape.residual not in FORWARD_TEST_RESIDUALS:
        return Declined(f"needs a human: no forward test for {shape.residual} decoders yet")
    # Where forward is written: the decoder's own file, or the one of the class it inherits
    # forward from (then the test patches that module's get_pp_group).
    forward_path = scan.index.path_of(candidate.captured)
    norm = _norm_attribute(scan.root / forward_path, candidate.captured.name, shape)
    reads = _forward_reads(scan.root / forward_path, candidate.captured.name)
    per_layer = _per_layer_inputs(scan.root / forward_path, candidate.captured.name, shape.stream)
    unset = reads.plain - {shape.layers_attr, norm, *_STAND_IN_SETS, *per_layer.methods}
    if reads.config_elsewhere:
        unset.add("config")
    if unset:
        listed = ", ".join(f"self.{name}" for name in sorted(unset))
        return Declined(
            f"needs a human: no contributed forward test: {candidate.decoder.name}.forward reads "
            f"{listed}, which a test on stand-in layers does not set up"
        )
    if norm is None and shape.final_norm != "target":
        return Declined(
            "needs a human: no contributed forward test (the final norm's attribute could not "
            "be read)"
        )
    if shape.child is not None:
        child_reads = _forward_reads(scan.root / path, shape.child)
        unset = child_reads.plain - {shape.layers_attr, *_STAND_IN_SETS}
        if (
            unset
            or child_reads.scalars
            or child_reads.config_scalars
            or child_reads.config_elsewhere
            or child_reads.config_defaults
        ):
            read = sorted(unset | child_reads.scalars | child_reads.config_scalars)
            return Declined(
                f"needs a human: no contributed forward test: {shape.child}.forward reads "
                f"{', '.join(f'self.{name}' for name in read) or 'self.config'}, which a test "
                "on stand-in layers does not set up"
            )
    fields: dict[str, Any] = {
        "module": candidate.ref.module,
        "decoder": candidate.decoder.name,
        "target": candidate.ref.name,
        "residual": shape.residual,
        "norm": norm,
        "scalars": tuple(sorted(reads.scalars)),
        "config_scalars": tuple(sorted(reads.config_scalars)),
        **(
            {"config_defaults": tuple(sorted(reads.config_defaults))}
            if reads.config_defaults
            else {}
        ),
        **({"child": shape.child} if shape.child else {}),
    }
    fit = _stand_in_fit(scan, candidate, shape)
    if isinstance(fit, Declined):
        return fit
    fields.update(fit)
    if per_layer.methods:  # taken by keyword, so the stand-in already takes the call's names
        fields |= {"per_layer_inputs": per_layer.methods, "per_layer_params": per_layer.params}
    if shape.residual == "full-stream-pair" and shape.residual_name is not None:
        fields["hands_back_none"] = True  # the capture passes the residual each layer nulls
    if flags := _layer_flags(scan.index, candidate.captured):
        fields["layer_flags"] = flags
    if candidate.captured.module != candidate.ref.module:
        fields["forward_module"] = candidate.captured.module
    if candidate.attribute != DECODER_ATTRIBUTE:
        fields["decoder_attr"] = candidate.attribute
    if shape.layers_attr != "layers":
        fields["layers_attr"] = shape.layers_attr
    return fields


def _stand_in_fit(
    scan: ScanContext, candidate: Candidate, shape: DecoderShape
) -> dict[str, Any] | Declined:
    """The forward test's fields for a module without ``get_pp_group`` (nothing to
    monkeypatch) and for a layer call the usual stand-in signature does not take (Zamba2's
    ``layer(hidden_states, original_hidden_states=..., positions=...)``): the stand-in then
    takes the call's own names. Empty for the usual case, so those tests read as before."""
    index = scan.index
    fields: dict[str, Any] = {}
    imports = index.modules[candidate.captured.module].facts.get("imports", {})
    if "get_pp_group" not in imports:
        fields["pp_group"] = False
    looping = candidate.captured
    if shape.child is not None:  # the analysis put the child in the decoder's module
        looping = ClassRef(looping.module, shape.child)
    facts = index.class_facts(looping) or {}
    loop = facts["methods"]["forward"]["shape"]["loops"][0]
    call = loop["call"]
    usual = ["positions", "hidden_states"] + (
        [] if shape.residual == "no-residual" else ["residual"]
    )
    if _takes(usual, call, shape.stream):
        return fields
    names = [*call["args"], *(k for k in call["keywords"] if k != "**")]
    needed = {"hidden_states"} | (set() if shape.residual == "no-residual" else {"residual"})
    if all(isinstance(n, str) and n.isidentifier() for n in names) and needed <= set(names):
        fields["layer_params"] = tuple(names)  # the stand-in takes the call's own names
        return fields
    listed = ", ".join(str(n) for n in names)
    return Declined(
        f"needs a human: no contributed forward test: the layer call passes ({listed}), which "
        "a stand-in layer cannot take by the same names"
    )


def branched_step(index: ClassIndex, decoder: ClassRef) -> dict[str, Any]:
    """Where ``decoder``'s loop calls its layer by the same statement in both branches of an
    ``if`` (DeciLM's): that ``if``'s line, test and the layer attributes it reads; else empty."""
    facts = index.class_facts(decoder) or {}
    shape = facts.get("methods", {}).get("forward", {}).get("shape") or {}
    call = (shape.get("loops") or [{}])[0].get("call") or {}
    return dict(call.get("branched", {}))


def _layer_flags(index: ClassIndex, decoder: ClassRef) -> tuple[str, ...]:
    """The layer attributes the loop's ``if`` reads where the same call opens both branches
    (DeciLM's ``_is_no_op_attention``): the stand-in layers carry them, so both branches run."""
    return tuple(branched_step(index, decoder).get("layer_reads", []))


def _takes(params: list[str], call: dict[str, Any], stream: str) -> bool:
    """Whether ``def forward(self, <params>)`` binds the call, the stream as hidden_states. A
    ``**kwargs`` the decoder passes on is empty in the test (it calls the target with none)."""
    args = call["args"]
    keywords = {k: v for k, v in call["keywords"].items() if k != "**"}
    if len(args) > len(params):
        return False
    bound = dict(zip(params, args, strict=False))
    if set(keywords) - set(params) or set(keywords) & set(bound):
        return False
    bound.update(keywords)
    streams = {stream, *call["targets"]}  # the stream before an alias rebinds it
    return bound.get("hidden_states") in streams and set(bound) == set(params)


# What the forward test sets on the decoder, or the mixin and the decoder's class provide.
_STAND_IN_SETS = frozenset(
    {
        "start_layer",
        "end_layer",
        "do_not_compile",
        "aux_hidden_state_layers",
        "_maybe_add_hidden_state",
        "embed_input_ids",  # these two only without inputs_embeds, which the test passes
        "embed_tokens",
    }
)


@dataclass(frozen=True)
class _ForwardReads:
    """What ``decoder.forward`` reads from ``self``: multipliers of the stream (``self.x`` and
    ``self.config.x``, which a stand-in test sets to 1.0) and everything else."""

    plain: set[str]
    scalars: set[str]
    config_scalars: set[str]
    config_elsewhere: list[bool]  # one element when self.config is read another way
    # ``getattr(self.config, "<x>", <constant>)``: read with a default, which an empty
    # stand-in config gives (AXK1's ``llama_4_scaling``, None)
    config_defaults: set[str] = field(default_factory=set)


def _parsed(path: Path) -> ast.Module:
    """The model file's syntax tree, parsed once per content (the scan asks for each file's
    forward-test fields, and publish again; callers only read it)."""
    stat = path.stat()
    return _parsed_at(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=128)
def _parsed_at(path: str, _mtime_ns: int, _size: int) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))


def _forward_of(path: Path, decoder: str) -> ast.FunctionDef | None:
    return next(
        (
            item
            for node in _parsed(path).body
            if isinstance(node, ast.ClassDef) and node.name == decoder
            for item in node.body
            if isinstance(item, ast.FunctionDef) and item.name == "forward"
        ),
        None,
    )


def _forward_reads(path: Path, decoder: str) -> _ForwardReads:
    forward = _forward_of(path, decoder)
    reads = _ForwardReads(set(), set(), set(), [])
    if forward is None:
        return reads
    factors: set[int] = set()  # ids of the nodes multiplied with the stream
    for node in ast.walk(forward):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            factors.update({id(node.left), id(node.right)})
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Mult):
            factors.add(id(node.value))
    config_in_factors: set[int] = set()
    for node in ast.walk(forward):
        if (name := _config_default(node)) is not None:
            reads.config_defaults.add(name)
            config_in_factors.add(id(node.args[0]))  # type: ignore[attr-defined]
    for node in ast.walk(forward):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            inner = node.value
            if _is_self(inner.value) and inner.attr == "config" and id(node) in factors:
                reads.config_scalars.add(node.attr)
                config_in_factors.add(id(inner))
    for node in ast.walk(forward):
        if not (isinstance(node, ast.Attribute) and _is_self(node.value)):
            continue
        if node.attr == "config":
            if id(node) not in config_in_factors:
                reads.config_elsewhere.append(True)
        elif id(node) in factors:
            reads.scalars.add(node.attr)
        elif isinstance(node.ctx, ast.Load):
            reads.plain.add(node.attr)
    return reads


@dataclass(frozen=True)
class _PerLayerInputs:
    """The decoder's own methods whose result the loop slices per layer and hands each layer
    (Gemma 4: ``per_layer_inputs = self.project_per_layer_inputs(hidden_states,
    self.get_per_layer_inputs(...))``, then ``layer(..., per_layer_input=per_layer_inputs[:,
    i, :])``), and the layer call's parameters that take the slice."""

    methods: tuple[str, ...] = ()
    params: tuple[str, ...] = ()


def _per_layer_inputs(path: Path, decoder: str, stream: str) -> _PerLayerInputs:
    """Read from ``decoder.forward``: a name ``P`` sliced ``P[:, <index>, :]`` in the layer
    loop, the slice (or the name it is bound to) passed by keyword to a call there; the methods
    of ``decoder``'s class whose result is bound to ``P``, or feeds such a method."""
    cls = next(
        (n for n in _parsed(path).body if isinstance(n, ast.ClassDef) and n.name == decoder), None
    )
    forward = _forward_of(path, decoder)
    if cls is None or forward is None:
        return _PerLayerInputs()
    taken = _sliced_keywords(forward)
    own = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    methods = _feeding_methods(forward, own, set(taken.values()), stream)
    if not methods:
        return _PerLayerInputs()
    return _PerLayerInputs(tuple(sorted(methods)), tuple(sorted(taken)))


def _sliced_keywords(forward: ast.FunctionDef) -> dict[str, str]:
    """The loops' call keywords given one layer's slice of a per-layer tensor, each with that
    tensor's name (``per_layer_input=layer_per_input`` where ``layer_per_input =
    per_layer_inputs[:, i, :]``: ``{"per_layer_input": "per_layer_inputs"}``)."""
    taken: dict[str, str] = {}
    for loop in (n for n in ast.walk(forward) if isinstance(n, ast.For)):
        sliced: dict[str, str] = {}  # the bound slice's name -> the per-layer tensor's name
        for node in ast.walk(loop):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, whole = node.targets[0], _per_layer_slice(node.value)
                if isinstance(target, ast.Name) and whole is not None:
                    sliced[target.id] = whole
        for call in (n for n in ast.walk(loop) if isinstance(n, ast.Call)):
            for keyword in call.keywords:
                whole = _per_layer_slice(keyword.value)
                if whole is None and isinstance(keyword.value, ast.Name):
                    whole = sliced.get(keyword.value.id)
                if keyword.arg is not None and whole is not None:
                    taken[keyword.arg] = whole
    return taken


def _feeding_methods(
    forward: ast.FunctionDef, own: set[str], names: set[str], stream: str
) -> set[str]:
    """The class's own methods whose calls are bound to ``names``, or feed such a call (bound
    to a name it is passed, or called in its arguments); the stream is not followed (it is the
    test's ``inputs_embeds``)."""
    producers: dict[str, list[ast.expr]] = {}  # name -> the own-method calls bound to it
    for node in ast.walk(forward):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and _own_call(node.value, own)
        ):
            producers.setdefault(node.targets[0].id, []).append(node.value)
    methods: set[str] = set()
    frontier, seen = list(names), set()
    while frontier:
        name = frontier.pop()
        if name in seen:
            continue
        seen.add(name)
        calls = list(producers.get(name, []))
        while calls:
            call = calls.pop()
            assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            methods.add(call.func.attr)
            for arg in call.args:
                if isinstance(arg, ast.Name) and arg.id != stream:
                    frontier.append(arg.id)
                elif _own_call(arg, own):
                    calls.append(arg)
    return methods


def _own_call(node: ast.expr, own: set[str]) -> bool:
    """Whether ``node`` is ``self.<m>(...)`` for a method ``m`` of the class itself."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and _is_self(node.func.value)
        and node.func.attr in own
    )


def _per_layer_slice(node: ast.expr) -> str | None:
    """``P`` for ``P[:, <index>, :]`` (one layer's slice of a per-token, per-layer tensor)."""
    if not (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and isinstance(node.slice, ast.Tuple)
        and len(node.slice.elts) == 3
    ):
        return None
    first, index, last = node.slice.elts
    if all(
        isinstance(s, ast.Slice) and s.lower is None and s.upper is None and s.step is None
        for s in (first, last)
    ) and not isinstance(index, ast.Slice):
        return node.value.id
    return None


def _config_default(node: ast.AST) -> str | None:
    """``x`` for ``getattr(self.config, "x", <constant>)``, else None."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) == 3
        and not node.keywords
    ):
        return None
    config, name, default = node.args
    if (
        isinstance(config, ast.Attribute)
        and _is_self(config.value)
        and config.attr == "config"
        and isinstance(name, ast.Constant)
        and isinstance(name.value, str)
        and name.value.isidentifier()
        and isinstance(default, ast.Constant)
    ):
        return name.value
    return None


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _norm_attribute(path: Path, decoder: str, shape: DecoderShape) -> str | None:
    """The final norm's attribute (``norm`` for ``hidden_states, _ = self.norm(...)``): the
    ``self.<x>(...)`` called on the norm's line, or, for a norm picked by whether the residual
    is ``None``, on the lines of its two branches (each calls the same one); None where the
    decoder has no final norm (the target applies it)."""
    if shape.final_norm in ("target", "conditional"):
        return None  # no norm, or one the config may skip: the test checks the output alone
    last = shape.return_line if shape.final_norm == "when-residual" else shape.norm_line
    forward = _forward_of(path, decoder)
    called = {
        node.func.attr
        for node in (ast.walk(forward) if forward is not None else ())
        if isinstance(node, ast.Call)
        and shape.norm_line <= node.lineno <= last
        and isinstance(node.func, ast.Attribute)
        and _is_self(node.func.value)
    }
    return called.pop() if len(called) == 1 else None


def scaled_embedding(path: Path, decoder: str) -> int | None:
    """The line of ``embed_input_ids`` in ``decoder`` when it multiplies what it returns."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef) and node.name == decoder:
            for item in node.body:
                multiplies = any(
                    isinstance(n, ast.BinOp | ast.AugAssign) and isinstance(n.op, ast.Mult)
                    for n in ast.walk(item)
                )
                if isinstance(item, ast.FunctionDef) and item.name == "embed_input_ids":
                    return item.lineno if multiplies else None
    return None
