"""Can the decoder of a text model learn to collect aux hidden states by a mechanical edit?

Reads the cached per-file facts only (:mod:`bot.tree.decoder_loop`): the decoder's layer loop,
what follows it, and the layer's own ``forward``. The answer is a :class:`DecoderShape` with a
named loop kind and residual kind, or a refusal with the reason a human has to look.

Loop kinds (how the layers are iterated):

- ``slice``: ``for layer in self.layers[self.start_layer : self.end_layer]``
- ``islice``: ``for layer in islice(self.layers, self.start_layer, self.end_layer)``
- ``enumerate``: either of the above under ``enumerate(...)`` (the index is reused)
- ``range``: ``for i in range(self.start_layer, self.end_layer): layer = self.layers[i]``
- ``whole``: ``for layer in self.layers`` in a decoder whose ``make_layers`` sets
  ``self.start_layer`` / ``self.end_layer``: rewritten to this stage's slice
  (``self.layers[self.start_layer : self.end_layer]``, the form upstream's decoders use; the
  same layers when pipeline parallelism is off, which the mixin's default keeps for EAGLE-3)
- ``every``: ``for layer in self.layers`` in a decoder with no stage bounds whose target does
  not declare ``SupportsPP`` (Zamba2): no pipeline stage ever splits it, so every layer is the
  one stage's; counted from ``0`` with ``enumerate(self.layers)``, as upstream's own
  ``nn.ModuleList`` decoders capture (``MBartDecoderNoPos``)

A loop may also rebind the stream from the layer's output right after the call
(``layer_outputs = layer(...)`` then ``hidden_states = layer_outputs``): the stream is that name.

A loop may call its layer by the same statement in both branches of an ``if`` on the layer
(DeciLM's ``if not layer._is_no_op_attention:``), the rest of each branch bookkeeping: one layer
call per step, captured after the ``if``.

A loop may start with bookkeeping the stream cannot depend on (``if isinstance(layer, X):
num_attn += 1``, counting into a name nothing reads) before the layer call.

A decoder whose ``forward`` has no loop of its own and calls a child module once as
``hidden_states, residual = self.layers(...)`` (Plamo3) is read as the child's loop with what
follows the call in the decoder: the two-module form. A decoder whose ``forward`` hands one
looping child's output back whole (OPT's ``return self.decoder(...)``, ChatGLM's
``hidden_states = self.encoder(...)`` then ``return hidden_states``) is the child-decoder form:
the child is a whole decoder of its own (loop, final norm, return), read as any decoder, and
it is the child that collects (``inner``; the target's two methods reach it). Other decoders
without a loop are refused with how they reach their layers (in a loop of their own, through
their own methods, or several children).

After the loop, a step the stream takes only under a flag of the module
(``if self.post_layer_norm: hidden_states = self.final_layernorm(hidden_states)``, OPT's
optional ``project_out``) is read where the layers return the one full stream: what is
captured between layers does not depend on it (``final_norm`` is then ``conditional``: which
norm the returned stream went through depends on the config).

Residual kinds (what the stream after a layer is, decided from the layer's ``forward`` and the
final norm's call):

- ``residual-stream``: layers return ``(hidden_states, residual)`` and the final norm adds them
  (``self.norm(hidden_states, residual)``): captured as ``hidden_states + residual``
- ``explicit-add``: the same pair, summed by ``hidden_states = hidden_states + residual`` after
  the loop (then normed, or returned for the target to norm, as MiMo's is): captured as
  ``hidden_states + residual``
- ``no-residual``: layers return one tensor, the full stream: captured with ``residual=None``
- ``full-stream-pair``: layers return a pair whose first element their own ``forward`` already
  summed, and the decoder never adds the residual back; or each layer rebinds the residual it
  is given before reading it (what a layer sees is the first output alone) and the final norm
  takes the stream alone or hands the residual back unused (Cohere's ``LayerNorm``): captured
  with ``residual=None`` (adding it would count it twice); where every layer returns
  ``(hidden_states, None)`` (Gemma 4) the residual is passed by name, ``None`` after any layer
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from typing import Any

from bot.jsonio import JsonRecord
from bot.tree.index import ClassIndex, ClassRef

NEEDS_HUMAN = "needs a human"
LOOP_KINDS = ("slice", "islice", "enumerate", "range", "whole", "every")
RESIDUAL_KINDS = ("residual-stream", "explicit-add", "no-residual", "full-stream-pair")
BOUNDS = ["self.start_layer", "self.end_layer"]
# Base classes that are not a decoder layer (the last pipeline stage's placeholders).
_NOT_LAYERS = frozenset({"PPMissingLayer", "ModuleList", "Identity"})


@dataclass(frozen=True)
class DecoderShape(JsonRecord):
    loop: str  # one of LOOP_KINDS
    residual: str  # one of RESIDUAL_KINDS
    layers_attr: str
    stream: str  # the name of the hidden stream (hidden_states)
    residual_name: str | None  # the name passed as the capture's residual, None for None
    loop_line: int
    norm_line: int
    return_line: int
    layer_classes: tuple[str, ...]
    # "decoder": `h = self.norm(...)` before the return; "when-residual": the norm takes the
    # residual when there is one (`if residual is None: ... else: ...`); "target": no norm in
    # the decoder, the target applies it (Step-3.5's compute_logits); "conditional": the
    # stream's finishing steps run under flags of the module (`if self.post_layer_norm: ...`)
    final_norm: str = "decoder"
    # A nested decoder (Plamo3): the loop lives in the class `child`, built at
    # `self.<child_attr>` and called once by this decoder's forward
    child: str | None = None
    child_attr: str | None = None
    # The child-decoder form (OPT): the decoder hands `self.<inner_attr>`'s output back whole,
    # and the class `inner` built there is the whole decoder this shape is of (it collects)
    inner: str | None = None
    inner_attr: str | None = None
    # The lines of the capture the loop wrote itself before EagleModelMixin
    # (``if i in self.aux_hidden_state_layers: aux_hidden_states.append(...)``): the plan
    # replaces it with the mixin's (bot.codemods.legacy_capture)
    legacy_capture: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        nested = {"child": self.child, "child_attr": self.child_attr} if self.child else {}
        if self.inner:
            nested |= {"inner": self.inner, "inner_attr": self.inner_attr}
        legacy = {"legacy_capture": list(self.legacy_capture)} if self.legacy_capture else {}
        return {
            **nested,
            **legacy,
            "loop": self.loop,
            "residual": self.residual,
            "layers_attr": self.layers_attr,
            "stream": self.stream,
            "residual_name": self.residual_name,
            "loop_line": self.loop_line,
            "norm_line": self.norm_line,
            "return_line": self.return_line,
            "layer_classes": list(self.layer_classes),
            "final_norm": self.final_norm,
        }


@dataclass(frozen=True)
class Refusal:
    reason: str

    def __str__(self) -> str:
        return f"{NEEDS_HUMAN}: {self.reason}"


def decoder_shape(
    index: ClassIndex, decoder: ClassRef, staged: bool = True
) -> DecoderShape | Refusal:
    """The decoder's loop and residual kinds, or why the bot will not edit it. ``staged``:
    whether a pipeline stage may split the decoder (its target declares ``SupportsPP``)."""
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
        inner = _inner_shape(index, decoder, forward.get("delegation"), staged)
        if inner is not None:
            return inner
        nested = _nested_shape(index, decoder, forward.get("delegation"))
        if isinstance(nested, Refusal) and nested.reason.endswith(_NO_CHILD):
            return _unnested_refusal(index, decoder, forward) or nested
        return nested
    return _loop_shape(index, decoder, shape, staged=staged)


def _loop_shape(
    index: ClassIndex,
    decoder: ClassRef,
    shape: dict[str, Any],
    parent: tuple[ClassRef, dict[str, Any], dict[str, Any]] | None = None,
    staged: bool = True,
) -> DecoderShape | Refusal:
    """The shape of ``decoder``'s own layer loop. With ``parent`` (the decoder that calls this
    one, its call's facts and its forward's delegation facts), ``decoder`` is the child of a
    nested decoder: its forward must hand back exactly what the loop assigns, and what follows
    is read in the parent's forward after the call."""
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
    stage_bounds = _binds_stage_bounds(index, decoder)
    refused = _loop_refusal(decoder, loop, stage_bounds, staged)
    if refused:
        return Refusal(refused)
    call = loop["call"]
    if alias := loop.get("alias"):
        call = {**call, "targets": [alias["name"]]}  # `hidden_states = layer_outputs`
    stream = call["targets"][0]
    if stream not in _passed(call):
        return Refusal(f"the layer call at line {call['line']} does not take {stream}")
    tail_of = decoder
    if parent is not None:
        returned = _child_returns(decoder, shape, call)
        if returned:
            return Refusal(returned)
        tail_of, parent_call, delegated = parent
        if parent_call["targets"] != call["targets"] or not set(call["targets"]) <= set(
            _passed(parent_call)
        ):
            return Refusal(
                f"{tail_of.name}.forward does not call self.{parent_call['attr']} with the "
                f"names its loop hands back ({', '.join(call['targets'])}) and take them back"
            )
        shape = {**shape, "after": parent_call["after"], "returns": delegated["returns"]}
    tail = _after_loop(tail_of, shape, call)
    casts = [
        f"the stream is float32 between layers (line {c['line']}: `{c['value']}`), so the "
        "captured states would be float32 where the drafter takes the model's dtype"
        for c in shape.get("casts", [])
        if c["name"] == stream
    ]
    carried = _carried_beside(index, decoder, loop["attr"], shape, call)
    if isinstance(tail, Refusal) and carried:
        casts.append(carried)  # named with the tail's blockers: the norm question never comes
    if casts:
        reasons = [tail.reason] if isinstance(tail, Refusal) else []
        return Refusal("; and ".join([*reasons, *casts]))
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
        layer = {
            **layer,
            "ignores_residual": ignored.pop(),
            "hands_back_none": all(r.get("second_none") for r in returns),
        }
    residual = _residual_kind(index, decoder, shape, call, norm, adds, layer)
    if isinstance(residual, Refusal):
        return residual
    kind, residual_name = residual
    form = "enumerate" if loop["enumerate"] else loop["form"]  # "whole": never enumerated
    return DecoderShape(
        loop="every" if loop["form"] == "whole" and not stage_bounds else form,
        residual=kind,
        layers_attr=loop["attr"],
        stream=stream,
        residual_name=residual_name,
        loop_line=loop["line"],
        norm_line=norm["line"] if norm is not None else return_line,
        return_line=return_line,
        layer_classes=tuple(c.name for c in layer_classes),
        final_norm=(
            "target"
            if norm is None
            else "when-residual"
            if norm.get("optional")
            else "conditional"
            if norm.get("conditional")
            else "decoder"
        ),
        legacy_capture=tuple(loop.get("legacy_capture", ())),
    )


