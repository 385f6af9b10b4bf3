"""Codemod: a decoder's ``forward`` collects EAGLE-3's aux hidden states.

Before the layer loop, ``aux_hidden_states = self._maybe_add_hidden_state([], <first>, h, r)``
(the input of this stage's first layer); after each layer call,
``self._maybe_add_hidden_state(aux_hidden_states, <index> + 1, h, r)``; before the final
``return h``, ``if len(aux_hidden_states) > 0: return h, aux_hidden_states`` so a run without
aux layers returns exactly what it did. ``r`` is the residual name or ``None`` (decided by the
analysis, passed in); ``absolute`` chooses ``enumerate(..., start=self.start_layer)`` with
``self.start_layer`` as the first index (the tree's convention when its decoders use it) over a
count from ``0``. A layer called by the same statement in both branches of an ``if`` (DeciLM's
``if not layer._is_no_op_attention:``) is captured once, after the ``if``, where both branches
have produced the stream (as upstream's Qwen3-VL captures after the ``if`` that ends its
step). The mixin in the class's bases and its import are the ``bases`` and ``imports``
codemods' job. Anything but the loop shapes described refuses.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from bot.codemods.base import Case, CodemodRefused, parse, require_identifier

AUX = "aux_hidden_states"
HELPER = "_maybe_add_hidden_state"
_INDEX_NAMES = ("idx", "layer_idx")
_TUPLE_RETURN = "tuple[torch.Tensor, list[torch.Tensor]]"


def add_aux_capture(
    source: str,
    class_name: str,
    residual: str | None,
    absolute: bool = True,
    stage_slice: bool = False,
) -> str:
    require_identifier(class_name, "class name")
    if residual is not None:
        require_identifier(residual, "residual name")
    tree = parse(source)
    matches = [
        i
        for i, stmt in enumerate(tree.body)
        if isinstance(stmt, cst.ClassDef) and stmt.name.value == class_name
    ]
    if len(matches) != 1:
        raise CodemodRefused(f"expected one module-level class {class_name}, found {len(matches)}")
    class_def = tree.body[matches[0]]
    assert isinstance(class_def, cst.ClassDef)
    members = list(class_def.body.body)
    forwards = [
        i
        for i, s in enumerate(members)
        if isinstance(s, cst.FunctionDef) and s.name.value == "forward"
    ]
    if len(forwards) != 1:
        raise CodemodRefused(f"{class_name} does not define forward exactly once")
    forward = members[forwards[0]]
    assert isinstance(forward, cst.FunctionDef)
    names = names_in(forward)
    if HELPER in names:
        return source  # already collects: nothing to do
    if AUX in names:
        raise CodemodRefused(f"{class_name}.forward already uses the name {AUX}")
    if stage_slice:
        forward = sliced_to_stage(forward)
    new_forward = _edit_forward(forward, names, residual, absolute, imports_torch(tree))
    members[forwards[0]] = new_forward
    new_class = class_def.with_changes(body=class_def.body.with_changes(body=members))
    body = list(tree.body)
    body[matches[0]] = new_class
    return tree.with_changes(body=body).code


_STAGE = "self.start_layer : self.end_layer"


def sliced_to_stage(forward: cst.FunctionDef) -> cst.FunctionDef:
    """``for layer in self.layers:`` (the one such top-level loop) becomes ``for layer in
    self.layers[self.start_layer : self.end_layer]:``, this pipeline stage's layers."""
    body = forward.body
    if not isinstance(body, cst.IndentedBlock):
        raise CodemodRefused("forward's body is not a block")
    whole = [
        i
        for i, stmt in enumerate(body.body)
        if isinstance(stmt, cst.For)
        and m.matches(stmt.iter, m.Attribute(value=m.Name("self"), attr=m.Name()))
    ]
    if len(whole) != 1:
        raise CodemodRefused(f"forward has {len(whole)} loops over every layer at its top level")
    loop = body.body[whole[0]]
    assert isinstance(loop, cst.For)
    iterable = cst.Module([]).code_for_node(loop.iter)
    sliced = loop.with_changes(iter=cst.parse_expression(f"{iterable}[{_STAGE}]"))
    statements = list(body.body)
    statements[whole[0]] = sliced
    return forward.with_changes(body=body.with_changes(body=statements))


