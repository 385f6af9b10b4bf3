"""One file's facts for the class index, extracted with ``ast`` into plain, cacheable data.

Everything here is a function of the file's text and its module name alone, so the result can be
cached by content hash. Cross-file resolution happens in :mod:`bot.tree.index`.
"""

from __future__ import annotations

import ast
import re
from collections import Counter, deque
from collections.abc import Iterator
from functools import cache
from typing import Any

from bot.tree.decoder_loop import (
    built_from,
    delegation,
    forward_shape,
    layer_returns,
    speculative_refusals,
)

# Bumped whenever the shape of the extracted data changes; old cache entries are then ignored.
EXTRACT_VERSION = 36  # 9-21, 23-31, 33-34 and 39-40 kept free for parallel branches
# sharing this cache (issue 37 took 37, issue 38 then 38, issue 35 then 35 and, merged, 36)

FileFacts = dict[str, Any]

_AUX_HELPER = "_maybe_add_hidden_state"
_AUX_LAYERS_ATTR = "aux_hidden_state_layers"
# vLLM's helper that builds a registered model by architecture name (multimodal wrappers).
_REGISTERED_FACTORY = "init_vllm_registered_model"


def extract_file(source: str, module: str, is_package: bool) -> FileFacts:
    """Parse ``source`` and return its imports, aliases and classes as plain data."""
    tree = _parse_skipping_functions(source)
    facts: FileFacts = {"imports": {}, "aliases": {}, "classes": {}}
    _collect(tree.body, module, is_package, facts)
    return facts


# -- parsing less -----------------------------------------------------------------------------
# Module-level functions (a quarter of the model packages' lines: kernels, helpers) carry no
# fact the index keeps, and parsing them is most of a cold scan's cost. They are blanked before
# parsing, line for line (line numbers stay true). The cut is textual, so it is checked: a file
# whose cut could fall inside a string, or that does not parse once cut, is parsed whole. The
# price: a syntax error inside a module-level function is not seen here (the file's classes are
# indexed); propose's libcst parse and verify's py_compile still refuse such a file.

_FUNCTION_STARTS = ("def ", "async def ", "@")
_CLOSERS = (")", "]", "}")
_TRIPLE_QUOTES = ('"""', "'''")
# A function returning a class by name (alone or first in a tuple) may be a class factory.
_FACTORY_RETURN = re.compile(r"^\s+return (?!None\b|True\b|False\b)[A-Z]\w*\s*(,|$)", re.M)


def _parse_skipping_functions(source: str) -> ast.Module:
    blanked = blank_top_level_functions(source)
    if blanked is not None:
        try:
            return ast.parse(blanked)
        except SyntaxError:
            pass  # the cut misjudged the file: the whole text decides
    return ast.parse(source)


def blank_top_level_functions(source: str) -> str | None:
    """``source`` with each module-level function (decorators included) replaced by blank
    lines, or None when nothing is cut or a cut might not be where the function ends."""
    lines = source.splitlines(keepends=True)
    out: list[str] = []
    cut = False
    i = 0
    while i < len(lines):
        if not lines[i].startswith(_FUNCTION_STARTS):
            out.append(lines[i])
            i += 1
            continue
        body = _after_decorators(lines, i)
        if body >= len(lines) or not lines[body].startswith(("def ", "async def ")):
            out.extend(lines[i:body])  # a decorated class (or a stray decorator): kept
            i = body
            continue
        end = _after_block(lines, body + 1)
        block = "".join(lines[i:end])
        if any(block.count(q) % 2 for q in _TRIPLE_QUOTES) or "\\\n" in block:
            return None  # a string or a continuation may cross the cut
        if _FACTORY_RETURN.search(block):
            out.extend(lines[i:end])  # may pick a class (`select_norm_impl`): kept, parsed
            i = end
            continue
        out.extend("\n" for _ in range(end - i))
        cut = True
        i = end
    return "".join(out) if cut else None


def _after_decorators(lines: list[str], i: int) -> int:
    while i < len(lines) and lines[i].startswith("@"):
        i = _after_block(lines, i + 1)
    return i


def _after_block(lines: list[str], i: int) -> int:
    while i < len(lines) and _continues(lines[i]):
        i += 1
    return i


