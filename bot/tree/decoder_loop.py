"""The syntactic shape of a decoder's ``forward``: its loop over the layers, as plain data.

Extracted with ``ast`` together with the rest of a file's facts (and cached with them by content
hash), so the decoder-enabling recipe's analysis reads dictionaries, never source. Nothing here
decides whether a shape is safe to patch: :mod:`bot.recipes.eagle3_enable.analysis` does, from
these facts and the layer's own ``forward``.
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import Any


def _dotted(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _text(node: ast.expr | None) -> str | None:
    return ast.unparse(node) if node is not None else None


def _short(node: ast.expr, limit: int = 60) -> str:
    """An expression as a reader would quote it in a sentence, cut at ``limit`` characters."""
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _self_attr(node: ast.expr) -> str | None:
    dotted = _dotted(node)
    if dotted and dotted.startswith("self.") and dotted.count(".") == 1:
        return dotted[len("self.") :]
    return None


def _iterable(node: ast.expr) -> dict[str, Any] | None:
    """What a loop iterates over: ``self.X[a:b]``, ``islice(self.X, a, b)``, ``self.X`` or
    ``range(a, b)``; None for anything else."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        attr = _self_attr(node.value)
        if attr and node.slice.step is None:
            bounds = [_text(node.slice.lower), _text(node.slice.upper)]
            return {"form": "slice", "attr": attr, "bounds": bounds}
    if attr := _self_attr(node):
        return {"form": "whole", "attr": attr, "bounds": [None, None]}
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    callee, args = _dotted(node.func), node.args
    if callee in ("islice", "itertools.islice") and len(args) == 3 and _self_attr(args[0]):
        return {
            "form": "islice",
            "attr": _self_attr(args[0]),
            "bounds": [_text(a) for a in args[1:]],
        }
    inner = args[0] if len(args) == 3 else None
    if (
        callee in ("islice", "itertools.islice")
        and isinstance(inner, ast.Call)
        and _dotted(inner.func) == "enumerate"
        and len(inner.args) == 1
        and not inner.keywords
        and _self_attr(inner.args[0])
    ):
        # `islice(enumerate(self.X), a, b)`: read (and refused) like its plain form
        return {
            "form": "islice",
            "attr": _self_attr(inner.args[0]),
            "bounds": [_text(a) for a in args[1:]],
            "enumerated_inside": True,
        }
    if callee == "range" and len(args) == 2:
        return {"form": "range", "attr": None, "bounds": [_text(a) for a in args]}
    return None


