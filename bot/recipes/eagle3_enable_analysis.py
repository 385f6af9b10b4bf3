"""Can the decoder of a text model learn to collect aux hidden states by a mechanical edit?

Reads the cached per-file facts only (:mod:`bot.tree.decoder_loop`): the decoder's layer loop,
what follows it, and the layer's own ``forward``. The answer is a :class:`DecoderShape` with a
named loop kind and residual kind, or a refusal with the reason a human has to look.

Loop kinds (how the layers are iterated):

- ``slice``: ``for layer in self.layers[self.start_layer : self.end_layer]``
- ``islice``: ``for layer in islice(self.layers, self.start_layer, self.end_layer)``
- ``enumerate``: either of the above under ``enumerate(...)`` (the index is reused)
- ``range``: ``for i in range(self.start_layer, self.end_layer): layer = self.layers[i]``

Residual kinds (what the stream after a layer is, decided from the layer's ``forward`` and the
final norm's call):

- ``residual-stream``: layers return ``(hidden_states, residual)`` and the final norm adds them
  (``self.norm(hidden_states, residual)``): captured as ``hidden_states + residual``
- ``explicit-add``: the same pair, summed by ``hidden_states = hidden_states + residual`` after
  the loop: captured as ``hidden_states + residual``
- ``no-residual``: layers return one tensor, the full stream: captured with ``residual=None``
- ``full-stream-pair``: layers return a pair whose first element their own ``forward`` already
  summed, and the decoder never adds the residual back; or each layer rebinds the residual it
  is given before reading it (what a layer sees is the first output alone) and the final norm
  takes the stream alone or hands the residual back unused (Cohere's ``LayerNorm``): captured
  with ``residual=None`` (adding it would count it twice)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.tree.index import ClassIndex, ClassRef

NEEDS_HUMAN = "needs a human"
LOOP_KINDS = ("slice", "islice", "enumerate", "range")
RESIDUAL_KINDS = ("residual-stream", "explicit-add", "no-residual", "full-stream-pair")
BOUNDS = ["self.start_layer", "self.end_layer"]
# Base classes that are not a decoder layer (the last pipeline stage's placeholders).
_NOT_LAYERS = frozenset({"PPMissingLayer", "ModuleList", "Identity"})


@dataclass(frozen=True)
class DecoderShape:
    loop: str  # one of LOOP_KINDS
    residual: str  # one of RESIDUAL_KINDS
    layers_attr: str
    stream: str  # the name of the hidden stream (hidden_states)
    residual_name: str | None  # the name passed as the capture's residual, None for None
    loop_line: int
    norm_line: int
    return_line: int
    layer_classes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "loop": self.loop,
            "residual": self.residual,
            "layers_attr": self.layers_attr,
            "stream": self.stream,
            "residual_name": self.residual_name,
            "loop_line": self.loop_line,
            "norm_line": self.norm_line,
            "return_line": self.return_line,
            "layer_classes": list(self.layer_classes),
        }


@dataclass(frozen=True)
class Refusal:
    reason: str

    def __str__(self) -> str:
        return f"{NEEDS_HUMAN}: {self.reason}"


def decoder_shape(index: ClassIndex, decoder: ClassRef) -> DecoderShape | Refusal:
    """The decoder's loop and residual kinds, or why the bot will not edit it."""
    facts = index.class_facts(decoder)
    if facts is None:
        return Refusal(f"{decoder.name} is not in the index")
    forward = facts["methods"].get("forward")
    if forward is None:
        inherited = index.find_method(decoder, "forward")
        owner = inherited[0].name if inherited else "nowhere"
        return Refusal(
            f"{decoder.name} inherits forward from {owner}; editing a shared forward reaches "
            "other decoders"
        )
    shape = forward.get("shape")
    if shape is None:
        return Refusal(f"{decoder.name}.forward has no loop over its layers (a nested decoder?)")
    if shape["yields"]:
        return Refusal(f"{decoder.name}.forward is a generator")
    loops = shape["loops"]
    if len(loops) > 1:
        lines = ", ".join(str(loop["line"]) for loop in loops)
        return Refusal(
            f"{decoder.name}.forward loops over layers {len(loops)} times (lines {lines}): "
            "several forward paths or looped layers"
        )
    loop = loops[0]
    refused = _loop_refusal(decoder, loop)
    if refused:
        return Refusal(refused)
    call = loop["call"]
    stream = call["targets"][0]
    if stream not in _passed(call):
        return Refusal(f"the layer call at line {call['line']} does not take {stream}")
    tail = _after_loop(decoder, shape, stream)
    if isinstance(tail, Refusal):
        return tail
    norm, return_line, adds = tail
    layer_classes = _layer_classes(index, decoder, loop["attr"])
    if not layer_classes:
        return Refusal(
            f"cannot find the class of {decoder.name}.{loop['attr']}'s layers, so what a layer "
            "returns cannot be read"
        )
    returns = [_layer_returns(index, cls) for cls in layer_classes]
    names = ", ".join(c.name for c in layer_classes)
    if any(r is None for r in returns) or len({_output_shape(r) for r in returns}) != 1:
        return Refusal(f"the layers ({names}) do not all return the same shape of output")
    layer = returns[0]
    assert layer is not None
    if len(call["targets"]) == 2:
        given = call["targets"][1]
        ignored = {_receiving_param(call, given, r) in r.get("dead_params", []) for r in returns}
        if len(ignored) != 1:
            return Refusal(f"some of the layers ({names}) ignore the {given} they are given")
        layer = {**layer, "ignores_residual": ignored.pop()}
    residual = _residual_kind(index, decoder, shape, call, norm, adds, layer)
    if isinstance(residual, Refusal):
        return residual
    kind, residual_name = residual
    return DecoderShape(
        loop="enumerate" if loop["enumerate"] else loop["form"],
        residual=kind,
        layers_attr=loop["attr"],
        stream=stream,
        residual_name=residual_name,
        loop_line=loop["line"],
        norm_line=norm["line"],
        return_line=return_line,
        layer_classes=tuple(c.name for c in layer_classes),
    )