def _class_map(value: ast.expr) -> list[str]:
    """The values of a dict literal whose values are all class-like names, else nothing."""
    if not isinstance(value, ast.Dict) or not value.values:
        return []
    names = [_dotted(v) for v in value.values]
    if any(n is None or not n.split(".")[-1][:1].isupper() for n in names):
        return []
    return sorted({n for n in names if n})


def _continues(line: str) -> bool:
    """A line inside a block begun at column 0: indented, blank, a comment, or a bracket
    closing a multi-line signature or decorator."""
    return line[:1] in (" ", "\t", "\n", "\r", "#", "") or line.startswith(_CLOSERS)


def _collect(body: list[ast.stmt], module: str, is_package: bool, facts: FileFacts) -> None:
    """Walk module-level statements, descending into if/try blocks (platform selection)."""
    for node in body:
        if isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, module, is_package)
            for alias in node.names:
                if alias.name == "*":
                    facts["imports"].setdefault("*", []).append([base, None])
                    continue
                local = alias.asname or alias.name
                facts["imports"].setdefault(local, []).append([base, alias.name])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    facts["imports"].setdefault(alias.asname, []).append([alias.name, None])
                else:
                    top = alias.name.split(".")[0]
                    facts["imports"].setdefault(top, []).append([top, None])
        elif isinstance(node, ast.ClassDef):
            facts["classes"][node.name] = _class_facts(node)
        elif isinstance(node, ast.FunctionDef) and (picked := _class_factory(node)):
            # `def select_norm_impl(config): ... return RMSNorm, eps ... return LayerNorm, eps`
            facts.setdefault("class_maps", {})[f"{node.name}()"] = picked
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            dotted = _dotted(node.value)
            if isinstance(target, ast.Name) and dotted:
                facts["aliases"].setdefault(target.id, []).append(dotted)
            elif isinstance(target, ast.Name) and (classes := _class_map(node.value)):
                # `LAYER_TYPES = {"attention": A, "mamba": B}`: a layer class picked by key
                facts.setdefault("class_maps", {})[target.id] = classes
        elif isinstance(node, ast.If):
            _collect(node.body, module, is_package, facts)
            _collect(node.orelse, module, is_package, facts)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                _collect(block, module, is_package, facts)
            for handler in node.handlers:
                _collect(handler.body, module, is_package, facts)


def _absolute(name: str | None, level: int, module: str, is_package: bool) -> str:
    if level == 0:
        return name or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    base = ".".join(parts)
    return f"{base}.{name}" if name else base


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    if isinstance(node, ast.Subscript):  # Generic[...] bases
        return _dotted(node.value)
    return None


def _class_facts(node: ast.ClassDef) -> dict[str, Any]:
    class_attrs: dict[str, Any] = {}
    methods: dict[str, Any] = {}
    for item in node.body:
        if isinstance(item, ast.Assign):
            for target in item.targets:
                if isinstance(target, ast.Name):
                    class_attrs[target.id] = _attr_value(item.value)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value:
            class_attrs[item.target.id] = _attr_value(item.value)
        elif isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            methods[item.name] = _method_facts(item)
    return {
        "line": node.lineno,
        "end_line": node.end_lineno,
        "bases": [_dotted(b) for b in node.bases],
        "class_attrs": class_attrs,
        "methods": methods,
    }


def _attr_value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, bool | int | str):
        return {"const": node.value}
    dotted = _dotted(node)
    return {"ref": dotted} if dotted else None


def _callee(call: ast.Call, local_refs: dict[str, str]) -> list[str] | None:
    """How a constructor call names its class: ``[kind, name]``.

    kinds: ``ref`` a dotted name in module scope, ``self-call`` a call of ``self._init_x()`` or
    of a class attribute (``self.model_cls(...)``), ``registered`` a call of
    ``init_vllm_registered_model`` with its literal ``architectures`` (None when they come from
    the checkpoint's config at run time).
    """
    func = call.func
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
    ):
        return ["self-call", func.attr]
    dotted = _dotted(func)
    if dotted is None:
        return None
    if dotted.split(".")[-1] == _REGISTERED_FACTORY:
        return ["registered", _literal_architectures(call)]
    head = dotted.split(".")[0]
    if head in local_refs:
        return ["ref", local_refs[head] + dotted[len(head) :]]
    return ["ref", dotted]