def names_in(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()
    for name in m.findall(node, m.Name()):
        assert isinstance(name, cst.Name)
        found.add(name.value)
    return found


def imports_torch(tree: cst.Module) -> bool:
    return bool(m.findall(tree, m.Import(names=[m.ImportAlias(name=m.Name("torch"), asname=None)])))


def _is_layers_iterable(node: cst.BaseExpression) -> bool:
    """``self.X[a:b]``, ``islice(self.X, ...)``, ``range(...)`` or ``self.X`` (every layer, in a
    decoder no pipeline stage splits); the analysis checked bounds."""
    self_attr = m.Attribute(value=m.Name("self"))
    if m.matches(node, m.Subscript(value=self_attr) | self_attr):
        return True
    return m.matches(
        node, m.Call(func=m.Name("islice") | m.Attribute(attr=m.Name("islice")))
    ) or m.matches(node, m.Call(func=m.Name("range")))


def _edit_forward(
    forward: cst.FunctionDef,
    names: set[str],
    residual: str | None,
    absolute: bool,
    has_torch: bool,
) -> cst.FunctionDef:
    body = forward.body
    if not isinstance(body, cst.IndentedBlock):
        raise CodemodRefused("forward's body is not a block")
    statements, stream = capture_in_loop(list(body.body), names, residual, absolute)
    new = forward.with_changes(body=body.with_changes(body=guarded_return(statements, stream)))
    return widened_annotation(new) if has_torch else new


def guarded_return(statements: list[cst.BaseStatement], stream: str) -> list[cst.BaseStatement]:
    """``return h`` at the end becomes ``if len(aux) > 0: return h, aux`` then ``return h``."""
    final = statements[-1]
    if not m.matches(final, m.SimpleStatementLine(body=[m.Return(value=m.Name(stream))])):
        raise CodemodRefused(f"forward does not end with `return {stream}`")
    assert isinstance(final, cst.SimpleStatementLine)
    guard = cst.parse_statement(f"if len({AUX}) > 0:\n    return {stream}, {AUX}\n")
    guard = guard.with_changes(leading_lines=final.leading_lines or (cst.EmptyLine(indent=False),))
    final = final.with_changes(leading_lines=())
    return [*statements[:-1], guard, final]


def capture_in_loop(
    statements: list[cst.BaseStatement], names: set[str], residual: str | None, absolute: bool
) -> tuple[list[cst.BaseStatement], str]:
    """The statements with the first capture before the one top-level layer loop and a
    capture after each layer call, and the stream's name."""
    loops = [i for i, s in enumerate(statements) if isinstance(s, cst.For)]
    layer_loops = [i for i in loops if _loop_iterable(statements[i]) is not None]
    if len(layer_loops) != 1:
        raise CodemodRefused(f"forward has {len(layer_loops)} layer loops at its top level")
    position = layer_loops[0]
    loop = statements[position]
    assert isinstance(loop, cst.For)
    loop, index, first, call_at = _indexed_loop(loop, names, absolute)
    stream = _stream_name(loop, call_at)
    if (alias := _alias_of(loop, call_at, stream)) is not None:
        stream, call_at = alias, call_at + 1  # `hidden_states = layer_outputs`: capture after
    res = residual or "None"
    capture = cst.parse_statement(f"self.{HELPER}({AUX}, {index} + 1, {stream}, {res})\n")
    loop_body = list(loop.body.body)
    loop_body.insert(call_at + 1, capture)
    loop = loop.with_changes(body=loop.body.with_changes(body=loop_body))
    start = cst.parse_statement(f"{AUX} = self.{HELPER}([], {first}, {stream}, {res})\n")
    start = start.with_changes(leading_lines=loop.leading_lines)
    loop = loop.with_changes(leading_lines=())
    return [*statements[:position], start, loop, *statements[position + 1 :]], stream


def _loop_iterable(stmt: cst.BaseStatement) -> cst.BaseExpression | None:
    if not isinstance(stmt, cst.For):
        return None
    iterable = stmt.iter
    if m.matches(iterable, m.Call(func=m.Name("enumerate"))):
        assert isinstance(iterable, cst.Call)
        iterable = iterable.args[0].value
    return iterable if _is_layers_iterable(iterable) else None


def _indexed_loop(loop: cst.For, names: set[str], absolute: bool) -> tuple[cst.For, str, str, int]:
    """The loop with an index (added when it has none), the index's name, the first capture's
    index expression, and the position of the layer call in the loop's body."""
    iterable = loop.iter
    if m.matches(iterable, m.Call(func=m.Name("range"))):
        if not isinstance(loop.target, cst.Name):
            raise CodemodRefused("a range loop without a plain index")
        return loop, loop.target.value, "self.start_layer", _call_position(loop, 1)
    if m.matches(iterable, m.Call(func=m.Name("enumerate"))):
        assert isinstance(iterable, cst.Call)
        if not m.matches(loop.target, m.Tuple(elements=[m.Element(m.Name()), m.Element(m.Name())])):
            raise CodemodRefused("an enumerate loop without `index, layer` names")
        assert isinstance(loop.target, cst.Tuple)
        index = loop.target.elements[0].value
        assert isinstance(index, cst.Name)
        starts = [a for a in iterable.args if a.keyword is not None]
        layer = loop.target.elements[1].value
        assert isinstance(layer, cst.Name)
        at = _call_position(loop, 0, layer.value)
        if not starts:
            return loop, index.value, "0", at
        if m.matches(
            starts[0].value, m.Attribute(value=m.Name("self"), attr=m.Name("start_layer"))
        ):
            return loop, index.value, "self.start_layer", at
        raise CodemodRefused("an enumerate loop counting from something else")
    if not isinstance(loop.target, cst.Name):
        raise CodemodRefused("the loop does not name its layer")
    free = [n for n in _INDEX_NAMES if n not in names]
    if not free:
        raise CodemodRefused(f"forward already uses the names {', '.join(_INDEX_NAMES)}")
    index = free[0]
    at = _call_position(loop, 0, loop.target.value)
    start = ", start=self.start_layer" if absolute else ""
    iterable_code = cst.Module([]).code_for_node(loop.iter)
    new_iter = cst.parse_expression(f"enumerate({iterable_code}{start})")
    new_target = cst.parse_expression(f"{index}, {loop.target.value}")
    assert isinstance(new_target, cst.Tuple)
    new_target = new_target.with_changes(lpar=(), rpar=())
    loop = loop.with_changes(iter=new_iter, target=new_target)
    return loop, index, "self.start_layer" if absolute else "0", at


def _call_position(loop: cst.For, first: int, layer: str | None = None) -> int:
    """Where in the loop's body the layer is called: the first statement from ``first`` on
    that assigns a call of ``layer`` (for a range loop, of the name the body binds first),
    past any bookkeeping the analysis judged inert."""
    body = loop.body
    if not isinstance(body, cst.IndentedBlock):
        raise CodemodRefused("the loop's body is not a block")
    statements = list(body.body)
    if layer is None:
        fetch = statements[0] if statements else None
        targets = m.findall(fetch, m.AssignTarget(target=m.Name())) if fetch else []
        if not targets:
            raise CodemodRefused("the range loop does not bind its layer first")
        target = targets[0]
        assert isinstance(target, cst.AssignTarget) and isinstance(target.target, cst.Name)
        layer = target.target.value
    call = m.SimpleStatementLine(body=[m.Assign(value=m.Call(func=m.Name(layer)))])
    for position in range(first, len(statements)):
        if m.matches(statements[position], call):
            return position
    for position in range(first, len(statements)):
        if _branched_call(statements[position], call) is not None:
            return position  # the capture goes after the `if`, where both branches meet
    raise CodemodRefused(f"the loop never assigns a call of {layer}")


def _branched_call(
    stmt: cst.BaseStatement, call: m.BaseMatcherNode
) -> cst.SimpleStatementLine | None:
    """The layer call opening both branches of ``if ...: h, r = layer(...) else: h, r =
    layer(...)`` (DeciLM's), when the two are the same statement; None otherwise."""
    if not (isinstance(stmt, cst.If) and isinstance(stmt.orelse, cst.Else)):
        return None
    then, other = stmt.body.body, stmt.orelse.body.body
    if not (then and other and m.matches(then[0], call) and m.matches(other[0], call)):
        return None
    assert isinstance(then[0], cst.SimpleStatementLine)
    assert isinstance(other[0], cst.SimpleStatementLine)
    code = cst.Module([]).code_for_node
    return then[0] if code(then[0].body[0]) == code(other[0].body[0]) else None


def _stream_name(loop: cst.For, call_at: int) -> str:
    """The first name the layer call assigns (``hidden_states``)."""
    body = loop.body
    if not isinstance(body, cst.IndentedBlock) or len(body.body) <= call_at:
        raise CodemodRefused("the loop's body is not a block with the layer call")
    stmt = body.body[call_at]
    if isinstance(stmt, cst.If) and stmt.body.body:
        stmt = stmt.body.body[0]  # both branches open with the same call (_branched_call)
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
        raise CodemodRefused("the layer call is not a statement of its own")
    assign = stmt.body[0]
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1):
        raise CodemodRefused("the loop does not assign the layer's output")
    target = assign.targets[0].target
    if isinstance(target, cst.Tuple):
        target = target.elements[0].value
    if not isinstance(target, cst.Name):
        raise CodemodRefused("the layer's output is not assigned to a name")
    return target.value