def _carried_beside(
    index: ClassIndex, decoder: ClassRef, attr: str, shape: dict[str, Any], call: dict[str, Any]
) -> str | None:
    """Why a pair the loop unpacks is not the stream and its residual, where nothing after the
    loop reads the second value and the layer does not show its first is the whole stream
    (Zaya's ``hidden_states, router_states = layer(...)``: the router's state for the next
    layer's router); None otherwise."""
    if len(call["targets"]) != 2:
        return None
    stream, second = call["targets"]
    if any(second in s.get("reads", [second]) for s in shape["after"]):
        return None
    returns = [_layer_returns(index, cls) for cls in _layer_classes(index, decoder, attr)]
    if returns and all(r is not None and r["summed_first"] for r in returns):
        return None
    return (
        f"the layers hand back ({stream}, {second}) and nothing after the loop reads {second}: "
        f"it is carried from layer to layer beside the stream, not a residual the decoder adds "
        f"back, and the layer's forward does not show that {stream} alone is the whole stream"
    )


def _nested_shape(
    index: ClassIndex, decoder: ClassRef, delegated: dict[str, Any] | None
) -> DecoderShape | Refusal:
    """A decoder whose loop lives in a child module it calls once (Plamo3's ``Plamo3Model``
    calling ``self.layers = Plamo3Decoder(...)``): the child's loop shape, with what follows
    the call read in this decoder's forward. Refused when the child is called in a loop, when
    several children loop, or when the child is not at ``self.layers`` (the interface's
    default counts layers with ``len(model.layers)``, which the child's ``__len__`` answers)."""
    where = f"{decoder.name}.forward"
    if delegated is None:
        return Refusal(f"{where}{_NO_CHILD}")
    if delegated["yields"]:
        return Refusal(f"{where} is a generator")
    looped = sorted({c["attr"] for c in delegated["looped"] if _looping_child(index, decoder, c)})
    if looped:
        names = ", ".join(f"self.{attr}" for attr in looped)
        line = min(c["line"] for c in delegated["looped"] if c["attr"] in looped)
        return Refusal(
            f"{where} runs its child modules ({names}) inside a loop (line {line}): each of "
            "their layers runs several times per token, so there is no one stream per layer "
            "to capture"
        )
    children = [
        (call, child)
        for call in delegated["calls"]
        for child in [_looping_child(index, decoder, call)]
        if child is not None
    ]
    if not children:
        return Refusal(f"{where}{_NO_CHILD}")
    if len(children) != 1:
        found = ", ".join(f"self.{call['attr']}" for call, _ in children)
        return Refusal(f"{where} has no loop over its layers and calls several that do ({found})")
    call, child = children[0]
    if index.path_of(child) != index.path_of(decoder):
        return Refusal(f"{where} loops in {child.name}, which is not in {decoder.name}'s module")
    if call["attr"] != "layers":
        return Refusal(
            f"{where} loops in self.{call['attr']} ({child.name}), not self.layers: the "
            "interface's default counts the layers with len(model.layers)"
        )
    child_facts = index.class_facts(child)
    assert child_facts is not None  # _looping_child found its forward
    shape = _loop_shape(
        index, child, child_facts["methods"]["forward"]["shape"], (decoder, call, delegated)
    )
    if isinstance(shape, Refusal):
        return Refusal(f"{where} loops in {child.name}: {shape.reason}")
    return replace(shape, child=child.name, child_attr=call["attr"])


