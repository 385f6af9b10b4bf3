"""Codemod: a wrapper class forwards EAGLE-3's two protocol methods to its language model.

The shape vLLM's own wrappers use when the interface's default methods cannot reach the
decoder (``Llama4ForConditionalGeneration``, ``KimiK25ForConditionalGeneration``)::

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.language_model.set_aux_hidden_state_layers(layers)

    def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
        return self.language_model.get_eagle3_default_aux_hidden_state_layers()

With a ``guard`` (a method of the tree raising a clear error when the language model does not
support EAGLE-3, e.g. Pixtral's ``_require_language_model_eagle3``), the guard is added too and
both methods call it first: the shape for wrappers whose language model is chosen at run time.

A target whose decoder is not ``self.model`` (``self.transformer``), or keeps its layers under
another name (``self.h``), gets the two methods on the decoder itself instead
(:func:`add_decoder_delegation`), the shape of the release's own ``NemotronParse``::

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.transformer._set_aux_hidden_state_layers(layers)

    def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
        num_layers = len(self.transformer.h)
        return (2, num_layers // 2, num_layers - 3)

A decoder that hands back whole what a child decoder returns (``OPTModel`` and its
``self.decoder``) is reached through it: ``attribute`` is then the dotted path
(``model.decoder``), each part an identifier.

Methods the class already defines are left alone (that is also what makes a second run a
no-op); they are appended at the end of the class body.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from bot.codemods.base import Case, CodemodRefused, parse, require_identifier

SET_LAYERS = "set_aux_hidden_state_layers"
DEFAULT_LAYERS = "get_eagle3_default_aux_hidden_state_layers"
PROTOCOL_METHODS = (SET_LAYERS, DEFAULT_LAYERS)

_TEMPLATES = {
    SET_LAYERS: (
        "def {name}(self, layers: tuple[int, ...]) -> None:\n"
        "{guard}    self.{attribute}.{name}(layers)\n"
    ),
    DEFAULT_LAYERS: (
        "def {name}(self) -> tuple[int, ...]:\n{guard}    return self.{attribute}.{name}()\n"
    ),
}


def add_delegating_methods(
    source: str,
    class_name: str,
    attribute: str,
    methods: Sequence[str] = PROTOCOL_METHODS,
    guard_name: str | None = None,
    guard_source: str | None = None,
) -> str:
    """Return ``source`` with ``methods`` on ``class_name`` forwarding to ``self.<attribute>``,
    each calling ``self.<guard_name>()`` first when a guard (and its method text) is given."""
    require_identifier(class_name, "class name")
    require_identifier(attribute, "language model attribute")
    guard = _guard_method(guard_name, guard_source)
    for method in methods:
        if method not in _TEMPLATES:
            raise CodemodRefused(f"no delegating template for method {method!r}")

    def written(defined: set[str]) -> list[cst.BaseStatement]:
        missing = [m for m in methods if m not in defined]
        added: list[cst.BaseStatement] = []
        if guard is not None and missing and guard.name.value not in defined:
            added.append(guard.with_changes(leading_lines=[cst.EmptyLine(indent=False)]))
        return added + [_method(m, attribute, guard_name if guard else None) for m in missing]

    return _append_methods(source, class_name, written)


_DECODER_TEMPLATES = {
    SET_LAYERS: (
        "def {name}(self, layers: tuple[int, ...]) -> None:\n"
        "    self.{attribute}._set_aux_hidden_state_layers(layers)\n"
    ),
    DEFAULT_LAYERS: (
        "def {name}(self) -> tuple[int, ...]:\n"
        "    num_layers = len(self.{attribute}.{layers})\n"
        "    return (2, num_layers // 2, num_layers - 3)\n"
    ),
}


def add_decoder_delegation(source: str, class_name: str, attribute: str, layers: str) -> str:
    """Return ``source`` with the two protocol methods on ``class_name`` reaching its decoder
    ``self.<attribute>`` (which has ``EagleModelMixin``) and counting ``self.<attribute>.
    <layers>``: what the interface's defaults do for a decoder at ``self.model.layers``."""
    require_identifier(class_name, "class name")
    for part in attribute.split("."):  # `model.decoder`: the child decoder under self.model
        require_identifier(part, "decoder attribute")
    require_identifier(layers, "layers attribute")

    def written(defined: set[str]) -> list[cst.BaseStatement]:
        return [
            _parsed_method(decoder_delegation(name, attribute, layers))
            for name in PROTOCOL_METHODS
            if name not in defined
        ]

    return _append_methods(source, class_name, written)