def _loop(node: ast.For, loaded: frozenset[str] = frozenset()) -> dict[str, Any] | None:
    """One ``for`` statement over the layers, or None when it iterates over something else
    (``loaded``: the names the whole ``forward`` reads)."""
    iterable = node.iter
    enumerate_start: str | None = None
    enumerated = False
    if isinstance(iterable, ast.Call) and _dotted(iterable.func) == "enumerate":
        if len(iterable.args) != 1:
            return None
        for keyword in iterable.keywords:
            if keyword.arg != "start":
                return None
            enumerate_start = _text(keyword.value)
        enumerated, iterable = True, iterable.args[0]
    found = _iterable(iterable)
    if found is None:
        return None
    target = node.target
    if found.pop("enumerated_inside", False):
        enumerated = True
    if enumerated:
        if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
            return None
        index, layer = (_dotted(e) for e in target.elts)
    else:
        index, layer = None, _dotted(target)
        if found["form"] == "range":
            index, layer = layer, None
    # The capture decoders wrote before EagleModelMixin, checked before each layer call: the
    # migration to the mixin's capture removes it (bot.codemods.legacy_capture).
    legacy = [stmt.lineno for stmt in node.body if legacy_capture(stmt)]
    body = [stmt for stmt in node.body if not legacy_capture(stmt)]
    fetch_line = None
    fetch_at = next((i for i, stmt in enumerate(body) if _fetches_layer(stmt, index)), None)
    if found["form"] == "range" and fetch_at is not None:
        # `layer = self.layers[i]`: the layer and the container come from the body (statements
        # before it are judged as any before the layer call)
        assign = body.pop(fetch_at)
        assert isinstance(assign, ast.Assign)
        layer = _dotted(assign.targets[0])
        found["attr"] = _self_attr(assign.value.value)  # type: ignore[attr-defined]
        fetch_line = assign.lineno
    if found["attr"] is None or layer is None or (enumerated and index is None):
        return None
    call_at = next((i for i, stmt in enumerate(body) if _layer_call(stmt, layer) is not None), None)
    call = _layer_call(body[call_at], layer) if call_at is not None else None
    if call is None:
        # the same call in both branches of an `if` on the layer (DeciLM): one call per step
        call_at = next(
            (i for i, s in enumerate(body) if _branched_call(s, layer, index, loaded)), None
        )
        call = _branched_call(body[call_at], layer, index, loaded) if call_at is not None else None
    bookkeeping = call_at or 0
    alias = _alias(body, call_at, call)
    late: dict[str, Any] | None = None  # the layer call, when what comes before it is not inert
    if call is not None and bookkeeping:
        kept = {*call["targets"], layer, index}
        if _inert_statements(loaded, kept, body[:bookkeeping]) < bookkeeping:
            stores = set(call["targets"])
            late = call | {
                "before": bookkeeping,
                "rebinds": [s.lineno for s in body[:bookkeeping] if _stored(s) & stores],
                "rebound": sorted(set().union(*(_stored(s) & stores for s in body[:bookkeeping]))),
                "after": len(body) - bookkeeping - 1,
            }
            call, bookkeeping = None, 0  # something before the call may change the stream
    return {
        **found,
        "line": node.lineno,
        "end_line": node.end_lineno,
        "enumerate": enumerated,
        "enumerate_start": enumerate_start,
        "index": index,
        "layer": layer,
        "fetch_line": fetch_line,
        "call": call,
        "other_statements": len(body) - (1 if call else 0) - bookkeeping - (1 if alias else 0),
        "bookkeeping": bookkeeping,
        "orelse": bool(node.orelse),
        **({"late_call": late} if late else {}),
        **({"legacy_capture": legacy} if legacy else {}),
        **({"alias": alias} if alias and call else {}),
        **({"other_call": other} if call is None and (other := _other_call(body, layer)) else {}),
    }


LEGACY_LAYERS = "self.aux_hidden_state_layers"
LEGACY_APPEND = "aux_hidden_states.append"


def legacy_capture(stmt: ast.stmt) -> bool:
    """``if <index> in self.aux_hidden_state_layers: aux_hidden_states.append(...)``: the
    capture a decoder wrote itself before ``EagleModelMixin`` (the input of the layer it checks,
    the output of the one before), nothing else in the ``if``."""
    if not (isinstance(stmt, ast.If) and not stmt.orelse and stmt.body):
        return False
    test = stmt.test
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.In)
        and _dotted(test.comparators[0]) == LEGACY_LAYERS
    ):
        return False
    return all(
        isinstance(s, ast.Expr)
        and isinstance(s.value, ast.Call)
        and _dotted(s.value.func) == LEGACY_APPEND
        and len(s.value.args) == 1
        for s in stmt.body
    )


def legacy_return(stmt: ast.stmt) -> bool:
    """``if aux_hidden_states: return <stream>, aux_hidden_states``: how a legacy capture hands
    its states back (the mixin's capture writes its own guarded return)."""
    if not (isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1):
        return False
    test, ret = stmt.test, stmt.body[0]
    tested = _dotted(test) or (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Call)
        and _dotted(test.left.func) == "len"
        and len(test.left.args) == 1
        and _dotted(test.left.args[0])
    )
    return (
        tested == "aux_hidden_states"
        and isinstance(ret, ast.Return)
        and isinstance(ret.value, ast.Tuple)
        and len(ret.value.elts) == 2
        and _dotted(ret.value.elts[1]) == "aux_hidden_states"
    )