def _passed(call: dict[str, Any]) -> list[str]:
    """The expressions a layer call passes, positional and by keyword."""
    return [*call["args"], *call["keywords"].values()]


def _loop_refusal(decoder: ClassRef, loop: dict[str, Any]) -> str | None:
    where = f"{decoder.name}.forward's loop at line {loop['line']}"
    if not loop["top_level"]:
        return f"{where} is nested in another statement (a conditional forward path)"
    if loop["form"] == "whole":
        return f"{where} runs every layer, not this pipeline stage's (no start/end layer)"
    if loop["bounds"] != BOUNDS:
        bounds = ", ".join(str(b) for b in loop["bounds"])
        return f"{where} runs layers {bounds}, not self.start_layer to self.end_layer"
    if loop["enumerate"] and loop["enumerate_start"] not in (None, "self.start_layer", "0"):
        return f"{where} counts from {loop['enumerate_start']}"
    if loop["orelse"]:
        return f"{where} has an else block"
    if loop["call"] is None:
        return (
            f"{where} does not start with `hidden_states[, residual] = layer(...)`: the "
            "stream is not one layer call per step"
        )
    if loop["other_statements"]:
        return (
            f"{where} does more than call the layer ({loop['other_statements']} more "
            "statements): the stream changes between layers"
        )
    if len(loop["call"]["targets"]) not in (1, 2):
        return f"{where}: the layer returns {len(loop['call']['targets'])} values"
    return None