def decoder_delegation(name: str, attribute: str, layers: str) -> str:
    """The text of protocol method ``name`` as :func:`add_decoder_delegation` writes it."""
    return _DECODER_TEMPLATES[name].format(name=name, attribute=attribute, layers=layers)


def _parsed_method(text: str) -> cst.FunctionDef:
    function = cst.parse_module(text).body[0]
    assert isinstance(function, cst.FunctionDef)
    return function.with_changes(leading_lines=[cst.EmptyLine(indent=False)])


def _append_methods(
    source: str, class_name: str, written: Callable[[set[str]], list[cst.BaseStatement]]
) -> str:
    """``source`` with ``written(<methods class_name defines>)`` appended to its body."""
    tree = parse(source)
    matches = [
        index
        for index, statement in enumerate(tree.body)
        if isinstance(statement, cst.ClassDef) and statement.name.value == class_name
    ]
    if not matches:
        raise CodemodRefused(f"no module-level class {class_name} in this file")
    if len(matches) > 1:
        raise CodemodRefused(f"class {class_name} is defined {len(matches)} times in this file")
    class_def = tree.body[matches[0]]
    assert isinstance(class_def, cst.ClassDef)
    if not isinstance(class_def.body, cst.IndentedBlock):
        raise CodemodRefused(f"class {class_name} has a one-line body; refusing to reflow it")
    defined = {
        statement.name.value
        for statement in class_def.body.body
        if isinstance(statement, cst.FunctionDef)
    }
    added = written(defined)
    if not added:
        return source
    body = class_def.body.with_changes(body=[*class_def.body.body, *added])
    new_body = list(tree.body)
    new_body[matches[0]] = class_def.with_changes(body=body)
    return tree.with_changes(body=new_body).code


def _guard_method(name: str | None, source: str | None) -> cst.FunctionDef | None:
    if name is None and source is None:
        return None
    if name is None or source is None:
        raise CodemodRefused("a guard needs both its name and its method text")
    require_identifier(name, "guard method")
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        raise CodemodRefused("the guard's method text does not parse") from None
    functions = [s for s in module.body if isinstance(s, cst.FunctionDef)]
    if len(module.body) != 1 or len(functions) != 1 or functions[0].name.value != name:
        raise CodemodRefused(f"the guard's text is not exactly one method named {name}")
    return functions[0]


def delegating_method(name: str, attribute: str, guard: str | None = None) -> str:
    """The text of protocol method ``name`` as this codemod writes it (unindented)."""
    call = f"    self.{guard}()\n" if guard else ""
    return _TEMPLATES[name].format(name=name, attribute=attribute, guard=call)


def _method(name: str, attribute: str, guard: str | None = None) -> cst.FunctionDef:
    return _parsed_method(delegating_method(name, attribute, guard))


def _delegate(class_name: str, attribute: str = "language_model") -> Callable[[str], str]:
    return lambda source: add_delegating_methods(source, class_name, attribute)


_WRAPPER = """\
class KimiVLForConditionalGeneration(nn.Module, SupportsMultiModal):
    def forward(self, input_ids, positions):
        return self.language_model(input_ids, positions)
"""

_DELEGATING = """
    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.language_model.set_aux_hidden_state_layers(layers)

    def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
        return self.language_model.get_eagle3_default_aux_hidden_state_layers()
"""

_GUARD = """\
def _require_language_model_eagle3(self) -> None:
    if not supports_eagle3(self.language_model):
        raise RuntimeError("the language model does not support EAGLE-3")
"""


def _guarded(class_name: str) -> Callable[[str], str]:
    return lambda source: add_delegating_methods(
        source,
        class_name,
        "language_model",
        guard_name="_require_language_model_eagle3",
        guard_source=_GUARD,
    )


_GUARDED = """
    def _require_language_model_eagle3(self) -> None:
        if not supports_eagle3(self.language_model):
            raise RuntimeError("the language model does not support EAGLE-3")

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self._require_language_model_eagle3()
        self.language_model.set_aux_hidden_state_layers(layers)

    def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
        self._require_language_model_eagle3()
        return self.language_model.get_eagle3_default_aux_hidden_state_layers()
"""

_TRANSFORMER = """\
class GPT2LMHeadModel(nn.Module, SupportsPP, SupportsEagle3):
    def forward(self, input_ids, positions):
        return self.transformer(input_ids, positions)
"""

