"""Codemod: add an example-model entry to a section of a module-level dict literal.

vLLM's ``tests/models/registry.py`` keeps dicts such as ``_SPECULATIVE_DECODING_EXAMPLE_MODELS``
split into sections by ``# [Name]`` comments, one ``"Arch": _HfExamplesInfo(...)`` per entry.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Sequence

import libcst as cst

from bot.codemods.base import Case, CodemodRefused, parse, require_identifier, shown
from bot.codemods.layout import insert_element
from bot.tree.model_registry import section_name

Literal = str | int | float | bool | None


def insert_registry_entry(
    source: str,
    *,
    dict_name: str,
    key: str,
    args: Sequence[Literal],
    kwargs: Sequence[tuple[str, Literal]],
    section: str,
) -> str:
    """Return ``source`` with ``"key": Callee(*args, **kwargs),`` after section's last entry.

    ``Callee`` and the argument indentation are copied from that last entry. Unchanged if
    ``key`` is already in the dict; refused if the section or the dict is missing.
    """
    require_identifier(dict_name, "dict name")
    for name, _ in kwargs:
        require_identifier(name, "keyword argument")
    tree = parse(source)
    index, statement, assign, literal = _find_dict(tree, dict_name)
    if key in _keys(literal):
        return source
    elements = list(literal.elements)
    in_section = [i for i, found in enumerate(_sections(literal)) if found == section]
    if not in_section:
        raise CodemodRefused(
            f"{dict_name} has no entries in section {shown(section)} (a '# [...]' comment)"
        )
    anchor = elements[in_section[-1]]
    entry = _render_entry(anchor, literal, key, args, kwargs)
    new_literal = insert_element(literal, in_section[-1] + 1, entry, "lbrace", "rbrace")
    new_statement = statement.with_changes(
        body=[
            assign.with_changes(value=new_literal) if small is assign else small
            for small in statement.body
        ]
    )
    body = list(tree.body)
    body[index] = new_statement
    return tree.with_changes(body=body).code


def _find_dict(
    tree: cst.Module, dict_name: str
) -> tuple[int, cst.SimpleStatementLine, cst.Assign | cst.AnnAssign, cst.Dict]:
    for index, statement in enumerate(tree.body):
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign):
                names = [t.target for t in small.targets]
            elif isinstance(small, cst.AnnAssign):
                names = [small.target]
            else:
                continue
            if any(isinstance(n, cst.Name) and n.value == dict_name for n in names):
                if not isinstance(small.value, cst.Dict):
                    raise CodemodRefused(f"{dict_name} is not assigned a dict literal")
                return index, statement, small, small.value
    raise CodemodRefused(f"no module-level dict {dict_name} in this file")


def _keys(literal: cst.Dict) -> set[object]:
    keys = set()
    for element in literal.elements:
        if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
            keys.add(element.key.evaluated_value)
    return keys


def _comments_before(literal: cst.Dict, index: int) -> list[str]:
    if index == 0:
        ws = literal.lbrace.whitespace_after
    else:
        comma = literal.elements[index - 1].comma
        ws = comma.whitespace_after if isinstance(comma, cst.Comma) else None
    if not isinstance(ws, cst.ParenthesizedWhitespace):
        return []
    return [line.comment.value for line in ws.empty_lines if line.comment is not None]


def _sections(literal: cst.Dict) -> list[str | None]:
    """The section name each element falls under (the last ``# [Name]`` above it)."""
    current: str | None = None
    found = []
    for index in range(len(literal.elements)):
        for comment in _comments_before(literal, index):
            current = section_name(comment) or current
        found.append(current)
    return found


def _render_literal(value: Literal) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, str):
        text = repr(value)
        # Like ruff format: double quotes unless the string itself holds one.
        if text.startswith("'") and '"' not in value:
            text = '"' + text[1:-1] + '"'
        return text
    raise CodemodRefused(f"not a plain literal for a registry entry: {shown(value)}")


def _checked(value: Literal) -> str:
    text = _render_literal(value)
    if ast.literal_eval(text) != value:  # pragma: no cover - a bug guard, not an input check
        raise CodemodRefused(f"could not render {shown(value)} faithfully")
    return text