def _branched_call(
    stmt: ast.stmt, layer: str, index: str | None, loaded: frozenset[str]
) -> dict[str, Any] | None:
    """``if <test on the layer>: h, r = layer(...) [bookkeeping] else: h, r = layer(...)``
    (DeciLM's ``if not layer._is_no_op_attention:``): the same call opening both branches, the
    rest of each branch inert and the test calling nothing, so either way the step is one layer
    call and the stream after the ``if`` is the layer's output. The call's facts, with the
    ``if``'s line, its test and the layer attributes the test reads."""
    if not (isinstance(stmt, ast.If) and stmt.body and stmt.orelse):
        return None
    then, other = _layer_call(stmt.body[0], layer), _layer_call(stmt.orelse[0], layer)
    if then is None or other is None or _without_line(then) != _without_line(other):
        return None
    if any(isinstance(n, ast.Call) for n in ast.walk(stmt.test)):
        return None
    kept = {*then["targets"], layer, index}
    for rest in (stmt.body[1:], stmt.orelse[1:]):
        if _inert_statements(loaded, kept, rest) < len(rest):
            return None
    reads = sorted(
        {
            n.attr
            for n in ast.walk(stmt.test)
            if isinstance(n, ast.Attribute) and _dotted(n.value) == layer
        }
    )
    return then | {
        "branched": {"line": stmt.lineno, "test": _short(stmt.test), "layer_reads": reads}
    }


def _without_line(call: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in call.items() if k != "line"}


def _other_call(body: list[ast.stmt], layer: str) -> dict[str, Any] | None:
    """How a loop without a plain layer call reaches its layer, for the refusal to say: a
    layer call in both branches of an ``if`` that :func:`_branched_call` does not take (a
    different call in each, or a branch that does more than bookkeeping), or a call of one of
    the layer's methods (AliceAI's ``layer.forward_attn_res(...)``)."""
    first = body[0] if body else None
    if isinstance(first, ast.If) and first.body and first.orelse:
        then, other = _layer_call(first.body[0], layer), _layer_call(first.orelse[0], layer)
        if then is not None and other is not None:
            same = _without_line(then) == _without_line(other)
            return {"kind": "branched", "test": _short(first.test), "same": same}
    if isinstance(first, ast.Assign) and isinstance(first.value, ast.Call):
        callee = _dotted(first.value.func) or ""
        if callee.startswith(f"{layer}."):
            targets = first.targets[0]
            names = targets.elts if isinstance(targets, ast.Tuple) else [targets]
            return {
                "kind": "method",
                "callee": callee,
                "targets": [_text(n) or "?" for n in names],
            }
    return None


def _alias(
    body: list[ast.stmt], call_at: int | None, call: dict[str, Any] | None
) -> dict[str, Any] | None:
    """``hidden_states = layer_outputs`` right after ``layer_outputs = layer(...)`` (Zamba2):
    the stream is the alias, the same tensor."""
    if call is None or call_at is None or len(call["targets"]) != 1 or call_at + 1 >= len(body):
        return None
    stmt = body[call_at + 1]
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and _dotted(stmt.value) == call["targets"][0]
    ):
        return {"name": stmt.targets[0].id, "line": stmt.lineno}
    return None


def _stored(stmt: ast.stmt) -> set[str]:
    return {
        n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def _loaded_outside(func: ast.AST, loop: ast.For) -> frozenset[str]:
    """The names ``func`` reads anywhere but inside ``loop``."""
    found: set[str] = set()
    pending: list[ast.AST] = [func]
    while pending:
        node = pending.pop()
        if node is loop:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            found.add(node.id)
        pending.extend(ast.iter_child_nodes(node))
    return frozenset(found)


def _inert_statements(
    loaded: frozenset[str], kept: set[str | None], statements: list[ast.stmt]
) -> int:
    """How many statements before the layer call leave the stream alone: they call nothing but
    ``isinstance``, never rebind the stream, the residual, the layer or the index (``kept``),
    and bind only names nothing after the loop reads (``loaded``: the reads outside it) --
    bookkeeping (``if isinstance(layer, X): num_attn += 1``) or a side input for this layer
    (Gemma 4's ``layer_per_input = per_layer_inputs[:, i, :]``)."""
    count = 0
    for stmt in statements:
        stored = {
            n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        calls = {_dotted(n.func) for n in ast.walk(stmt) if isinstance(n, ast.Call)}
        if not stored or calls - {"isinstance"} or stored & (loaded | kept):
            break
        count += 1
    return count


def _fetches_layer(stmt: ast.stmt, index: str | None) -> bool:
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Subscript)
        and _self_attr(stmt.value.value) is not None
        and _dotted(stmt.value.slice) == index
    )