_NO_CHILD = " has no loop over its layers and calls no child module that has one"


def _inner_shape(
    index: ClassIndex, decoder: ClassRef, delegated: dict[str, Any] | None, staged: bool
) -> DecoderShape | Refusal | None:
    """The child-decoder form: ``decoder.forward`` has no loop, calls one looping child once
    and hands its output back whole (``return self.decoder(...)``, or ``h = self.encoder(...)``
    then ``return h``). The child is read as a whole decoder (its loop and what follows it);
    None when the form does not apply (the two-module form and the refusals are asked then)."""
    if delegated is None or delegated["yields"] or delegated["looped"]:
        return None
    children = [
        (call, child)
        for call in delegated["calls"]
        for child in [_looping_child(index, decoder, call)]
        if child is not None
    ]
    if len(children) != 1 or delegated["returns"] != 1:
        return None
    call, child = children[0]
    after = [s for s in call["after"] if s["kind"] != "docstring"]
    whole = call.get("returned") or (
        len(call["targets"]) == 1
        and len(after) == 1
        and after[0]["kind"] == "return-name"
        and after[0]["name"] == call["targets"][0]
    )
    if not whole:
        return None
    where = f"{decoder.name}.forward hands self.{call['attr']}'s output back whole"
    if index.path_of(child) != index.path_of(decoder):
        return Refusal(f"{where}, and {child.name} is not in {decoder.name}'s module")
    child_facts = index.class_facts(child)
    assert child_facts is not None  # _looping_child found its forward
    shape = _loop_shape(index, child, child_facts["methods"]["forward"]["shape"], staged=staged)
    if isinstance(shape, Refusal):
        return Refusal(f"{where}: {shape.reason}")
    return replace(shape, inner=child.name, inner_attr=call["attr"])


