"""The codemod of fix class ``core-eagle3-forwarding``, with its cases.

:func:`forward_eagle3_defaults`: ``SupportsEagle3``'s two default methods first ask
``_eagle3_language_model(self)`` (a module function written right after the protocol) for the
language model a multimodal model hands EAGLE-3 to, and call that model's own method when
there is one:

- a model that is its own language model, or whose language model's ``.model`` (or the
  language model itself) has ``EagleModelMixin``: None, and the defaults unwrap ``.model``
  exactly as before (every wrapper the defaults serve today keeps its path);
- otherwise a language model that declares ``SupportsEagle3`` itself: its own methods run
  (what the tree's wrappers with a model chosen at run time write by hand, Pixtral's);
- any other: the tree's own clear error (the ``raise`` of its guard, given as text), where the
  defaults failed an ``assert`` before.

Run again, nothing changes; a helper of that name written otherwise refuses.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import libcst as cst

from bot.codemods.base import Case, CodemodRefused, parse
from bot.recipes.core_eagle3_forwarding.evidence import (
    DEFAULT_LAYERS,
    METHODS,
    PROTOCOL,
    SET_LAYERS,
)

HELPER = "_eagle3_language_model"
HELPER_TEMPLATE = f'''def {HELPER}(model: object) -> {PROTOCOL} | None:
    """The language model a multimodal model hands EAGLE-3 to when the defaults
    cannot reach its decoder themselves; None when they can."""
    if hasattr(model, "get_language_model"):
        language_model = model.get_language_model()
    elif hasattr(model, "language_model"):
        language_model = model.language_model
    else:
        return None
    if language_model is model or isinstance(
        getattr(language_model, "model", language_model), EagleModelMixin
    ):
        return None
    if supports_eagle3(language_model):
        return language_model
{{raises}}
'''
_FORWARD = {
    SET_LAYERS: (
        f"language_model = {HELPER}(self)\n"
        "if language_model is not None:\n"
        f"    language_model.{SET_LAYERS}({{layers}})\n"
        "    return\n"
    ),
    DEFAULT_LAYERS: (
        f"language_model = {HELPER}(self)\n"
        "if language_model is not None:\n"
        f"    return language_model.{DEFAULT_LAYERS}()\n"
    ),
}


def helper_text(raises: str) -> str:
    """The helper as the codemod writes it, around the tree's ``raise`` statement."""
    return HELPER_TEMPLATE.format(raises=_indented(_checked_raise(raises)))


def forward_eagle3_defaults(source: str, raises: str) -> str:
    """``source`` (the tree's interfaces module) with ``SupportsEagle3``'s defaults forwarding
    to a language model that declares the interface, and raising ``raises`` (one ``raise``
    statement, naming the model ``language_model``) when it cannot collect aux states."""
    helper = cst.parse_statement(helper_text(raises))
    tree = parse(source)
    at = [i for i, s in enumerate(tree.body) if _is_protocol(s)]
    if len(at) != 1:
        raise CodemodRefused(f"no single module-level class {PROTOCOL} to edit")
    protocol = tree.body[at[0]]
    assert isinstance(protocol, cst.ClassDef)
    body = list(tree.body)
    body[at[0]] = _forwarding_protocol(protocol)
    existing = [s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == HELPER]
    if existing:
        if not existing[0].with_changes(leading_lines=()).deep_equals(helper):
            raise CodemodRefused(f"{HELPER} is already defined, differently: refusing")
    else:
        body.insert(at[0] + 1, helper.with_changes(leading_lines=[cst.EmptyLine()] * 2))
    return tree.with_changes(body=body).code


def _is_protocol(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.ClassDef) and statement.name.value == PROTOCOL


def _checked_raise(raises: str) -> str:
    try:
        parsed = ast.parse(raises.strip())
    except SyntaxError:
        raise CodemodRefused("the guard's raise does not parse") from None
    if len(parsed.body) != 1 or not isinstance(parsed.body[0], ast.Raise):
        raise CodemodRefused("the guard's text is not exactly one raise statement")
    if any(isinstance(n, ast.Name) and n.id == "self" for n in ast.walk(parsed)):
        raise CodemodRefused("the guard's raise still names self")
    return raises.strip()


def _indented(text: str) -> str:
    return "".join(f"    {line}" if line.strip() else line for line in text.splitlines(True))


