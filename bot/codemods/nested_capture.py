"""Codemod: a nested decoder collects EAGLE-3's aux hidden states in two modules.

The form upstream gave Plamo3 between 0.28.0 and 0.29.0: the parent decoder (``Plamo3Model``)
calls its child (``self.layers = Plamo3Decoder(...)``) once, and the child loops over the layers.

- the child: the loop captures as :mod:`bot.codemods.aux_capture` writes it, the loop's
  ``return h, r`` becomes ``return h, r, aux_hidden_states``, and ``__len__`` (the interface's
  default counts layers with ``len(model.layers)``) returns ``len(self.layers)``;
- the parent: ``_set_aux_hidden_state_layers`` hands the layers to the child, the call takes
  the aux list back (``h, r, aux_hidden_states = self.layers(...)``), and ``return h`` is guarded
  as in the one-module form.

The mixin on both classes and its import are the ``bases`` and ``imports`` codemods' job.
Anything but that shape refuses; run again on its own output, nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from bot.codemods.aux_capture import (
    AUX,
    HELPER,
    _capture_in_loop,
    _guarded_return,
    _imports_torch,
    _names_in,
    _sliced_to_stage,
    _widened_annotation,
    add_aux_capture,
)
from bot.codemods.base import Case, CodemodRefused, parse, require_identifier
from bot.codemods.legacy_capture import drop_legacy_capture

SET_LAYERS = "_set_aux_hidden_state_layers"


def add_nested_aux_capture(
    source: str,
    class_name: str,
    child: str,
    child_attr: str,
    residual: str | None,
    absolute: bool = True,
    stage_slice: bool = False,
) -> str:
    for value, what in (
        (class_name, "class name"),
        (child, "child class name"),
        (child_attr, "child attribute"),
    ):
        require_identifier(value, what)
    if residual is not None:
        require_identifier(residual, "residual name")
    tree = parse(source)
    child_at, child_def = _module_class(tree, child)
    parent_at, parent_def = _module_class(tree, class_name)
    child_forward = _method(child_def, "forward")
    if HELPER in _names_in(child_forward):
        return source  # the child already collects: nothing to do
    parent_forward = _method(parent_def, "forward")
    for cls, forward in ((child, child_forward), (class_name, parent_forward)):
        if AUX in _names_in(forward):
            raise CodemodRefused(f"{cls}.forward already uses the name {AUX}")
    for cls, method in ((child, "__len__"), (class_name, SET_LAYERS)):
        if _methods(tree.body[child_at if cls == child else parent_at], method):
            raise CodemodRefused(f"{cls} already defines {method}")
    has_torch = _imports_torch(tree)
    if stage_slice:
        child_forward = _sliced_to_stage(child_forward)
    new_child = _with_method(
        _replaced(child_def, "forward", _child_forward(child_forward, residual, absolute)),
        "__len__",
        "def __len__(self) -> int:\n    return len(self.layers)\n",
    )
    new_parent = _with_method(
        _replaced(parent_def, "forward", _parent_forward(parent_forward, child_attr, has_torch)),
        SET_LAYERS,
        f"def {SET_LAYERS}(self, layers: tuple[int, ...]) -> None:\n"
        f"    self.{child_attr}.{SET_LAYERS}(layers)\n",
    )
    body = list(tree.body)
    body[child_at], body[parent_at] = new_child, new_parent
    return tree.with_changes(body=body).code


def _module_class(tree: cst.Module, name: str) -> tuple[int, cst.ClassDef]:
    found = [
        (i, stmt)
        for i, stmt in enumerate(tree.body)
        if isinstance(stmt, cst.ClassDef) and stmt.name.value == name
    ]
    if len(found) != 1:
        raise CodemodRefused(f"expected one module-level class {name}, found {len(found)}")
    return found[0]


def _methods(class_def: cst.CSTNode, name: str) -> list[cst.FunctionDef]:
    assert isinstance(class_def, cst.ClassDef)
    return [
        s for s in class_def.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name
    ]


def _method(class_def: cst.ClassDef, name: str) -> cst.FunctionDef:
    found = _methods(class_def, name)
    if len(found) != 1:
        raise CodemodRefused(f"{class_def.name.value} does not define {name} exactly once")
    return found[0]


def _replaced(class_def: cst.ClassDef, name: str, new: cst.FunctionDef) -> cst.ClassDef:
    members = [
        new if isinstance(s, cst.FunctionDef) and s.name.value == name else s
        for s in class_def.body.body
    ]
    return class_def.with_changes(body=class_def.body.with_changes(body=members))


def _with_method(class_def: cst.ClassDef, name: str, code: str) -> cst.ClassDef:
    """``code`` (one method) inserted just before ``forward``, with a blank line above it."""
    method = cst.parse_statement(code)
    assert isinstance(method, cst.FunctionDef)
    members = list(class_def.body.body)
    at = next(
        i
        for i, s in enumerate(members)
        if isinstance(s, cst.FunctionDef) and s.name.value == "forward"
    )
    forward = members[at]
    assert isinstance(forward, cst.FunctionDef)
    method = method.with_changes(leading_lines=forward.leading_lines)
    members.insert(at, method)
    return class_def.with_changes(body=class_def.body.with_changes(body=members))


def _block(forward: cst.FunctionDef) -> cst.IndentedBlock:
    if not isinstance(forward.body, cst.IndentedBlock):
        raise CodemodRefused("forward's body is not a block")
    return forward.body


def _child_forward(
    forward: cst.FunctionDef, residual: str | None, absolute: bool
) -> cst.FunctionDef:
    """The loop captures, and ``return h, r`` hands the aux list back as a third value."""
    body = _block(forward)
    statements, stream = _capture_in_loop(list(body.body), _names_in(forward), residual, absolute)
    final = statements[-1]
    returned = m.SimpleStatementLine(body=[m.Return(value=m.Tuple())])
    if not m.matches(final, returned):
        raise CodemodRefused("the child's forward does not end with `return <names>`")
    assert isinstance(final, cst.SimpleStatementLine)
    ret = final.body[0]
    assert isinstance(ret, cst.Return) and isinstance(ret.value, cst.Tuple)
    if not m.matches(ret.value.elements[0].value, m.Name(stream)):
        raise CodemodRefused(f"the child's forward does not return {stream} first")
    value = _with_aux(ret.value)
    statements[-1] = final.with_changes(body=[ret.with_changes(value=value)])
    new = forward.with_changes(body=body.with_changes(body=statements))
    return _widened_tuple(new)


def _with_aux(names: cst.Tuple) -> cst.Tuple:
    """``a, b`` -> ``a, b, aux_hidden_states``."""
    elements = [e.with_changes(comma=cst.MaybeSentinel.DEFAULT) for e in names.elements]
    return names.with_changes(elements=[*elements, cst.Element(cst.Name(AUX))])


def _widened_tuple(forward: cst.FunctionDef) -> cst.FunctionDef:
    """``-> tuple[A, B]`` becomes ``-> tuple[A, B, list[torch.Tensor]]``; other annotations
    are left as they are."""
    returns = forward.returns
    if returns is None:
        return forward
    code = cst.Module([]).code_for_node(returns.annotation)
    if not (code.startswith("tuple[") and code.endswith("]")):
        return forward
    widened = cst.parse_expression(f"{code[:-1]}, list[torch.Tensor]]")
    return forward.with_changes(returns=returns.with_changes(annotation=widened))


def _parent_forward(forward: cst.FunctionDef, child_attr: str, has_torch: bool) -> cst.FunctionDef:
    """The one ``h, r = self.<child_attr>(...)`` takes the aux list back; ``return h`` is
    guarded."""
    body = _block(forward)
    statements = list(body.body)
    call = m.SimpleStatementLine(
        body=[
            m.Assign(
                targets=[m.AssignTarget(target=m.Tuple())],
                value=m.Call(func=m.Attribute(value=m.Name("self"), attr=m.Name(child_attr))),
            )
        ]
    )
    calls = [i for i, s in enumerate(statements) if m.matches(s, call)]
    if len(calls) != 1:
        raise CodemodRefused(
            f"forward does not call self.{child_attr} exactly once as `h, r = ...` "
            f"(found {len(calls)})"
        )
    line = statements[calls[0]]
    assert isinstance(line, cst.SimpleStatementLine)
    assign = line.body[0]
    assert isinstance(assign, cst.Assign)
    target = assign.targets[0].target
    assert isinstance(target, cst.Tuple)
    first = target.elements[0].value
    if not isinstance(first, cst.Name):
        raise CodemodRefused(f"self.{child_attr}'s stream is not assigned to a name")
    new_target = _with_aux(target)
    statements[calls[0]] = line.with_changes(
        body=[assign.with_changes(targets=[assign.targets[0].with_changes(target=new_target)])]
    )
    new = forward.with_changes(
        body=body.with_changes(body=_guarded_return(statements, first.value))
    )
    return _widened_annotation(new) if has_torch else new


def _nested(
    residual: str | None = "residual", absolute: bool = False, stage_slice: bool = False
) -> Callable[[str], str]:
    return lambda source: add_nested_aux_capture(
        source, "Model", "Decoder", "layers", residual, absolute, stage_slice
    )


_BEFORE = """\
import torch