def _literal_architectures(call: ast.Call) -> list[str] | None:
    """``architectures=["A"]`` anywhere in the call (also inside ``with_hf_config(...)``)."""
    for node in ast.walk(call):
        if not isinstance(node, ast.keyword) or node.arg != "architectures":
            continue
        value = node.value
        if isinstance(value, ast.List | ast.Tuple) and value.elts:
            names = [e.value for e in value.elts if isinstance(e, ast.Constant)]
            if len(names) == len(value.elts) and all(isinstance(n, str) for n in names):
                return names
        return None
    return None


def _self_path(node: ast.expr) -> str | None:
    """``a.b`` for ``self.a.b``, ``""`` for ``self``; None for anything else."""
    dotted = _dotted(node)
    if dotted is None or isinstance(node, ast.Subscript):
        return None
    if dotted == "self":
        return ""
    return dotted[len("self.") :] if dotted.startswith("self.") else None


def _is_super_call(func: ast.expr, method: str) -> bool:
    """``super().<method>`` (the same method of the parent class)."""
    return (
        isinstance(func, ast.Attribute)
        and func.attr == method
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "super"
        and not func.value.args
    )


def _self_target(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id == "self" else None
    return None


# The node types _method_facts reads; every other node is only walked through (a `Name` and an
# `Attribute` are read first).
_METHOD_NODES = frozenset({ast.Call, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return})


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``'s nodes in its order, less the ``Load``/``Store`` context leaves (a third of
    all nodes, none of them read here) and without its per-node generators: the method walk is
    most of a cold scan after the parse."""
    todo = deque([node])
    while todo:
        current = todo.popleft()
        for field in _child_fields(type(current)):
            value = getattr(current, field, None)
            if type(value) is list:
                todo.extend([item for item in value if isinstance(item, ast.AST)])
            elif isinstance(value, ast.AST):
                todo.append(value)
        yield current


@cache
def _child_fields(kind: type[ast.AST]) -> tuple[str, ...]:
    return tuple(field for field in kind._fields if field != "ctx")


def _class_factory(func: ast.FunctionDef) -> list[str]:
    """The classes a module-level function returns, when every return hands back a class by
    name, alone or first in a tuple (Cohere's ``select_norm_impl``); else nothing."""
    picked: list[str] = []
    for node in ast.walk(func):
        if isinstance(node, ast.Return):
            value = node.value
            if isinstance(value, ast.Tuple) and value.elts:
                value = value.elts[0]
            if not (isinstance(value, ast.Name) and value.id[:1].isupper()):
                return []
            picked.append(value.id)
    return sorted(set(picked))


def _method_facts(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, Any]:
    local_refs: dict[str, str] = {}
    args = func.args
    positional = args.posonlyargs + args.args
    for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults):
        if dotted := _dotted(default):
            local_refs[arg.arg] = dotted
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        if default is not None and (dotted := _dotted(default)):
            local_refs[arg.arg] = dotted

    assigns: list[list[Any]] = []
    returns: list[list[Any]] = []
    returned_self: list[str] = []  # `return self.a.b` -> "a.b" (get_language_model)
    aux: dict[str, list[int]] = {"helper": [], "layers_attr": [], "aux_names": []}
    # For "does forward hand self.<path>(...)'s output back unchanged?"
    from_self_call: dict[str, str] = {}  # local name -> path, for `x = self.a.b(...)`
    assignment_count: dict[str, int] = {}
    returned_names: list[str] = []
    local_calls: dict[str, list[Any]] = {}  # `lm = init_vllm_registered_model(...)`
    pending: list[tuple[str, str, int]] = []  # `self.x = lm`, resolved after the walk
    calls: set[str] = set()  # `self.a.b(...)` -> "a.b"; `super().<this method>(...)` -> "super()"
    # What the decoder-loop facts, the layer facts and the pinned architectures read, collected
    # in this one walk (ast.walk's order) rather than by a walk of their own each
    fors: list[ast.For] = []
    ifs: list[ast.If] = []
    return_nodes: list[ast.Return] = []
    self_assigns: list[ast.Assign] = []
    names: list[ast.Name] = []
    call_nodes: list[ast.Call] = []
    arch_keywords: list[list[Any]] = []  # `architectures=<name>` in a call: [line, end, name]
    arch_lists: list[list[Any]] = []  # `<x>.text_config.architectures = [...]`, `<name> = [...]`
    for node in _walk(func):
        node_type = type(node)
        if node_type is ast.For:
            fors.append(node)
            continue
        if node_type is ast.If:
            ifs.append(node)
            continue
        if node_type is ast.Name:  # the commonest nodes first, each read in one place below
            names.append(node)
            if "aux_hidden_state" in node.id:
                aux["aux_names"].append(node.lineno)
            continue
        if node_type is ast.Attribute:
            if node.attr == _AUX_HELPER:
                aux["helper"].append(node.lineno)
            elif node.attr == _AUX_LAYERS_ATTR:
                aux["layers_attr"].append(node.lineno)
            continue
        if node_type not in _METHOD_NODES:
            continue
        if node_type is ast.Return:
            return_nodes.append(node)
        elif node_type is ast.Call:
            call_nodes.append(node)
            if node.keywords:
                arch_keywords += _architectures_keyword(node)
        elif node_type is ast.Assign and type(node.value) is ast.List:
            arch_lists += _architectures_list(node)
        if (
            node_type is ast.Assign
            and isinstance(node.value, ast.Call)
            and any(isinstance(t, ast.Attribute | ast.Tuple) for t in node.targets)
        ):
            self_assigns.append(node)
        if isinstance(node, ast.Call):
            if (path := _self_path(node.func)) is not None:
                calls.add(path)
            elif _is_super_call(node.func, func.name):
                calls.add("super()")
        if isinstance(node, ast.AugAssign | ast.AnnAssign) and isinstance(node.target, ast.Name):
            assignment_count[node.target.id] = assignment_count.get(node.target.id, 0) + 1
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            value = node.value
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if (
                    isinstance(target, ast.Tuple)
                    and target.elts
                    and isinstance(first := target.elts[0], ast.Name)
                    and isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Name)
                ):
                    # `norm_cls, eps = select_norm_impl(config)`: a class one of the function's
                    # returns picks (the module's class_maps holds which)
                    local_refs.setdefault(first.id, f"{value.func.id}()")
                if isinstance(target, ast.Name) and isinstance(node, ast.Assign):
                    assignment_count[target.id] = assignment_count.get(target.id, 0) + 1
                    if isinstance(value, ast.Call) and (path := _self_path(value.func)):
                        from_self_call[target.id] = path
                    if isinstance(value, ast.Call) and (callee := _callee(value, local_refs)):
                        local_calls.setdefault(target.id, callee)
                    if dotted := _dotted(value):
                        local_refs.setdefault(target.id, dotted)
                attr = _self_target(target)
                if attr is None:
                    continue
                if isinstance(value, ast.Call) and (callee := _callee(value, local_refs)):
                    assigns.append([attr, callee, node.lineno])
                elif isinstance(value, ast.Name):
                    pending.append((attr, value.id, node.lineno))
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
            if callee := _callee(node.value, local_refs):
                returns.append(callee)
            if _is_super_call(node.value.func, func.name):
                returned_names.append("self.super()()")
            if (path := _self_path(node.value.func)) is not None:
                returned_names.append(f"self.{path}()")
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Name):
            returned_names.append(node.value.id)
            if node.value.id == "self":
                returned_self.append("")
        elif (
            isinstance(node, ast.Return)
            and node.value is not None
            and (path := _self_path(node.value)) is not None
        ):
            returned_self.append(path)
    assigns += [
        [attr, local_calls[name], line] for attr, name, line in pending if name in local_calls
    ]
    passthrough = [name[len("self.") : -2] for name in returned_names if name.startswith("self.")]
    passthrough += [
        from_self_call[name]
        for name in returned_names
        if name in from_self_call and assignment_count.get(name) == 1
    ]
    facts: dict[str, Any] = {
        "line": func.lineno,
        "assigns": assigns,
        "returns": returns,
        "passthrough": sorted(set(passthrough)),
        "returned_self": sorted(set(returned_self)),
        "calls": sorted(calls),
    }
    if any(aux.values()):
        facts["aux"] = {key: sorted(set(lines)) for key, lines in aux.items()}
    if pins := _pins(func, arch_keywords, arch_lists):
        facts["pins"] = pins
    if func.name == "forward":
        # The decoder loop's shape (bot/tree/decoder_loop.py), cached with the file's facts.
        if fors and (shape := forward_shape(func, fors)) is not None:
            facts["shape"] = shape
        elif (delegated := delegation(func, fors)) is not None:
            facts["delegation"] = delegated  # a nested decoder: the loop is in a child module
        facts["layer_returns"] = layer_returns(func, return_nodes, _loads(names))
    elif func.name.startswith("_") and not func.name.startswith("__"):
        # A private helper a layer's forward may return through (`return self._post(...)`).
        facts["layer_returns"] = layer_returns(func, return_nodes, _loads(names))
    elif func.name == "__init__":
        helpers = {s.name: s for s in func.body if isinstance(s, ast.FunctionDef)}
        appended = _appended(call_nodes)
        facts["built_from"] = _built_from(self_assigns, local_refs, helpers, appended)
        if refusals := speculative_refusals(func, ifs):
            facts["refuses_speculative"] = refusals
    return facts