def _layer_call(stmt: ast.stmt, layer: str) -> dict[str, Any] | None:
    """``hidden_states, residual = layer(...)`` or ``hidden_states = layer(...)``."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    value = stmt.value
    if not (isinstance(value, ast.Call) and _dotted(value.func) == layer):
        return None
    target = stmt.targets[0]
    names = target.elts if isinstance(target, ast.Tuple) else [target]
    targets = [_dotted(n) for n in names]
    if any(t is None or "." in t for t in targets):
        return None
    return {
        "targets": targets,
        "args": [_text(a) for a in value.args],
        "keywords": {k.arg or "**": _text(k.value) for k in value.keywords},
        "line": stmt.lineno,
    }


def _statements(stmt: ast.stmt) -> list[dict[str, Any]]:
    """A top-level statement after the loop as the facts it stands for: a pipeline exit with an
    ``else`` is the exit followed by the ``else``'s statements (they run on the last stage
    only, as the code after a plain exit does)."""
    fact = _statement(stmt) | {"reads": _names_read(stmt)}
    if fact["kind"] == "pp-exit" and isinstance(stmt, ast.If) and stmt.orelse:
        return [fact, *(f for s in stmt.orelse for f in _statements(s))]
    return [fact]


def _names_read(node: ast.AST) -> list[str]:
    return sorted(
        {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    )


def _pp_exit_test(test: ast.expr) -> bool:
    """``not get_pp_group().is_last_rank`` or ``self.end_layer != len(self.layers)``: the
    condition under which this stage hands its stream to the next one."""
    if "is_last_rank" in (_text(test) or ""):
        return True
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.NotEq)
        and _dotted(test.left) == "self.end_layer"
        and isinstance(call := test.comparators[0], ast.Call)
        and _dotted(call.func) == "len"
        and len(call.args) == 1
        and _self_attr(call.args[0]) is not None
    )


def _optional_norm(stmt: ast.If) -> dict[str, Any] | None:
    """``if r is None: h = self.norm(h) else: h, _ = self.norm(h, r)`` (either order): the
    final norm taking the residual when there is one, which is what the capture's
    ``hidden_states + residual if residual is not None else hidden_states`` does. Returned as
    the norm call with the residual; None for any other ``if``."""
    test = stmt.test
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is | ast.IsNot)
        and isinstance(test.left, ast.Name)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
        and len(stmt.body) == 1
        and len(stmt.orelse) == 1
    ):
        return None
    residual = test.left.id
    without, with_residual = stmt.body[0], stmt.orelse[0]
    if isinstance(test.ops[0], ast.IsNot):
        without, with_residual = with_residual, without
    plain, fused = _statement(without), _statement(with_residual)
    if not (plain["kind"] == fused["kind"] == "call" and plain["callee"] == fused["callee"]):
        return None
    stream = plain["targets"]
    if (
        len(stream) != 1
        or fused["targets"][:1] != stream
        or plain["args"] != stream
        or fused["args"] != [*stream, residual]
    ):
        return None
    return fused | {"line": stmt.lineno, "optional": residual}


def _quoted(body: list[ast.stmt], limit: int = 2) -> list[str]:
    """A branch's first ``limit`` statements, each on one line (``...`` when there are more)."""
    quoted = [" ".join(ast.unparse(s).split()) for s in body[:limit]]
    quoted = [q if len(q) <= 80 else q[:77] + "..." for q in quoted]
    return quoted + (["..."] if len(body) > limit else [])