def _alias_of(loop: cst.For, call_at: int, output: str) -> str | None:
    """``name`` when the statement after the layer call is ``name = <output>`` (Zamba2)."""
    body = loop.body
    assert isinstance(body, cst.IndentedBlock)
    if call_at + 1 >= len(body.body):
        return None
    alias = m.SimpleStatementLine(
        body=[m.Assign(targets=[m.AssignTarget(target=m.Name())], value=m.Name(output))]
    )
    stmt = body.body[call_at + 1]
    if not m.matches(stmt, alias):
        return None
    assert isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign)
    target = stmt.body[0].targets[0].target
    assert isinstance(target, cst.Name)
    return target.value


def widened_annotation(forward: cst.FunctionDef) -> cst.FunctionDef:
    """``-> A | B`` becomes ``-> A | B | tuple[torch.Tensor, list[torch.Tensor]]``."""
    returns = forward.returns
    if returns is None:
        return forward
    annotation = returns.annotation
    code = cst.Module([]).code_for_node(annotation)
    if "tuple[" in code or not isinstance(
        annotation, cst.Name | cst.Attribute | cst.BinaryOperation
    ):
        return forward
    if isinstance(annotation, cst.BinaryOperation) and not _is_union(annotation):
        return forward
    widened = cst.parse_expression(f"{code} | {_TUPLE_RETURN}")
    return forward.with_changes(returns=returns.with_changes(annotation=widened))