def _loads(names: list[ast.Name]) -> Counter[str]:
    return Counter(n.id for n in names if type(n.ctx) is ast.Load)


def _architectures_keyword(call: ast.Call) -> list[list[Any]]:
    return [
        [call.lineno, call.end_lineno or call.lineno, k.value.id]
        for k in call.keywords
        if k.arg == "architectures" and isinstance(k.value, ast.Name)
    ]


def _architectures_list(node: ast.Assign) -> list[list[Any]]:
    """``[None, names]`` for ``<x>.text_config.architectures = [...]``, ``[name, names]`` for
    ``<name> = [...]`` (the string elements, when there are any)."""
    if len(node.targets) != 1:
        return []
    target = node.targets[0]
    assert isinstance(node.value, ast.List)
    values = [
        e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
    ]
    if not values:
        return []
    if (
        isinstance(target, ast.Attribute)
        and target.attr == "architectures"
        and isinstance(target.value, ast.Attribute)
        and target.value.attr == "text_config"
    ):
        return [[None, values]]
    return [[target.id, values]] if isinstance(target, ast.Name) else []


def _pins(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    keywords: list[list[Any]],
    lists: list[list[Any]],
) -> dict[str, Any] | None:
    """Where a method may pin the architectures of a model it builds (a wrapper's language
    model, :func:`bot.recipes.wrapper_analysis.pinned_language_models`): its ``architectures=
    <name>`` keywords and the lists assigned to ``<x>.text_config.architectures`` or to a name a
    keyword passes, in walk order; None when it has none (or is ``async``)."""
    if isinstance(func, ast.AsyncFunctionDef):
        return None
    passed = {name for _, _, name in keywords}
    lists = [entry for entry in lists if entry[0] is None or entry[0] in passed]
    if not (keywords or lists):
        return None
    return {"end_line": func.end_lineno or func.lineno, "keywords": keywords, "lists": lists}