def _statement(stmt: ast.stmt) -> dict[str, Any]:
    """A top-level statement after the loop, reduced to what residual semantics depend on."""
    if isinstance(stmt, ast.Return):
        value = stmt.value
        kind = "return-name" if isinstance(value, ast.Name) else "return-other"
        if isinstance(value, ast.Call) and (_dotted(value.func) or "").endswith(
            "IntermediateTensors"
        ):
            kind = "return-intermediate"
        return {
            "kind": kind,
            "name": _dotted(value) if value else None,
            "value": _short(value) if value else None,
            "line": stmt.lineno,
        }
    if isinstance(stmt, ast.If):
        if (norm := _optional_norm(stmt)) is not None:
            return norm
        returns = [s for s in ast.walk(stmt) if isinstance(s, ast.Return)]
        pp_guard = _pp_exit_test(stmt.test) and all(
            isinstance(r.value, ast.Call)
            and (_dotted(r.value.func) or "").endswith("IntermediateTensors")
            for r in returns
        )
        return {
            "kind": "pp-exit" if pp_guard and returns else "if",
            "returns": len(returns),
            "test": _short(stmt.test),
            "line": stmt.lineno,
            # what each branch does, as a reader would quote it (a refusal names it)
            "then": _quoted(stmt.body),
            "else": _quoted(stmt.orelse),
        }
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        targets = [_dotted(n) or "?" for n in names]
        value = stmt.value
        if isinstance(value, ast.Call) and (callee := _dotted(value.func)):
            return {
                "kind": "call",
                "targets": targets,
                "callee": callee,
                "args": [_text(a) for a in value.args],
                "line": stmt.lineno,
            }
        if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
            operands = sorted(_text(o) or "?" for o in (value.left, value.right))
            return {"kind": "add", "targets": targets, "operands": operands, "line": stmt.lineno}
        return {"kind": "assign", "targets": targets, "value": _dotted(value), "line": stmt.lineno}
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add):
        target = _dotted(stmt.target) or "?"
        operands = sorted([target, _text(stmt.value) or "?"])
        return {"kind": "add", "targets": [target], "operands": operands, "line": stmt.lineno}
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return {"kind": "docstring", "line": stmt.lineno}
    return {"kind": type(stmt).__name__.lower(), "line": stmt.lineno}


def forward_shape(
    func: ast.FunctionDef | ast.AsyncFunctionDef, fors: list[ast.For]
) -> dict[str, Any] | None:
    """The loops over ``self.<container>`` in ``forward`` (``fors``: its ``for`` statements,
    collected by the caller's walk) and what follows the main one; None without such a loop."""
    loops: list[tuple[ast.For, dict[str, Any]]] = []
    for node in fors:
        if (loop := _loop(node, _loaded_outside(func, node))) is not None:
            loops.append((node, loop))
    if not loops:
        return None
    top = [(node, loop) for node, loop in loops if node in func.body]
    after: list[dict[str, Any]] = []
    casts: list[dict[str, Any]] = []
    dropped = 0  # the legacy capture's own return, which its migration replaces
    if len(top) == 1:
        position = func.body.index(top[0][0])
        tail = func.body[position + 1 :]
        if top[0][1].get("legacy_capture"):
            kept = [s for s in tail if not legacy_return(s)]
            dropped, tail = len(tail) - len(kept), kept
        after = [fact for s in tail for fact in _statements(s)]
        casts = [c for s in func.body[:position] if (c := _float32_cast(s)) is not None]
    assigned = {
        _dotted(t)
        for node in ast.walk(func)
        if isinstance(node, ast.Assign)
        for target in node.targets
        for t in (target.elts if isinstance(target, ast.Tuple) else [target])
    }
    returns = sum(1 for node in ast.walk(func) if isinstance(node, ast.Return)) - dropped
    return {
        "loops": [
            loop | {"top_level": True}
            if node in func.body
            else loop | {"top_level": False, "enclosing": _enclosing(func, node)}
            for node, loop in loops
        ],
        "after": after,
        "assigned": sorted(n for n in assigned if n),
        "returns": returns,
        "annotation": _text(func.returns),
        "yields": any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(func)),
        **({"casts": casts} if casts else {}),
    }


def _enclosing(func: ast.FunctionDef | ast.AsyncFunctionDef, loop: ast.For) -> dict[str, Any]:
    """The top-level statement of ``func`` a nested layer loop sits in, as a reader would quote
    its header (``for loop_idx in range(self.loop_num)``, ``if self.training``)."""
    outer = next(s for s in func.body if any(n is loop for n in ast.walk(s)))
    header = type(outer).__name__.lower()
    if isinstance(outer, ast.For):
        header = f"for {_short(outer.target)} in {_short(outer.iter)}"
    elif isinstance(outer, ast.If | ast.While):
        header = f"{header} {_short(outer.test)}"
    return {"kind": type(outer).__name__.lower(), "line": outer.lineno, "header": header}