def _forwarding_protocol(protocol: cst.ClassDef) -> cst.ClassDef:
    assert isinstance(protocol.body, cst.IndentedBlock)
    found = {
        s.name.value: s
        for s in protocol.body.body
        if isinstance(s, cst.FunctionDef) and s.name.value in METHODS
    }
    if set(found) != set(METHODS):
        raise CodemodRefused(f"{PROTOCOL} does not define both {' and '.join(METHODS)}")
    new_body = [
        _forwarding_method(s) if isinstance(s, cst.FunctionDef) and s in found.values() else s
        for s in protocol.body.body
    ]
    return protocol.with_changes(body=protocol.body.with_changes(body=new_body))


def _forwarding_method(method: cst.FunctionDef) -> cst.FunctionDef:
    name = method.name.value
    params = [p.name.value for p in method.params.params]
    if name == SET_LAYERS and len(params) != 2:
        raise CodemodRefused(f"{name} does not take exactly (self, layers)")
    text = _FORWARD[name].format(layers=params[1] if len(params) > 1 else "")
    added = list(cst.parse_module(text).body)
    assert isinstance(method.body, cst.IndentedBlock)
    statements = list(method.body.body)
    start = 1 if statements and _is_docstring(statements[0]) else 0
    present = statements[start : start + len(added)]
    if len(present) == len(added) and all(
        a.with_changes(leading_lines=()).deep_equals(b.with_changes(leading_lines=()))
        for a, b in zip(present, added, strict=True)
    ):
        return method
    statements[start:start] = added
    return method.with_changes(body=method.body.with_changes(body=statements))


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )


# -- cases ------------------------------------------------------------------------------------

RAISES = (
    "raise RuntimeError(\n"
    '    f"EAGLE-3 speculative decoding requires the language model to "\n'
    '    f"support EAGLE-3, but {type(language_model).__name__} does not."\n'
    ")\n"
)

PROTOCOL_TEXT = f'''class {PROTOCOL}(SupportsEagleBase, Protocol):
    supports_eagle3: ClassVar[Literal[True]] = True

    def {SET_LAYERS}(self, layers: tuple[int, ...]) -> None:
        """Set which layers should output auxiliary hidden states for EAGLE-3."""
        parent_ref = self
        if hasattr(self, "get_language_model"):
            parent_ref = self.get_language_model()
        holder = getattr(parent_ref, "model", parent_ref)
        holder._set_aux_hidden_state_layers(layers)

    def {DEFAULT_LAYERS}(self) -> tuple[int, ...]:
        parent_ref = self
        if hasattr(self, "get_language_model"):
            parent_ref = self.get_language_model()
        holder = getattr(parent_ref, "model", parent_ref)
        num_layers = len(holder.layers)
        return (2, num_layers // 2, num_layers - 3)


def supports_eagle3(model):
    return isinstance(model, {PROTOCOL})
'''

FORWARDED = (
    PROTOCOL_TEXT.replace(
        '''        """Set which layers should output auxiliary hidden states for EAGLE-3."""
''',
        '''        """Set which layers should output auxiliary hidden states for EAGLE-3."""
        language_model = _eagle3_language_model(self)
        if language_model is not None:
            language_model.set_aux_hidden_state_layers(layers)
            return
''',
    )
    .replace(
        f"""    def {DEFAULT_LAYERS}(self) -> tuple[int, ...]:
""",
        f"""    def {DEFAULT_LAYERS}(self) -> tuple[int, ...]:
        language_model = _eagle3_language_model(self)
        if language_model is not None:
            return language_model.{DEFAULT_LAYERS}()
""",
    )
    .replace(
        "\n\ndef supports_eagle3(model):",
        "\n\n" + helper_text(RAISES) + "\n\ndef supports_eagle3(model):",
    )
)


def _forwarded(raises: str = RAISES) -> Callable[[str], str]:
    return lambda source: forward_eagle3_defaults(source, raises)


CASES: list[Case] = [
    Case(
        "both defaults ask the helper first; the helper follows the protocol",
        _forwarded(),
        PROTOCOL_TEXT,
        FORWARDED,
    ),
    Case("defaults that forward already: no change", _forwarded(), FORWARDED),
    Case(
        "a raise that still names self is refused",
        _forwarded('raise RuntimeError(f"{type(self.language_model).__name__}")\n'),
        PROTOCOL_TEXT,
        refuses="still names self",
    ),
    Case(
        "a guard text that is not a raise is refused",
        _forwarded("import os\n"),
        PROTOCOL_TEXT,
        refuses="not exactly one raise statement",
    ),
    Case(
        "a helper of that name written otherwise is refused",
        _forwarded(),
        PROTOCOL_TEXT + f"\n\ndef {HELPER}(model):\n    return None\n",
        refuses="already defined, differently",
    ),
]