def _unnested_refusal(
    index: ClassIndex, decoder: ClassRef, forward: dict[str, Any]
) -> Refusal | None:
    """Where a decoder without a loop of its own does reach looping children, but not by the
    one ``h, r = self.layers(...)`` assignment of the two-module form: say how it reaches them
    (OPT hands ``self.decoder(...)`` back whole; Gemma 3n goes through two of its own methods
    to two child decoders)."""
    where = f"{decoder.name}.forward"
    direct = _children_named(index, decoder, forward.get("calls", []))
    if direct:
        return Refusal(
            f"{where} has no loop over its layers: they run in {direct}, which does more than "
            f"hand back (hidden_states, residual) to one `hidden_states, residual = "
            f"self.layers(...)` call, so it is not the two-module form (Plamo3's) the bot writes"
        )
    via: list[str] = []
    for name in forward.get("calls", []):
        method = index.find_method(decoder, name) if name != "forward" else None
        if method and (children := _children_named(index, decoder, method[1].get("calls", []))):
            via.append(f"{name} -> {children}")
    if not via:
        return None
    return Refusal(
        f"{where} has no loop over its layers: it reaches them through its own methods "
        f"({'; '.join(via)}): "
        + ("several forward paths, " if len(via) > 1 else "")
        + "not the two-module form (Plamo3's) the bot writes"
    )