def _float32_cast(stmt: ast.stmt) -> dict[str, Any] | None:
    """``h = h.to(torch.float32)`` or ``h = h.float()`` before the loop (Zaya keeps its stream
    in float32 between layers)."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    value, name = stmt.value, _dotted(stmt.targets[0])
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and name):
        return None
    method, args = value.func.attr, [_text(a) for a in value.args]
    if method == "float" or (method == "to" and "torch.float32" in args):
        return {"name": name, "line": stmt.lineno, "value": _short(value)}
    return None


def delegation(
    func: ast.FunctionDef | ast.AsyncFunctionDef, fors: list[ast.For] | None = None
) -> dict[str, Any] | None:
    """For a ``forward`` without a layer loop: the top-level calls of a child module that
    assign names (``hidden_states, residual = self.layers(...)``: a nested decoder, whose loop
    lives in the child) with the statements after each, or that are returned whole
    (``return self.decoder(...)``, ``returned``: no targets, nothing after), and the child
    calls made inside a loop (HrmText's stacks run in cycles); None when there are neither."""
    calls: list[dict[str, Any]] = []
    for position, stmt in enumerate(func.body):
        if (
            isinstance(stmt, ast.Return)
            and isinstance(value := stmt.value, ast.Call)
            and (attr := _self_attr(value.func)) is not None
        ):
            # `return self.decoder(...)`: the child's output handed back whole (OPT)
            calls.append(
                {
                    "attr": attr,
                    "targets": [],
                    "args": [_text(a) for a in value.args],
                    "keywords": {k.arg or "**": _text(k.value) for k in value.keywords},
                    "line": stmt.lineno,
                    "after": [],
                    "returned": True,
                }
            )
            continue
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        value, target = stmt.value, stmt.targets[0]
        attr = _self_attr(value.func) if isinstance(value, ast.Call) else None
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        targets = [_dotted(n) for n in names]
        if attr is None or any(t is None or "." in t for t in targets):
            continue
        assert isinstance(value, ast.Call)
        calls.append(
            {
                "attr": attr,
                "targets": targets,
                "args": [_text(a) for a in value.args],
                "keywords": {k.arg or "**": _text(k.value) for k in value.keywords},
                "line": stmt.lineno,
                "after": [f for s in func.body[position + 1 :] for f in _statements(s)],
            }
        )
    looped = sorted(
        {
            (attr, loop.lineno)
            for loop in (ast.walk(func) if fors is None else fors)  # `fors`: the caller's walk
            if isinstance(loop, ast.For)
            for node in ast.walk(loop)
            if isinstance(node, ast.Call) and (attr := _self_attr(node.func)) is not None
        }
    )
    if not calls and not looped:
        return None
    return {
        "calls": calls,
        "looped": [{"attr": attr, "line": line} for attr, line in looped],
        "returns": sum(1 for node in ast.walk(func) if isinstance(node, ast.Return)),
        "yields": any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(func)),
    }