# The after-loop statement kinds of bot/tree/decoder_loop.py, in a maintainer's words.
_STATEMENT_WORDS = {
    "return-name": "a return of another variable",
    "return-other": "a return of an expression",
    "return-intermediate": "a return of intermediate tensors",
    "if": "a branch",
    "call": "a call",
    "add": "a sum",
    "assign": "an assignment",
    "pp-exit": "a pipeline-parallel exit",
    "for": "another loop",
    "with": "a `with` block",
    "expr": "a bare expression",
    "augassign": "an in-place update",
}


def _after_loop(
    decoder: ClassRef, shape: dict[str, Any], stream: str
) -> tuple[dict[str, Any], int, list[dict[str, Any]]] | Refusal:
    """The final norm call, the final return's line and any residual sums, in that order."""
    norm: dict[str, Any] | None = None
    adds: list[dict[str, Any]] = []
    exits = 0
    final: dict[str, Any] | None = None
    unmodelled: list[str] = []  # every statement the bot does not model, not just the first
    for stmt in shape["after"]:
        kind = stmt["kind"]
        if final is not None:
            unmodelled.append(f"code after its return (line {stmt['line']})")
        elif kind == "pp-exit":
            if norm is not None or adds:
                return Refusal(f"the pipeline exit at line {stmt['line']} follows the norm")
            exits += stmt["returns"]
        elif kind == "add" and norm is None and stmt["targets"] == [stream]:
            adds.append(stmt)
        elif kind == "call" and norm is None and stmt["targets"][0] == stream:
            if not stmt["callee"].startswith("self.") or stream not in stmt["args"][:1]:
                unmodelled.append(
                    f"line {stmt['line']} computes {stream} with {stmt['callee']}, not the "
                    "decoder's final norm"
                )
            else:
                norm = stmt
        elif kind == "return-name" and stmt["name"] == stream and norm is not None:
            final = stmt
        elif kind == "docstring":
            continue
        else:
            unmodelled.append(f"{_STATEMENT_WORDS.get(kind, 'a statement')} at line {stmt['line']}")
    if unmodelled:
        return Refusal(
            f"{decoder.name}.forward changes the stream after the loop in a way the bot "
            f"does not model: {'; '.join(unmodelled)}"
        )
    if norm is None or final is None:
        return Refusal(
            f"{decoder.name}.forward does not end with `{stream} = self.norm(...)` and "
            f"`return {stream}`"
        )
    if shape["returns"] != exits + 1:
        return Refusal(
            f"{decoder.name}.forward returns in {shape['returns']} places: several forward paths"
        )
    return norm, final["line"], adds


def _residual_kind(
    index: ClassIndex,
    decoder: ClassRef,
    shape: dict[str, Any],
    call: dict[str, Any],
    norm: dict[str, Any],
    adds: list[dict[str, Any]],
    layer: dict[str, Any],
) -> tuple[str, str | None] | Refusal:
    stream = call["targets"][0]
    arities = layer["arities"]
    if len(call["targets"]) == 1:
        if arities != [1]:
            return Refusal(f"the loop takes one value from a layer that returns {arities}")
        if adds or len(norm["args"]) != 1:
            return Refusal("the stream is summed after the loop though layers return one tensor")
        if "residual" in shape["assigned"]:
            return Refusal(
                f"{decoder.name}.forward keeps a residual though its layers return one tensor"
            )
        return "no-residual", None
    residual = call["targets"][1]
    if arities != [2]:
        return Refusal(f"the loop unpacks two values from a layer that returns {arities}")
    if residual not in _passed(call):
        return Refusal(f"the layer call at line {call['line']} does not take back {residual}")
    if layer.get("ignores_residual"):
        # Each layer rebinds the residual it is given before reading it: the stream a layer
        # sees is the first output alone, whatever the decoder does with the second.
        if adds:
            return Refusal(
                f"the layers ignore the {residual} they are given, yet the decoder adds it to "
                f"{stream} after the loop"
            )
        if norm["args"] == [stream] or (
            norm["args"] == [stream, residual] and _norm_passes_through(index, decoder, norm)
        ):
            return "full-stream-pair", None
        return Refusal(
            f"the layers ignore the {residual} they are given, but the final norm (line "
            f"{norm['line']}) takes it: whether it adds {residual} to the stream is not clear"
        )
    if norm["args"] == [stream, residual] and not adds:
        return "residual-stream", residual
    added = [a for a in adds if a["operands"] == sorted([stream, residual])]
    if len(added) == 1 and len(adds) == 1 and norm["args"] == [stream]:
        return "explicit-add", residual
    if not adds and norm["args"] == [stream]:
        if layer["summed_first"]:
            return "full-stream-pair", None
        return Refusal(
            f"the layers return ({stream}, {residual}) but the decoder never adds {residual} "
            "back, and the layer's forward does not show its first output is the whole stream"
        )
    return Refusal(
        f"cannot tell from the final norm (line {norm['line']}) whether {residual} is part of "
        "the stream"
    )