def _built_from(
    assigns: list[ast.Assign],
    refs: dict[str, str],
    helpers: dict[str, ast.FunctionDef],
    appended: dict[str, set[str]],
) -> dict[str, list[str]]:
    """``self.<attr>`` -> the class-like names its assigned call calls (tuple targets too),
    and those appended to a local list it is built from (``self.layers =
    nn.ModuleList(layers)`` after ``layers.append(Layer(...))``, Zamba2)."""
    found: dict[str, list[str]] = {}
    for node in assigns:
        for target in node.targets:
            for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                attr = _self_target(element)
                names = set(built_from(node.value, refs, helpers)) if attr else set()
                for name in ast.walk(node.value) if appended else ():
                    if isinstance(name, ast.Name) and name.id in appended:
                        names |= appended[name.id]
                if attr is not None and names:
                    found[attr] = sorted(set(found.get(attr, [])) | names)
    return found


def _appended(calls: list[ast.Call]) -> dict[str, set[str]]:
    """Local name -> the class-like names called in what ``name.append(...)`` adds to it
    (``calls``: the method's calls)."""
    found: dict[str, set[str]] = {}
    for node in calls:
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "append"
            and isinstance(node.func.value, ast.Name)
            and len(node.args) == 1
            and (names := built_from(node.args[0]))
        ):
            found.setdefault(node.func.value.id, set()).update(names)
    return found