def layer_returns(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    returns: list[ast.Return],
    loads: Counter[str] | None = None,
) -> dict[str, Any]:
    """What a layer's ``forward`` returns: the tuple arity of each return, and for a returned
    tuple whether its first name was last assigned from a sum (the stream already summed).
    ``returns`` are every ``return`` in ``func``; ``loads`` (optional) counts the names it
    reads, as :func:`loaded_names` would."""
    arities: set[int] = set()
    summed_first = False
    sums: dict[str, bool] = {}  # name -> whether its last top-level assignment is a sum
    for node in func.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            if name := _dotted(node.targets[0]):
                value = node.value
                sums[name] = isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)
        elif isinstance(node, ast.AugAssign) and (name := _dotted(node.target)):
            sums[name] = isinstance(node.op, ast.Add)
    delegates: set[str] = set()
    opaque = 0  # a name or a call returned whole
    none_second: list[bool] = []  # per returned tuple: is its second element the literal None
    for node in returns:
        if node.value is not None:
            value = node.value
            if isinstance(value, ast.Call) and (helper := _self_attr(value.func)):
                delegates.add(helper)  # `return self._post_attention(...)`: its returns count
            elif isinstance(value, ast.Tuple):
                arities.add(len(value.elts))
                second = value.elts[1] if len(value.elts) > 1 else None
                none_second.append(isinstance(second, ast.Constant) and second.value is None)
                first = _dotted(value.elts[0]) if value.elts else None
                summed_first = summed_first or bool(first and sums.get(first))
            else:
                opaque += 1
    if opaque and not (len(arities) == 1 and _annotated_arity(func) in arities):
        # Only where the function's own tuples agree with its annotation is a value returned
        # whole taken as that tuple (Flint's `return ll`); annotations alone can be wrong
        # (Orion's layer says `tuple[Tensor, Tensor]` and returns one tensor).
        arities.add(1)
    return {
        "arities": sorted(arities),
        "summed_first": summed_first,
        "delegates": sorted(delegates),
        "second_none": bool(none_second) and all(none_second) and not opaque and not delegates,
        **parameter_use(func, returns, loads),
    }


def _annotated_arity(func: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    """``n`` for ``-> tuple[A, B, ...]`` with ``n`` elements, else None."""
    returns = func.returns
    if (
        isinstance(returns, ast.Subscript)
        and _dotted(returns.value) in ("tuple", "Tuple", "typing.Tuple")
        and isinstance(returns.slice, ast.Tuple)
        and not any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in returns.slice.elts)
    ):
        return len(returns.slice.elts)
    return None


def parameter_use(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    returns: list[ast.Return] | None = None,
    loads: Counter[str] | None = None,
) -> dict[str, list[str]]:
    """The forward's parameters (without ``self``) in order; those it rebinds before reading
    (``residual = hidden_states`` first: what the caller passes is ignored); and those it only
    hands back as an element of a returned tuple (a norm passing its residual through).
    ``returns`` and ``loads`` are what the caller's walk of ``func`` already found (every
    ``return``; :func:`loaded_names`), else they are found here."""
    args = func.args
    params = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    if params and params[0] == "self":
        params = params[1:]
    if not params:
        return {"params": [], "dead_params": [], "passthrough_params": []}
    if returns is None:
        returns = [n for n in ast.walk(func) if isinstance(n, ast.Return)]
    if loads is None:
        loads = loaded_names(func)
    dead = _rebound_before_read(func.body, params, loads)
    # Read only as a bare element of `return a, name`: never computed with.
    returned: Counter[str] = Counter(
        e.id
        for node in returns
        if isinstance(node.value, ast.Tuple)
        for e in node.value.elts
        if isinstance(e, ast.Name)
    )
    passthrough = [p for p in params if returned[p] > 0 and loads[p] == returned[p]]
    return {
        "params": params,
        "dead_params": [p for p in params if p in dead],
        "passthrough_params": passthrough,
    }


def loaded_names(node: ast.AST) -> Counter[str]:
    """How many times each name is read (``Load``) in ``node``."""
    return Counter(
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    )


def _rebound_before_read(
    body: list[ast.stmt], names: list[str], loads: Counter[str] | None = None
) -> set[str]:
    """Those of ``names`` that ``body`` assigns (from a value not reading them) before any
    statement reads them. One walk per statement, for every name at once, and only until each
    name is decided (with ``loads``, the body's read names: a name neither read nor assigned
    at the top is decided at once)."""
    undecided, dead = set(names), set()
    if loads is not None:
        top_assigned = {
            t.id
            for stmt in body
            if isinstance(stmt, ast.Assign)
            for target in stmt.targets
            for t in (target.elts if isinstance(target, ast.Tuple) else [target])
            if isinstance(t, ast.Name)
        }
        undecided = {n for n in undecided if loads[n] or n in top_assigned}
    for stmt in body:
        if not undecided:
            break
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # the docstring
        read = loaded_names(stmt)
        if isinstance(stmt, ast.Assign):
            assigned = {
                t.id
                for target in stmt.targets
                for t in (target.elts if isinstance(target, ast.Tuple) else [target])
                if isinstance(t, ast.Name)
            } & undecided
            if assigned:
                rebound = assigned - set(loaded_names(stmt.value))
                dead |= rebound
                undecided -= rebound
        undecided -= set(read)
    return dead