_TO_DECODER = """
    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.transformer._set_aux_hidden_state_layers(layers)

    def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
        num_layers = len(self.transformer.h)
        return (2, num_layers // 2, num_layers - 3)
"""


def _to_decoder(attribute: str = "transformer", layers: str = "h") -> Callable[[str], str]:
    return lambda source: add_decoder_delegation(source, "GPT2LMHeadModel", attribute, layers)


_CHILD_DECODER = """\
class OPTForCausalLM(nn.Module, SupportsPP, SupportsEagle3):
    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
"""

_TO_CHILD = """
    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.model.decoder._set_aux_hidden_state_layers(layers)

    def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
        num_layers = len(self.model.decoder.layers)
        return (2, num_layers // 2, num_layers - 3)
"""


def _to_child(attribute: str = "model.decoder") -> Callable[[str], str]:
    return lambda source: add_decoder_delegation(source, "OPTForCausalLM", attribute, "layers")


CASES: list[Case] = [
    Case(
        "a decoder at self.transformer with its layers at h: both methods reach it",
        _to_decoder(),
        _TRANSFORMER,
        _TRANSFORMER + _TO_DECODER,
    ),
    Case(
        "the decoder's methods already there: no change",
        _to_decoder(),
        _TRANSFORMER + _TO_DECODER,
    ),
    Case(
        "a child decoder handed back whole (self.model.decoder): both methods reach the child",
        _to_child(),
        _CHILD_DECODER,
        _CHILD_DECODER + _TO_CHILD,
    ),
    Case(
        "the child decoder's methods already there: no change",
        _to_child(),
        _CHILD_DECODER + _TO_CHILD,
    ),
    Case(
        "a hostile part of the dotted decoder path: refuse",
        _to_child("model.decoder; import os"),
        _CHILD_DECODER,
        refuses="decoder attribute is not a Python identifier",
    ),
    Case(
        "a hostile layers attribute: refuse",
        _to_decoder(layers="h)); import os; ((x"),
        _TRANSFORMER,
        refuses="layers attribute is not a Python identifier",
    ),
    Case(
        "with the tree's guard: the guard first, each method calls it",
        _guarded("LlavaNextForConditionalGeneration"),
        _WRAPPER.replace("KimiVL", "LlavaNext"),
        _WRAPPER.replace("KimiVL", "LlavaNext") + _GUARDED,
    ),
    Case(
        "guarded methods already there: no change",
        _guarded("A"),
        "class A:\n    x = 1\n" + _GUARDED,
    ),
    Case(
        "a guard text that is not one method of that name: refuse",
        lambda source: add_delegating_methods(
            source, "A", "language_model", guard_name="_check", guard_source="import os\n"
        ),
        "class A:\n    x = 1\n",
        refuses="not exactly one method named _check",
    ),
    Case(
        "both methods appended at the end of the class",
        _delegate("KimiVLForConditionalGeneration"),
        _WRAPPER,
        _WRAPPER + _DELEGATING,
    ),
    Case(
        "the attribute the wrapper keeps its language model in",
        _delegate("A", "llm"),
        "class A(B):\n    x = 1\n",
        "class A(B):\n    x = 1\n" + _DELEGATING.replace("self.language_model.", "self.llm."),
    ),
    Case(
        "a method the class already defines is kept: only the other one is added",
        _delegate("A"),
        "class A(B):\n    def set_aux_hidden_state_layers(self, layers):\n        pass\n",
        "class A(B):\n    def set_aux_hidden_state_layers(self, layers):\n        pass\n"
        + _DELEGATING.split("\n\n", 1)[1].join(["\n", ""]),
    ),
    Case(
        "both already defined: no change",
        _delegate("KimiVLForConditionalGeneration"),
        _WRAPPER + _DELEGATING,
    ),
    Case(
        "other classes in the file are untouched",
        _delegate("B"),
        "class A:\n    x = 1\n\n\nclass B:\n    y = 2\n",
        "class A:\n    x = 1\n\n\nclass B:\n    y = 2\n" + _DELEGATING,
    ),
    Case(
        "class not found: refuse",
        _delegate("Missing"),
        _WRAPPER,
        refuses="no module-level class Missing",
    ),
    Case(
        "hostile attribute: refuse",
        _delegate("A", "x; import os"),
        "class A:\n    x = 1\n",
        refuses="not a Python identifier",
    ),
]