def _children_named(index: ClassIndex, decoder: ClassRef, attrs: list[str]) -> str:
    found = [
        f"self.{attr} ({child.name})"
        for attr in attrs
        if (child := _looping_child(index, decoder, {"attr": attr})) is not None
    ]
    return ", ".join(found)


def _looping_child(index: ClassIndex, decoder: ClassRef, call: dict[str, Any]) -> ClassRef | None:
    """The class built at ``self.<attr>`` whose own ``forward`` loops over layers, if one."""
    for cls in _layer_classes(index, decoder, call["attr"]):
        facts = index.class_facts(cls)
        if (facts or {}).get("methods", {}).get("forward", {}).get("shape") is not None:
            return cls
    return None


def _child_returns(child: ClassRef, shape: dict[str, Any], call: dict[str, Any]) -> str | None:
    """Why a nested decoder's child does not hand back exactly what its loop assigns, if so."""
    targets = call["targets"]
    wanted = ", ".join(targets)
    after = [s for s in shape["after"] if s["kind"] != "docstring"]
    value = after[0].get("value") if len(after) == 1 else None
    if shape["returns"] == 1 and value in (wanted, f"({wanted})"):
        return None
    return f"{child.name}.forward does not end its loop with `return {wanted}` alone"


def _passed(call: dict[str, Any]) -> list[str]:
    """The expressions a layer call passes, positional and by keyword."""
    return [*call["args"], *call["keywords"].values()]


def _binds_stage_bounds(index: ClassIndex, decoder: ClassRef) -> bool:
    """Whether the decoder's ``__init__`` sets ``self.start_layer`` and ``self.end_layer``
    (``make_layers`` does), so its stage's slice can be written."""
    init = index.find_method(decoder, "__init__")
    built = init[1].get("built_from", {}) if init else {}
    return "start_layer" in built and "end_layer" in built