def built_from(
    value: ast.expr,
    refs: dict[str, str] | None = None,
    helpers: dict[str, ast.FunctionDef] | None = None,
) -> list[str]:
    """Class-like names called anywhere in an assigned value (``make_layers(..., lambda
    prefix: Layer(...))``, ``nn.ModuleList([Layer(...) for ...])``).

    Also, with the method's ``refs`` (a parameter's default, ``layer_type: type[X] = X``, or a
    local alias) and its nested ``helpers`` (``def get_layer(prefix): ...`` handed to
    ``make_layers``): a call of a parameter counts as a call of its default (the rule
    ``constructed`` follows for ``model_type=X``), and a helper named in the value counts with
    the class-like names it calls or picks (``layer_class = A if attn else B``)."""
    refs = refs or {}
    helpers = helpers or {}
    names: set[str] = set()
    for node in ast.walk(value):
        if isinstance(node, ast.Call) and (callee := _dotted(node.func)):
            if callee in refs:
                callee = refs[callee]
            if callee.split(".")[-1][:1].isupper() or callee.endswith("()"):
                names.add(callee)  # "f()": a class the module-level factory f returns
        elif isinstance(node, ast.Name) and node.id in helpers:
            names.update(_helper_classes(helpers[node.id], refs))
    return sorted(names)


def _helper_classes(helper: ast.FunctionDef, refs: dict[str, str]) -> set[str]:
    """The class-like names a layer-building helper calls, directly or through a local it
    assigns them to (``layer_class = A if attn else B; return layer_class(...)``)."""
    picked: dict[str, set[str]] = {}
    for node in ast.walk(helper):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                found = {
                    n.id
                    for n in ast.walk(node.value)
                    if isinstance(n, ast.Name) and n.id[:1].isupper()
                }
                picked.setdefault(target.id, set()).update(found)
    names: set[str] = set()
    for node in ast.walk(helper):
        if isinstance(node, ast.Call) and (callee := _dotted(node.func)):
            if callee in picked:
                names.update(picked[callee])
                continue
            callee = refs.get(callee, callee)
            if callee.split(".")[-1][:1].isupper():
                names.add(callee)
    return names


def speculative_refusals(
    func: ast.FunctionDef | ast.AsyncFunctionDef, ifs: list[ast.If] | None = None
) -> list[dict[str, Any]]:
    """The ``raise`` statements of a target's ``__init__`` under a test that reads the
    speculative configuration (Zaya's ``if vllm_config.num_speculative_tokens: raise
    NotImplementedError("ZAYA1 does not support speculative decoding.")``): the model refuses
    to run with a drafter at all. Each with its line, the test and the message as written.
    ``ifs``: the ``if`` statements of ``func`` in ``ast.walk`` order, when the caller has them."""
    found: list[dict[str, Any]] = []
    if ifs is None:
        ifs = [node for node in ast.walk(func) if isinstance(node, ast.If)]
    for node in ifs:
        if not (_may_say(node.test, "speculative") and "speculative" in ast.unparse(node.test)):
            continue
        for raised in (n for s in node.body for n in ast.walk(s) if isinstance(n, ast.Raise)):
            exc = _short(raised.exc, 120) if raised.exc is not None else "the active exception"
            found.append({"line": raised.lineno, "test": _short(node.test), "raises": exc})
    return found


def _may_say(node: ast.expr, word: str) -> bool:
    """Whether ``ast.unparse(node)`` can contain ``word`` (letters only): only a name, an
    attribute, a keyword, a parameter or a string can (cheaper than unparsing every test)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            text = n.id
        elif isinstance(n, ast.Attribute):
            text = n.attr
        elif isinstance(n, ast.keyword | ast.arg):
            text = n.arg or ""
        elif isinstance(n, ast.Constant) and isinstance(n.value, str | bytes):
            text = repr(n.value)
        else:
            continue
        if word in text:
            return True
    return False