def _is_union(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.BinaryOperation):
        return (
            isinstance(node.operator, cst.BitOr) and _is_union(node.left) and _is_union(node.right)
        )
    return isinstance(node, cst.Name | cst.Attribute)


def _capture(
    class_name: str, residual: str | None, absolute: bool = True, stage_slice: bool = False
) -> Callable[[str], str]:
    return lambda source: add_aux_capture(source, class_name, residual, absolute, stage_slice)


_HEAD = """\
import torch


class M(nn.Module):
    def forward(
        self, positions: torch.Tensor, hidden_states: torch.Tensor
    ) -> torch.Tensor | IntermediateTensors:
        residual = None
"""

_SLICE = (
    _HEAD
    + """
        for layer in self.layers[self.start_layer : self.end_layer]:
            hidden_states, residual = layer(positions, hidden_states, residual)

        if not get_pp_group().is_last_rank:
            return IntermediateTensors({"hidden_states": hidden_states})
        hidden_states, _ = self.norm(hidden_states, residual)
        return hidden_states
"""
)

_SLICE_AFTER = """\
import torch


class M(nn.Module):
    def forward(
        self, positions: torch.Tensor, hidden_states: torch.Tensor
    ) -> torch.Tensor | IntermediateTensors | tuple[torch.Tensor, list[torch.Tensor]]:
        residual = None

        aux_hidden_states = self._maybe_add_hidden_state([], self.start_layer, hidden_states, residual)
        for idx, layer in enumerate(self.layers[self.start_layer : self.end_layer], start=self.start_layer):
            hidden_states, residual = layer(positions, hidden_states, residual)
            self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, residual)

        if not get_pp_group().is_last_rank:
            return IntermediateTensors({"hidden_states": hidden_states})
        hidden_states, _ = self.norm(hidden_states, residual)

        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states
"""  # noqa: E501 - ruff formats the touched lines in the tree; the codemod writes them long

_PLAIN = """\
class M(nn.Module):
    def forward(self, positions, hidden_states):
        for layer in islice(self.layers, self.start_layer, self.end_layer):
            hidden_states = layer(positions, hidden_states)

        hidden_states = self.norm(hidden_states)
        return hidden_states
"""