def _loop_refusal(
    decoder: ClassRef, loop: dict[str, Any], stage_bounds: bool, staged: bool = True
) -> str | None:
    where = f"{decoder.name}.forward's loop at line {loop['line']}"
    if not loop["top_level"]:
        outer = loop.get("enclosing") or {}
        if outer.get("kind") in ("for", "while"):
            return (
                f"{where} runs inside another loop (`{outer['header']}`, line {outer['line']}): "
                "every layer runs once per pass of it, several times per token, so there is no "
                "one stream per layer to capture"
            )
        if outer.get("kind") == "if":
            return (
                f"{where} is nested in `{outer['header']}:` (line {outer['line']}), a "
                "conditional forward path"
            )
        return f"{where} is nested in another statement (a conditional forward path)"
    if loop["form"] == "whole" and not stage_bounds and staged:
        return (
            f"{where} runs every layer of self.{loop['attr']}, and {decoder.name} keeps no "
            "self.start_layer / self.end_layer to count this pipeline stage's layers from, "
            "though its target declares SupportsPP"
        )
    if loop["form"] == "whole" and not stage_bounds:
        if loop["enumerate"] and loop["enumerate_start"] not in (None, "0"):
            return f"{where} counts from {loop['enumerate_start']}"
        # no pipeline stage splits it: every layer is this stage's, counted from 0
    elif loop["form"] == "whole":
        if loop["enumerate"]:
            return f"{where} counts every layer of self.{loop['attr']} with enumerate"
        # rewritten to this stage's slice, as upstream's decoders loop
    elif loop["bounds"] != BOUNDS:
        bounds = ", ".join(str(b) for b in loop["bounds"])
        return f"{where} runs layers {bounds}, not self.start_layer to self.end_layer"
    if loop["enumerate"] and loop["enumerate_start"] not in (None, "self.start_layer", "0"):
        return f"{where} counts from {loop['enumerate_start']}"
    if loop["orelse"]:
        return f"{where} has an else block"
    if loop["call"] is None and (late := loop.get("late_call")):
        return _late_call_refusal(where, late)
    other = loop.get("other_call") if loop["call"] is None else None
    if other and other["kind"] == "branched":
        why = (
            "(the same call in both branches), but a branch does more than bookkeeping (or the "
            "test calls something): the stream may change between layers"
            if other["same"]
            else "(a different call in each): the step is not one layer call"
        )
        return f"{where} calls the layer inside `if {other['test']}:` / `else:` {why}"
    if other and other["kind"] == "method":
        return (
            f"{where} calls {other['callee']}(...), which hands back "
            f"({', '.join(other['targets'])}) rather than the hidden stream: there is no "
            "stream per layer to capture"
        )
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


def _late_call_refusal(where: str, late: dict[str, Any]) -> str:
    """Every reason a loop whose layer call follows other work is not one layer per step."""
    targets = late["targets"]
    problems = []
    if late["rebinds"]:
        lines = ", ".join(str(line) for line in late["rebinds"])
        plural = "s" if len(late["rebinds"]) > 1 else ""
        problems.append(
            f"changes {', '.join(late['rebound'])} before the layer call (line{plural} {lines}): "
            "the stream a layer gets is not the one the previous layer handed back"
        )
    else:
        many = "s" if late["before"] > 1 else ""
        problems.append(
            f"does {late['before']} statement{many} of more than bookkeeping before the layer "
            f"call (line {late['line']})"
        )
    if len(targets) > 2:
        problems.append(
            f"the layer returns {len(targets)} values ({', '.join(targets)}): the stream is "
            "carried in more than one tensor between layers"
        )
    if late["after"]:
        many = "s" if late["after"] > 1 else ""
        verb = "change" if many else "changes"
        problems.append(f"{late['after']} statement{many} after the layer call {verb} the stream")
    return f"{where} " + "; ".join(problems)