def _render_entry(
    anchor: cst.BaseDictElement,
    literal: cst.Dict,
    key: str,
    args: Sequence[Literal],
    kwargs: Sequence[tuple[str, Literal]],
) -> cst.DictElement:
    call = anchor.value if isinstance(anchor, cst.DictElement) else None
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name):
        raise CodemodRefused("the section's last entry is not a call like Name(...)")
    opening = literal.lbrace.whitespace_after
    item_indent = (
        opening.last_line.value if isinstance(opening, cst.ParenthesizedWhitespace) else ""
    )
    call_opening = call.whitespace_before_args
    arg_indent = (
        call_opening.last_line.value
        if isinstance(call_opening, cst.ParenthesizedWhitespace)
        else item_indent + "    "
    )
    rendered = [_checked(value) for value in args]
    rendered += [f"{name}={_checked(value)}" for name, value in kwargs]
    lines = "".join(f"{arg_indent}{text},\n" for text in rendered)
    call_text = f"{call.func.value}(\n{lines}{item_indent})" if rendered else f"{call.func.value}()"
    parsed = cst.parse_expression(f"{{\n{item_indent}{_checked(key)}: {call_text},\n}}")
    assert isinstance(parsed, cst.Dict)
    element = parsed.elements[0]
    assert isinstance(element, cst.DictElement)
    return element


def _insert(
    key: str, section: str, args: list[Literal], kwargs: list[tuple[str, Literal]]
) -> Callable[[str], str]:
    return lambda source: insert_registry_entry(
        source, dict_name="_MODELS", key=key, args=args, kwargs=kwargs, section=section
    )


_REGISTRY = """\
_MODELS = {
    # [Medusa]
    "MedusaModel": _HfExamplesInfo(
        "JackFram/llama-68m", speculative_model="abhigoyal/vllm-medusa-llama-68m-random"
    ),
    # [DFlash]
    "DFlashDraftModel": _HfExamplesInfo(
        "Qwen/Qwen3.5-4B",
        max_num_seqs=32,  # low-VRAM CI
    ),
    # [Eagle]
    "EagleModel": _HfExamplesInfo(
        "e/base",
        trust_remote_code=True,
    ),
}
"""

_NEW_DFLASH = """\
    "DFlashQwen3NextDraftModel": _HfExamplesInfo(
        "Qwen/Qwen3-Coder-Next",
        use_original_num_layers=True,
        max_model_len=8192,
        tokenizer=None,
    ),
"""

CASES: list[Case] = [
    Case(
        "seed shape: after the section's last entry, before the next section comment",
        _insert(
            "DFlashQwen3NextDraftModel",
            "DFlash",
            ["Qwen/Qwen3-Coder-Next"],
            [("use_original_num_layers", True), ("max_model_len", 8192), ("tokenizer", None)],
        ),
        _REGISTRY,
        _REGISTRY.replace("    # [Eagle]\n", _NEW_DFLASH + "    # [Eagle]\n"),
    ),
    Case(
        "last section: before the closing brace",
        _insert("EagleNew", "Eagle", ["it's"], [("revision", 'say "hi"')]),
        _REGISTRY,
        _REGISTRY.replace(
            "    ),\n}\n",
            '    ),\n    "EagleNew": _HfExamplesInfo(\n        "it\'s",\n'
            "        revision='say \"hi\"',\n    ),\n}\n",
        ),
    ),
    Case(
        "key already present: no change",
        _insert("DFlashDraftModel", "DFlash", ["x"], []),
        _REGISTRY,
    ),
    Case(
        "section absent: refuse",
        _insert("X", "PEagle", ["x"], []),
        _REGISTRY,
        refuses="no entries in section 'PEagle'",
    ),
    Case(
        "commented-out code is not a section",
        _insert("X", "Medusa", ["x"], []),
        _REGISTRY.replace(
            "    # [DFlash]\n", '    # "Old": _HfExamplesInfo(\n    # ),\n    # [DFlash]\n'
        ),
        _REGISTRY.replace(
            "    # [DFlash]\n",
            '    "X": _HfExamplesInfo(\n        "x",\n    ),\n'
            '    # "Old": _HfExamplesInfo(\n    # ),\n    # [DFlash]\n',
        ),
    ),
    Case(
        "hostile value stays a string literal",
        _insert("X", "Eagle", ['"), __import__("os").system("id"), ("'], []),
        _REGISTRY,
        _REGISTRY.replace(
            "    ),\n}\n",
            '    ),\n    "X": _HfExamplesInfo(\n'
            '        \'"), __import__("os").system("id"), ("\',\n    ),\n}\n',
        ),
    ),
    Case(
        "a keyword that is not an identifier: refuse",
        _insert("X", "Eagle", ["x"], [("revision=None, trust_remote_code", True)]),
        _REGISTRY,
        refuses="keyword argument is not a Python identifier",
    ),
    Case(
        "non-literal value: refuse",
        _insert("X", "Eagle", [object()], []),  # type: ignore[list-item]
        _REGISTRY,
        refuses="not a plain literal",
    ),
    Case(
        "dict missing: refuse",
        _insert("X", "Eagle", ["x"], []),
        "OTHER = {}\n",
        refuses="no module-level dict _MODELS",
    ),
]