_PLAIN_RELATIVE = """\
class M(nn.Module):
    def forward(self, positions, hidden_states):
        aux_hidden_states = self._maybe_add_hidden_state([], 0, hidden_states, None)
        for idx, layer in enumerate(islice(self.layers, self.start_layer, self.end_layer)):
            hidden_states = layer(positions, hidden_states)
            self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, None)

        hidden_states = self.norm(hidden_states)

        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states
"""

_RANGE = """\
class M(nn.Module):
    def forward(self, positions, hidden_states, residual):
        for i in range(self.start_layer, self.end_layer):
            layer = self.layers[i]
            hidden_states, residual = layer(positions, hidden_states, residual)
        hidden_states = hidden_states + residual
        hidden_states = self.norm(hidden_states)
        return hidden_states
"""

_RANGE_AFTER = """\
class M(nn.Module):
    def forward(self, positions, hidden_states, residual):
        aux_hidden_states = self._maybe_add_hidden_state([], self.start_layer, hidden_states, residual)
        for i in range(self.start_layer, self.end_layer):
            layer = self.layers[i]
            hidden_states, residual = layer(positions, hidden_states, residual)
            self._maybe_add_hidden_state(aux_hidden_states, i + 1, hidden_states, residual)
        hidden_states = hidden_states + residual
        hidden_states = self.norm(hidden_states)

        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states
"""  # noqa: E501

_ENUMERATED = """\
class M(nn.Module):
    def forward(self, hidden_states):
        for n, layer in enumerate(self.layers[self.start_layer : self.end_layer]):
            hidden_states = layer(hidden_states)
        hidden_states = self.norm(hidden_states)
        return hidden_states
"""

CASES: list[Case] = [
    Case("slice loop with a residual stream", _capture("M", "residual"), _SLICE, _SLICE_AFTER),
    Case("already collects: no change", _capture("M", "residual"), _SLICE_AFTER),
    Case(
        "islice loop without a residual, counted from 0 (the tree's relative form)",
        _capture("M", None, absolute=False),
        _PLAIN,
        _PLAIN_RELATIVE,
    ),
    Case("range loop keeps its absolute index", _capture("M", "residual"), _RANGE, _RANGE_AFTER),
    Case(
        "enumerate loop keeps its own index and count",
        _capture("M", None),
        _ENUMERATED,
        _ENUMERATED.replace(
            "        for n,",
            "        aux_hidden_states = self._maybe_add_hidden_state([], 0, hidden_states, None)\n"
            "        for n,",
        )
        .replace(
            "layer(hidden_states)\n",
            "layer(hidden_states)\n"
            "            self._maybe_add_hidden_state("
            "aux_hidden_states, n + 1, hidden_states, None)\n",
        )
        .replace(
            "        return hidden_states\n",
            "\n        if len(aux_hidden_states) > 0:\n"
            "            return hidden_states, aux_hidden_states\n        return hidden_states\n",
        ),
    ),
    Case(
        "two layer loops: refuse",
        _capture("M", None),
        _PLAIN.replace(
            "        hidden_states = self.norm",
            "        for layer in self.layers[self.start_layer : self.end_layer]:\n"
            "            hidden_states = layer(positions, hidden_states)\n"
            "        hidden_states = self.norm",
        ),
        refuses="forward has 2 layer loops",
    ),
    Case(
        "forward ends with another return: refuse",
        _capture("M", None),
        _PLAIN.replace("        return hidden_states\n", "        return hidden_states * 2\n"),
        refuses="does not end with `return hidden_states`",
    ),
    Case(
        "the name aux_hidden_states is taken: refuse",
        _capture("M", None),
        _PLAIN.replace(
            "        return hidden_states\n",
            "        aux_hidden_states = 1\n        return hidden_states\n",
        ),
        refuses="already uses the name aux_hidden_states",
    ),
    Case(
        "hostile class name: refuse",
        _capture("M(x):\n import os #", None),
        _PLAIN,
        refuses="not a Python identifier",
    ),
]

_WHOLE = """\
class M(nn.Module):
    def forward(self, positions, hidden_states):
        residual = None
        num_attn = 0
        for layer in self.layers:
            if isinstance(layer, AttentionLayer):
                num_attn += 1
            hidden_states, residual = layer(positions, hidden_states, residual)

        hidden_states = self.norm(hidden_states)
        return hidden_states
"""