def _after_loop(
    decoder: ClassRef, shape: dict[str, Any], call: dict[str, Any]
) -> tuple[dict[str, Any] | None, int, list[dict[str, Any]]] | Refusal:
    """The final norm call (None when the decoder leaves it to the target, as Step-3.5's
    ``compute_logits`` does), the final return's line and any residual sums, in that order.
    Every statement the bot cannot read is named, not only the first."""
    stream = call["targets"][0]
    residual = call["targets"][1] if len(call["targets"]) == 2 else None
    norm: dict[str, Any] | None = None
    adds: list[dict[str, Any]] = []
    exits = 0
    final: dict[str, Any] | None = None
    problems: list[str] = []
    flagged: list[dict[str, Any]] = []  # steps under a flag of the module (no residual only)
    for stmt in shape["after"]:
        kind, line = stmt["kind"], stmt["line"]
        if final is not None:
            problems.append(f"it has code after its return (line {line})")
            break
        if kind == "pp-exit":
            if norm is not None or adds or flagged:
                problems.append(f"the pipeline exit at line {line} follows the final norm")
            exits += stmt["returns"]
        elif kind == "if" and residual is None and _flagged_step(stmt, stream):
            flagged.append(stmt)
        elif kind == "add" and norm is None and stmt["targets"] == [stream]:
            adds.append(stmt)
        elif (
            kind == "assign"
            and adds
            and norm is None
            and residual is not None
            and stmt["targets"] == [residual]
            and stmt.get("value") == stream
        ):
            continue  # `residual = hidden_states` after the sum: the final norm does not read it
        elif kind == "call" and norm is None and stmt["targets"][0] == stream:
            if not stmt["callee"].startswith("self.") or stream not in stmt["args"][:1]:
                problems.append(
                    f"line {line} computes {stream} with {stmt['callee']}, not the decoder's "
                    "final norm"
                )
            norm = stmt
        elif kind == "return-name" and stmt["name"] == stream:
            final = stmt
        elif kind != "docstring":
            problems.append(_unread_statement(stmt, stream))
    returns_other = any(s["kind"] == "return-other" for s in shape["after"])
    if final is None and not returns_other:  # a return of something else says it already
        problems.append(f"it does not end with `return {stream}`")
    if shape["returns"] != exits + 1:
        problems.append(f"it returns in {shape['returns']} places: several forward paths")
    if problems:
        return Refusal(
            f"after the layer loop, {decoder.name}.forward does what the bot cannot match to "
            "the standard capture: " + "; ".join(dict.fromkeys(problems))
        )
    assert final is not None
    if flagged:
        # the stream alone goes through whichever steps the config turns on
        return (
            {"line": flagged[0]["line"], "args": [stream], "conditional": True},
            final["line"],
            adds,
        )
    return norm, final["line"], adds


def _flagged_step(stmt: dict[str, Any], stream: str) -> bool:
    """``if <flag of self>: <stream> = self.<m>(<stream>)`` (or ``<stream>, _ = ...``), with
    no ``else`` and no return: a finishing step of the stream chosen by the module's config
    (ChatGLM's ``if self.post_layer_norm:``, OPT's ``if self.project_out is not None:``)."""
    if stmt["returns"] or stmt.get("else") or len(stmt.get("then", [])) != 1:
        return False
    try:
        test = ast.parse(stmt["test"], mode="eval").body
        (then,) = ast.parse(stmt["then"][0]).body
    except (SyntaxError, ValueError):
        return False  # quoted cut short
    if any(isinstance(n, ast.Name) and n.id != "self" for n in ast.walk(test)) or any(
        isinstance(n, ast.Call) for n in ast.walk(test)
    ):
        return False
    if not (isinstance(then, ast.Assign) and len(then.targets) == 1):
        return False
    target, value = then.targets[0], then.value
    names = target.elts if isinstance(target, ast.Tuple) else [target]
    first = names[0]
    return (
        isinstance(first, ast.Name)
        and first.id == stream
        and all(isinstance(n, ast.Name) and n.id == "_" for n in names[1:])
        and isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id == "self"
        and [ast.unparse(a) for a in value.args] == [stream]
        and not value.keywords
    )