class Decoder(torch.nn.Module):
    def __init__(self, vllm_config, prefix=""):
        super().__init__()
        self.start_layer, self.end_layer, self.layers = make_layers(4, Layer, prefix)

    def forward(
        self, positions, hidden_states, residual
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        for layer in islice(self.layers, self.start_layer, self.end_layer):
            hidden_states, residual = layer(positions, hidden_states, residual)
        return hidden_states, residual


class Model(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.layers = Decoder(vllm_config, prefix=f"{prefix}.layers")

    def embed_input_ids(self, input_ids):
        return self.embed_tokens(input_ids)

    def forward(self, input_ids, positions) -> torch.Tensor:
        hidden_states, residual = self.embed_input_ids(input_ids), None
        hidden_states, residual = self.layers(
            positions=positions, hidden_states=hidden_states, residual=residual
        )
        if not get_pp_group().is_last_rank:
            return IntermediateTensors({"hidden_states": hidden_states})
        hidden_states, _ = self.norm(hidden_states, residual)
        return hidden_states
"""

_AFTER = """\
import torch


class Decoder(torch.nn.Module):
    def __init__(self, vllm_config, prefix=""):
        super().__init__()
        self.start_layer, self.end_layer, self.layers = make_layers(4, Layer, prefix)

    def __len__(self) -> int:
        return len(self.layers)

    def forward(
        self, positions, hidden_states, residual
    ) -> tuple[torch.Tensor, torch.Tensor | None, list[torch.Tensor]]:
        aux_hidden_states = self._maybe_add_hidden_state([], 0, hidden_states, residual)
        for idx, layer in enumerate(islice(self.layers, self.start_layer, self.end_layer)):
            hidden_states, residual = layer(positions, hidden_states, residual)
            self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, residual)
        return hidden_states, residual, aux_hidden_states


class Model(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.layers = Decoder(vllm_config, prefix=f"{prefix}.layers")

    def embed_input_ids(self, input_ids):
        return self.embed_tokens(input_ids)

    def _set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.layers._set_aux_hidden_state_layers(layers)

    def forward(self, input_ids, positions) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        hidden_states, residual = self.embed_input_ids(input_ids), None
        hidden_states, residual, aux_hidden_states = self.layers(
            positions=positions, hidden_states=hidden_states, residual=residual
        )
        if not get_pp_group().is_last_rank:
            return IntermediateTensors({"hidden_states": hidden_states})
        hidden_states, _ = self.norm(hidden_states, residual)

        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states
"""  # noqa: E501 - ruff formats the touched lines in the tree; the codemod writes them long

CASES: list[Case] = [
    Case(
        "the two-module form: the child collects, the parent delegates", _nested(), _BEFORE, _AFTER
    ),
    Case("already collecting: no change", _nested(), _AFTER),
    Case(
        "the child returns something else: refuse",
        _nested(),
        _BEFORE.replace(
            "        return hidden_states, residual\n", "        return hidden_states\n"
        ),
        refuses="does not end with `return <names>`",
    ),
    Case(
        "the parent calls the child twice: refuse",
        _nested(),
        _BEFORE.replace(
            "        if not get_pp_group",
            "        hidden_states, residual = self.layers(positions, hidden_states, residual)\n"
            "        if not get_pp_group",
        ),
        refuses="exactly once",
    ),
    Case(
        "the parent already defines the delegating method: refuse",
        _nested(),
        _BEFORE.replace(
            "    def embed_input_ids(self, input_ids):\n",
            "    def _set_aux_hidden_state_layers(self, layers):\n        pass\n\n"
            "    def embed_input_ids(self, input_ids):\n",
        ),
        refuses="already defines _set_aux_hidden_state_layers",
    ),
    Case(
        "hostile child attribute: refuse",
        lambda s: add_nested_aux_capture(s, "Model", "Decoder", "layers(x)", "residual"),
        _BEFORE,
        refuses="not a Python identifier",
    ),
]


def add_capture(source: str, **args: object) -> str:
    """The capture the enable recipe writes: the two-module form where ``args`` name a child,
    the one-module form (:func:`bot.codemods.aux_capture.add_aux_capture`) otherwise; with
    ``legacy``, the decoder's own pre-mixin capture is taken out first
    (:func:`bot.codemods.legacy_capture.drop_legacy_capture`)."""
    if args.pop("legacy", False):
        if args.get("child") is not None:
            raise CodemodRefused("a nested decoder with a pre-mixin capture is not migrated")
        source = drop_legacy_capture(source, str(args["class_name"]))
    if args.get("child") is not None:
        return add_nested_aux_capture(source, **args)  # type: ignore[arg-type]
    args = {k: v for k, v in args.items() if k not in ("child", "child_attr")}
    return add_aux_capture(source, **args)  # type: ignore[arg-type]