_WHOLE_AFTER = """\
class M(nn.Module):
    def forward(self, positions, hidden_states):
        residual = None
        num_attn = 0
        aux_hidden_states = self._maybe_add_hidden_state([], self.start_layer, hidden_states, None)
        for idx, layer in enumerate(self.layers[self.start_layer : self.end_layer], start=self.start_layer):
            if isinstance(layer, AttentionLayer):
                num_attn += 1
            hidden_states, residual = layer(positions, hidden_states, residual)
            self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, None)

        hidden_states = self.norm(hidden_states)

        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states
"""  # noqa: E501

_OPTIONAL_NORM = _SLICE.replace(
    "        hidden_states, _ = self.norm(hidden_states, residual)\n",
    "        if residual is None:\n"
    "            hidden_states = self.norm(hidden_states)\n"
    "        else:\n"
    "            hidden_states, _ = self.norm(hidden_states, residual)\n",
)

# OPT's and ChatGLM's child decoders: the stream's finishing steps under flags of the config
_FLAGGED = """\
        if self.final_layer_norm is not None:
            hidden_states = self.final_layer_norm(hidden_states)
        if self.project_out is not None:
            hidden_states, _ = self.project_out(hidden_states)
"""

CASES += [
    Case(
        "finishing steps under config flags: the capture between layers, the return guarded "
        "after them",
        _capture("M", None, absolute=False),
        _PLAIN.replace("        hidden_states = self.norm(hidden_states)\n", _FLAGGED),
        _PLAIN_RELATIVE.replace("        hidden_states = self.norm(hidden_states)\n", _FLAGGED),
    ),
    Case(
        "finishing steps under config flags, already collecting: no change",
        _capture("M", None, absolute=False),
        _PLAIN_RELATIVE.replace("        hidden_states = self.norm(hidden_states)\n", _FLAGGED),
    ),
    Case(
        "every layer, with bookkeeping before the call: this stage's slice and the capture",
        _capture("M", None, stage_slice=True),
        _WHOLE,
        _WHOLE_AFTER,
    ),
    Case(
        "stage slice already written and collecting: no change",
        _capture("M", None, stage_slice=True),
        _WHOLE_AFTER,
    ),
    Case(
        "final norm picked by whether the residual is None: the same capture",
        _capture("M", "residual"),
        _OPTIONAL_NORM,
        _SLICE_AFTER.replace(
            "        hidden_states, _ = self.norm(hidden_states, residual)\n",
            "        if residual is None:\n"
            "            hidden_states = self.norm(hidden_states)\n"
            "        else:\n"
            "            hidden_states, _ = self.norm(hidden_states, residual)\n",
        ),
    ),
    Case(
        "two loops over every layer: refuse the stage slice",
        _capture("M", None, stage_slice=True),
        _WHOLE.replace(
            "        hidden_states = self.norm",
            "        for layer in self.layers:\n"
            "            hidden_states, residual = layer(positions, hidden_states, residual)\n"
            "        hidden_states = self.norm",
        ),
        refuses="2 loops over every layer",
    ),
]

_CALL = "            hidden_states, residual = layer(positions, hidden_states, residual)\n"
# DeciLM's step: the same call in both branches of an `if` on the layer
_IF_CALL = (
    "            if not layer.no_op_attention:\n"
    f"    {_CALL}"
    "                kv_cache_index += 1\n"
    "            else:\n"
    f"    {_CALL}"
)
_BRANCHED = _SLICE.replace(_CALL, _IF_CALL)
_BRANCHED_AFTER = _SLICE_AFTER.replace(_CALL, _IF_CALL)

CASES += [
    Case(
        "the same layer call in both branches of an if: one capture after the if",
        _capture("M", "residual"),
        _BRANCHED,
        _BRANCHED_AFTER,
    ),
    Case("branched call already collecting: no change", _capture("M", "residual"), _BRANCHED_AFTER),
    Case(
        "a different layer call in each branch: refuse",
        _capture("M", "residual"),
        _BRANCHED.replace(
            "            else:\n"
            "                hidden_states, residual = layer(positions, hidden_states, residual)\n",
            "            else:\n"
            "                hidden_states, residual = layer(positions, hidden_states, None)\n",
        ),
        refuses="never assigns a call of layer",
    ),
]
