"""Codemod: a decoder's own pre-mixin aux capture is taken out, for the mixin's to replace.

Before ``EagleModelMixin``, a decoder collected EAGLE-3's aux hidden states itself:
``self.aux_hidden_state_layers: tuple[int, ...] = ()`` in ``__init__``, ``aux_hidden_states =
[]`` before the layer loop, ``if <i> in self.aux_hidden_state_layers:
aux_hidden_states.append(...)`` before each layer call (the input of layer ``i``: the output of
the layer before it) and ``if aux_hidden_states: return <stream>, aux_hidden_states`` after the
loop. This codemod removes exactly those statements from the class, so that
:func:`bot.codemods.aux_capture.add_aux_capture` writes the mixin's capture (the same states:
the first layer's input, then after each layer). Anything else naming the aux states refuses.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from bot.codemods.base import Case, CodemodRefused, parse, require_identifier

AUX = "aux_hidden_states"
LAYERS = "aux_hidden_state_layers"


def drop_legacy_capture(source: str, class_name: str) -> str:
    require_identifier(class_name, "class name")
    tree = parse(source)
    found = [s for s in tree.body if isinstance(s, cst.ClassDef) and s.name.value == class_name]
    if len(found) != 1:
        raise CodemodRefused(f"expected one module-level class {class_name}, found {len(found)}")
    dropper = _Dropper()
    new_class = found[0].visit(dropper)
    if not dropper.dropped:
        return source  # nothing of the legacy capture: nothing to do
    left = [n for n in _names(new_class) if n in (AUX, LAYERS)]
    if left:
        raise CodemodRefused(
            f"{class_name} uses {left[0]} beyond the legacy capture this codemod removes"
        )
    return tree.with_changes(body=[new_class if s is found[0] else s for s in tree.body]).code


def _names(node: cst.CSTNode) -> list[str]:
    found: list[str] = []

    class _Collect(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:  # noqa: N802 - libcst's naming
            found.append(name.value)

    node.visit(_Collect())
    return found


_LAYERS_ATTR = m.Attribute(value=m.Name("self"), attr=m.Name(LAYERS))
_LEGACY_INIT = m.SimpleStatementLine(
    body=[
        m.Assign(targets=[m.AssignTarget(target=_LAYERS_ATTR)], value=m.Tuple(elements=[]))
        | m.AnnAssign(target=_LAYERS_ATTR, value=m.Tuple(elements=[]))
    ]
)
_AUX_INIT = m.SimpleStatementLine(
    body=[
        m.Assign(targets=[m.AssignTarget(target=m.Name(AUX))], value=m.List(elements=[]))
        | m.AnnAssign(target=m.Name(AUX), value=m.List(elements=[]))
    ]
)
_APPEND = m.SimpleStatementLine(
    body=[
        m.Expr(
            value=m.Call(func=m.Attribute(value=m.Name(AUX), attr=m.Name("append")), args=[m.Arg()])
        )
    ]
)
_LEGACY_CHECK = m.If(
    test=m.Comparison(comparisons=[m.ComparisonTarget(operator=m.In(), comparator=_LAYERS_ATTR)]),
    body=m.IndentedBlock(body=[m.AtLeastN(_APPEND, n=1)]),
    orelse=None,
)
_AUX_TESTED = m.Name(AUX) | m.Comparison(
    left=m.Call(func=m.Name("len"), args=[m.Arg(value=m.Name(AUX))])
)
_LEGACY_RETURN = m.If(
    test=_AUX_TESTED,
    body=m.IndentedBlock(
        body=[
            m.SimpleStatementLine(
                body=[m.Return(value=m.Tuple(elements=[m.Element(), m.Element(m.Name(AUX))]))]
            )
        ]
    ),
    orelse=None,
)


class _Dropper(cst.CSTTransformer):
    """Removes the legacy capture's statements wherever they stand in the class."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def _drop(self, node: cst.CSTNode) -> bool:
        return any(
            m.matches(node, pattern)
            for pattern in (_LEGACY_INIT, _AUX_INIT, _LEGACY_CHECK, _LEGACY_RETURN)
        )

    def leave_IndentedBlock(  # noqa: N802 - libcst's naming
        self, original: cst.IndentedBlock, updated: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        kept: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []  # a dropped statement's blank lines stay in place
        for statement in updated.body:
            if self._drop(statement):
                self.dropped += 1
                carried += getattr(statement, "leading_lines", ())
                continue
            if carried and not getattr(statement, "leading_lines", ()):
                statement = statement.with_changes(leading_lines=carried)
            carried = []
            kept.append(statement)
        if not kept:
            raise CodemodRefused("removing the legacy capture would leave a block empty")
        return updated.with_changes(body=kept)


_LEGACY = """\
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = Norm()

        self.aux_hidden_state_layers: tuple[int, ...] = ()

    def forward(self, positions, hidden_states, residual):
        aux_hidden_states = []
        for layer_idx, layer in enumerate(self.layers, start=self.start_layer):
            if layer_idx in self.aux_hidden_state_layers:
                aux_hidden_states.append(
                    hidden_states + residual if residual is not None else hidden_states
                )
            hidden_states, residual = layer(positions, hidden_states, residual)
        hidden_states, _ = self.norm(hidden_states, residual)
        if aux_hidden_states:
            return hidden_states, aux_hidden_states
        return hidden_states
"""

_DROPPED = """\
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = Norm()

    def forward(self, positions, hidden_states, residual):
        for layer_idx, layer in enumerate(self.layers, start=self.start_layer):
            hidden_states, residual = layer(positions, hidden_states, residual)
        hidden_states, _ = self.norm(hidden_states, residual)
        return hidden_states
"""


def _drop(source: str) -> str:
    return drop_legacy_capture(source, "M")


CASES = (
    Case("the pre-mixin capture taken out, every part of it", _drop, _LEGACY, _DROPPED),
    Case("a decoder without it: no change", _drop, _DROPPED),
    Case(
        "an aux list read elsewhere: refused, not half removed",
        _drop,
        _LEGACY.replace(
            "        return hidden_states\n",
            "        self.last = aux_hidden_states\n        return hidden_states\n",
        ),
        refuses="uses aux_hidden_states beyond the legacy capture",
    ),
    Case(
        "a check that does more than append: left alone, so refused",
        _drop,
        _LEGACY.replace(
            "                )\n            hidden_states, residual = layer(",
            "                )\n                self.count += 1\n"
            "            hidden_states, residual = layer(",
        ),
        refuses="beyond the legacy capture",
    ),
)