def _output_shape(returns: dict[str, Any] | None) -> tuple[tuple[int, ...], bool]:
    returns = returns or {}
    return tuple(returns.get("arities", ())), bool(returns.get("summed_first"))


def _receiving_param(call: dict[str, Any], value: str, layer: dict[str, Any]) -> str | None:
    """The layer ``forward``'s parameter the call passes ``value`` to."""
    for name, passed in call["keywords"].items():
        if passed == value:
            return str(name)
    params = layer.get("params", [])
    if value in call["args"] and call["args"].index(value) < len(params):
        return str(params[call["args"].index(value)])
    return None


def _norm_passes_through(index: ClassIndex, decoder: ClassRef, norm: dict[str, Any]) -> bool:
    """Whether every class the final norm can be hands its second argument back unused
    (Cohere's ``LayerNorm.forward(hidden_states, residuals)``), so it adds nothing."""
    callee = str(norm.get("callee", ""))
    if not callee.startswith("self.") or callee.count(".") != 1:
        return False
    classes = _layer_classes(index, decoder, callee.removeprefix("self."))
    facts = [_layer_returns(index, cls) for cls in classes]
    return bool(facts) and all(
        f is not None
        and len(f.get("params", [])) > 1
        and f["params"][1] in f.get("passthrough_params", [])
        for f in facts
    )


def _layer_classes(index: ClassIndex, decoder: ClassRef, attr: str) -> list[ClassRef]:
    init = index.find_method(decoder, "__init__")
    if init is None:
        return []
    owner, facts = init
    names = facts.get("built_from", {}).get(attr, [])
    classes: list[ClassRef] = []
    # A module-level map of layer classes picked by key (`LAYER_TYPES[kind](...)`).
    maps = index.modules[owner.module].facts.get("class_maps", {})
    names = [n for name in names for n in maps.get(name, [name])]
    for name in names:
        if name.split(".")[-1] in _NOT_LAYERS:
            continue
        for ref in index.resolve(owner.module, name):
            if isinstance(ref, ClassRef) and index.find_method(ref, "forward") is not None:
                classes.append(ref)
    return sorted(set(classes))


def _layer_returns(index: ClassIndex, layer: ClassRef) -> dict[str, Any] | None:
    found = index.find_method(layer, "forward")
    if found is None:
        return None
    returns = found[1].get("layer_returns")
    return returns if isinstance(returns, dict) and returns.get("arities") else None


def absolute_convention(index: ClassIndex, enabled: list[ClassRef]) -> bool:
    """Whether the tree's EAGLE-3 decoders count layers absolutely
    (``enumerate(..., start=self.start_layer)``); the bot follows that form when any does."""
    for decoder in enabled:
        facts = index.class_facts(decoder)
        shape = (facts or {}).get("methods", {}).get("forward", {}).get("shape")
        for loop in (shape or {}).get("loops", []):
            if loop.get("enumerate_start") == "self.start_layer":
                return True
    return False