def _unread_statement(stmt: dict[str, Any], stream: str) -> str:
    """A statement after the loop the bot does not model, in the words of its code."""
    kind, line = stmt["kind"], stmt["line"]
    if kind in ("if", "pp-exit"):
        paths = [
            f"{label}: `{'; '.join(stmt[key])}`"
            for key, label in (("then", "if so"), ("else", "otherwise"))
            if stmt.get(key)
        ]
        done = f" ({', '.join(paths)})" if paths else ""
        return (
            f"line {line} branches on `{stmt.get('test', '?')}`{done}, a second way of finishing "
            "the stream that a capture written for one path does not follow"
        )
    value = stmt.get("value") or "?"
    if kind == "return-other" and value.startswith("self.") and stream in value:
        return (
            f"line {line} applies the final norm inside the return (`return {value}`); the "
            f"capture edit needs it assigned first (`{stream} = ...`) and `return {stream}`"
        )
    if kind.startswith("return"):
        return f"line {line} returns `{value}` rather than {stream} by name"
    if kind == "call":
        targets = ", ".join(stmt["targets"])
        return f"line {line} sets {targets} from {stmt['callee']}(...)"
    if kind in ("add", "assign"):
        return f"line {line} rebinds {', '.join(stmt['targets'])}"
    return f"line {line} has a `{kind}` statement"


def _residual_kind(
    index: ClassIndex,
    decoder: ClassRef,
    shape: dict[str, Any],
    call: dict[str, Any],
    norm: dict[str, Any] | None,
    adds: list[dict[str, Any]],
    layer: dict[str, Any],
) -> tuple[str, str | None] | Refusal:
    stream = call["targets"][0]
    arities = layer["arities"]
    if len(call["targets"]) == 1:
        if arities != [1]:
            return Refusal(f"the loop takes one value from a layer that returns {arities}")
        if norm is None and not adds:
            return "no-residual", None  # the stream itself is returned; the target norms it
        if adds or norm is None or len(norm["args"]) != 1:
            return Refusal("the stream is summed after the loop though layers return one tensor")
        if "residual" in shape["assigned"]:
            return Refusal(
                f"{decoder.name}.forward keeps a residual though its layers return one tensor"
            )
        return "no-residual", None
    residual = call["targets"][1]
    if arities != [2]:
        return Refusal(f"the loop unpacks two values from a layer that returns {arities}")
    summed = [a for a in adds if a["operands"] == sorted([stream, residual])]
    if norm is None and not (len(summed) == 1 == len(adds) and residual in _passed(call)):
        return Refusal(
            f"{decoder.name}.forward has no final norm and its layers return ({stream}, "
            f"{residual}): whether {residual} is part of the stream cannot be read"
        )
    if norm is None and not layer.get("ignores_residual"):
        # `hidden_states = hidden_states + residual` and the sum returned (MiMo): the target
        # applies the norm
        return "explicit-add", residual
    if norm is None:
        return Refusal(
            f"the layers ignore the {residual} they are given, yet the decoder adds it to "
            f"{stream} after the loop"
        )
    if norm.get("optional") not in (None, residual):
        return Refusal(
            f"the final norm (line {norm['line']}) is picked by whether {norm['optional']} is "
            f"None, not {residual}"
        )
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
        if layer.get("hands_back_none") and norm["args"] in ([stream], [stream, residual]):
            # Every layer returns `(h, None)` (Gemma 4): after any layer the residual is None,
            # so the capture may pass it by name, as upstream's Gemma 4 capture does.
            return "full-stream-pair", residual
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
    if len(summed) == 1 and len(adds) == 1 and norm["args"] == [stream]:
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


def _layer_returns(
    index: ClassIndex, layer: ClassRef, method: str = "forward", depth: int = 2
) -> dict[str, Any] | None:
    """What ``layer.<method>`` returns, following ``return self._helper(...)`` into the helper
    (Flint's layers return through ``_post_attention``) up to ``depth`` calls deep."""
    found = index.find_method(layer, method)
    if found is None:
        return None
    returns = found[1].get("layer_returns")
    if not isinstance(returns, dict):
        return None
    arities = set(returns.get("arities", []))
    summed = bool(returns.get("summed_first"))
    for helper in returns.get("delegates", []):
        followed = _layer_returns(index, layer, helper, depth - 1) if depth else None
        if followed is None:
            return None
        arities.update(followed["arities"])
        summed = summed or bool(followed["summed_first"])
    if not arities:
        return None
    return {**returns, "arities": sorted(arities), "summed_first": summed}


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
