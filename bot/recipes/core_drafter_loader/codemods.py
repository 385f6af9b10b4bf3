"""The codemods of fix class ``core-drafter-loader``, each with its cases.

- :func:`fallback_decoder_reads`: a loader reads the target's decoder the way the protocol's
  own default and dflash's loader do, ``getattr(lm, "model", lm)`` (the decoder, or the
  language model itself when it has no ``.model``), instead of ``lm.model`` or
  ``getattr(lm, "model", None)`` followed by ``if inner is None: raise``;
- :func:`embedding_by_holder`: a loader takes the target's input embedding from
  ``get_input_embedding(inner)`` instead of looking it up by name (the ``or`` of ``getattr``
  calls, one ``getattr``, or the ``hasattr`` chain of older releases);
- :func:`add_input_embedding_helper`: ``get_input_embedding`` itself, in
  ``vllm/model_executor/models/utils.py`` beside ``PPMissingLayer`` (every loader already
  imports that module): the names the loaders used first, so a target they served is served
  the same module, else the one ``VocabParallelEmbedding`` the module holds that is not an
  ``lm_head``.

Each refuses a form it does not know rather than guess; run again, each changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst
import libcst.matchers as m

from bot.codemods.base import Case, CodemodRefused, parse, require_identifier
from bot.codemods.imports import add_import_name

DECODER = "model"
HELPER = "get_input_embedding"
HELPER_MODULE = "vllm.model_executor.models.utils"
HELPER_PATH = "vllm/model_executor/models/utils.py"
EMBEDDING_MODULE = "vllm.model_executor.layers.vocab_parallel_embedding"
ANCHOR = "PPMissingLayer"  # the helper goes right after it, where the loaders import from

HELPER_SOURCE = f'''def {HELPER}(model: nn.Module) -> nn.Module | None:
    """The input embedding ``model`` holds: its ``embed_tokens`` or ``embedding``,
    else its only vocabulary embedding (e.g. ``word_embeddings`` or ``wte``)."""
    embed = getattr(model, "embed_tokens", None) or getattr(model, "embedding", None)
    if embed is not None:
        return embed
    found = [
        module
        for module in model.modules()
        if isinstance(module, VocabParallelEmbedding)
        and not isinstance(module, ParallelLMHead)
    ]
    return found[0] if len(found) == 1 else None
'''


# -- the decoder ------------------------------------------------------------------------------


def fallback_decoder_reads(
    source: str, functions: Sequence[str], language_models: Sequence[str]
) -> str:
    """In each function named in ``functions``, every read of a language model's decoder
    (``lm.model``; ``v = getattr(lm, "model", None)``, dropping an ``if v is None: raise``)
    becomes ``getattr(lm, "model", lm)``; a ``getattr`` with another default refuses."""
    for name in (*functions, *language_models):
        require_identifier(name, "name")
    tree = parse(source)
    changer = _DecoderReads(set(functions), set(language_models))
    new = tree.visit(changer)
    if changer.refused:
        raise CodemodRefused(changer.refused)
    return new.code


def _fallback(lm: str) -> cst.Call:
    return cst.Call(
        cst.Name("getattr"),
        [cst.Arg(cst.Name(lm)), cst.Arg(cst.SimpleString(f'"{DECODER}"')), cst.Arg(cst.Name(lm))],
    )


def _getattr_decoder(node: cst.BaseExpression, lms: set[str]) -> str | None:
    """The language model of ``getattr(<lm>, "model", <default>)``."""
    if (
        m.matches(node, m.Call(func=m.Name("getattr")))
        and isinstance(node, cst.Call)
        and len(node.args) == 3
        and isinstance(node.args[0].value, cst.Name)
        and node.args[0].value.value in lms
        and isinstance(node.args[1].value, cst.SimpleString)
        and node.args[1].value.evaluated_value == DECODER
    ):
        return node.args[0].value.value
    return None


class _InFunctions(cst.CSTTransformer):
    """Tracks whether the node being visited is inside one of the named functions."""

    def __init__(self, functions: set[str], lms: set[str]) -> None:
        self.functions = functions
        self.lms = lms
        self.depth = 0  # inside a named function
        self.refused = ""

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value in self.functions:
            self.depth += 1

    def leave_FunctionDef(
        self, original: cst.FunctionDef, updated: cst.FunctionDef
    ) -> cst.FunctionDef:
        if original.name.value in self.functions:
            self.depth -= 1
        return updated


class _DecoderReads(_InFunctions):
    def __init__(self, functions: set[str], lms: set[str]) -> None:
        super().__init__(functions, lms)
        self.unguarded: set[str] = set()  # names whose `is None: raise` goes with the read

    def leave_Attribute(
        self, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression:
        if (
            self.depth
            and updated.attr.value == DECODER
            and isinstance(updated.value, cst.Name)
            and updated.value.value in self.lms
        ):
            return _fallback(updated.value.value)
        return updated

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if not self.depth:
            return updated
        lm = _getattr_decoder(updated.value, self.lms)
        if lm is None:
            return updated
        call = updated.value
        assert isinstance(call, cst.Call)
        default = call.args[2].value
        if isinstance(default, cst.Name) and default.value == lm:
            return updated  # already the fallback
        if not m.matches(default, m.Name("None")):
            self.refused = "a decoder read with a default other than None or the model itself"
            return updated
        targets = [t.target for t in updated.targets]
        if len(targets) != 1 or not isinstance(targets[0], cst.Name):
            self.refused = "a decoder read assigned to more than one plain name"
            return updated
        self.unguarded.add(targets[0].value)
        return updated.with_changes(value=_fallback(lm))

    def leave_IndentedBlock(
        self, original: cst.IndentedBlock, updated: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        """Drop ``if <read> is None: raise ...`` after a read that can no longer be None."""
        if not self.unguarded or not self.depth:
            return updated
        kept = [s for s in updated.body if _none_guard(s) not in self.unguarded]
        if len(kept) == len(updated.body):
            return updated
        return updated.with_changes(body=kept)


def _none_guard(statement: cst.BaseStatement) -> str | None:
    """``v`` of ``if v is None: <...; raise ...>`` with no ``else``."""
    if not (
        isinstance(statement, cst.If)
        and statement.orelse is None
        and m.matches(
            statement.test,
            m.Comparison(
                left=m.Name(),
                comparisons=[m.ComparisonTarget(operator=m.Is(), comparator=m.Name("None"))],
            ),
        )
        and isinstance(statement.body, cst.IndentedBlock)
        and any(
            isinstance(line, cst.SimpleStatementLine)
            and any(isinstance(small, cst.Raise) for small in line.body)
            for line in statement.body.body
        )
    ):
        return None
    test = statement.test
    assert isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name)
    return test.left.value


# -- the embedding ----------------------------------------------------------------------------


def embedding_by_holder(
    source: str,
    functions: Sequence[str],
    language_models: Sequence[str],
    decoders: Sequence[str],
) -> str:
    """In each function named in ``functions``, the input embedding looked up by name on the
    decoder (a decoder name, or a read of a language model's decoder) becomes
    ``get_input_embedding(<decoder>)``, imported from ``vllm.model_executor.models.utils``."""
    for name in (*functions, *language_models, *decoders):
        require_identifier(name, "name")
    tree = parse(source)
    changer = _EmbeddingLookups(set(functions), set(language_models), set(decoders))
    new = tree.visit(changer)
    if changer.refused:
        raise CodemodRefused(changer.refused)
    if not changer.changed:
        return source
    return add_import_name(new.code, HELPER_MODULE, HELPER)


def _embed_name(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        if isinstance(value, str) and "embed" in value:
            return value
    return None


class _EmbeddingLookups(_InFunctions):
    def __init__(self, functions: set[str], lms: set[str], decoders: set[str]) -> None:
        super().__init__(functions, lms)
        self.decoders = decoders
        self.changed = False
        self.elifs: set[int] = set()  # an `elif` is an If in its parent's orelse

    def visit_If(self, node: cst.If) -> None:
        if isinstance(node.orelse, cst.If):
            self.elifs.add(id(node.orelse))

    def _on_decoder(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            return node.value in self.decoders
        if isinstance(node, cst.Attribute):
            return (
                node.attr.value == DECODER
                and isinstance(node.value, cst.Name)
                and node.value.value in self.lms
            )
        return _getattr_decoder(node, self.lms) is not None

    def _lookup(self, node: cst.BaseExpression, func: str) -> cst.BaseExpression | None:
        """The decoder expression of ``getattr(<decoder>, "<embed...>", None)`` (or
        ``hasattr(<decoder>, "<embed...>")`` for ``func="hasattr"``)."""
        if not (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value == func
            and len(node.args) >= 2
            and self._on_decoder(node.args[0].value)
            and _embed_name(node.args[1].value) is not None
        ):
            return None
        if func == "getattr" and (
            len(node.args) != 3 or not m.matches(node.args[2].value, m.Name("None"))
        ):
            return None
        return node.args[0].value

    def _helper_call(self, decoder: cst.BaseExpression) -> cst.Call:
        self.changed = True
        return cst.Call(cst.Name(HELPER), [cst.Arg(decoder)])

    def leave_BooleanOperation(
        self, original: cst.BooleanOperation, updated: cst.BooleanOperation
    ) -> cst.BaseExpression:
        if not self.depth or not isinstance(original.operator, cst.Or):
            return updated
        # The operands as written: a lookup among them was already replaced in ``updated``.
        decoders = [self._lookup(v, "getattr") for v in _or_operands(original)]
        if all(d is not None for d in decoders) and _same(decoders):
            assert decoders[0] is not None
            return self._helper_call(decoders[0])
        if any(d is not None for d in decoders):
            self.refused = "an embedding lookup mixed with something else in one `or`"
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not self.depth:
            return updated
        decoder = self._lookup(updated, "getattr")
        return updated if decoder is None else self._helper_call(decoder)

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.BaseStatement:
        """``if hasattr(d, "embed_tokens"): v = d.embed_tokens elif ...: ... [else: ...]``."""
        if not self.depth or id(original) in self.elifs:
            return updated  # an elif is rewritten with the `if` that opens its chain
        chain = self._hasattr_chain(updated)
        if chain is None:
            return updated
        decoder, target, orelse = chain
        assign = cst.SimpleStatementLine(
            [cst.Assign([cst.AssignTarget(cst.Name(target))], self._helper_call(decoder))]
        )
        if orelse is None:
            return assign
        guard = cst.If(
            test=cst.Comparison(
                cst.Name(target), [cst.ComparisonTarget(cst.Is(), cst.Name("None"))]
            ),
            body=orelse.body,
        )
        return cst.FlattenSentinel([assign, guard])

    def _hasattr_chain(
        self, node: cst.If
    ) -> tuple[cst.BaseExpression, str, cst.Else | None] | None:
        decoders: list[cst.BaseExpression] = []
        targets: set[str] = set()
        current: cst.If | cst.Else | None = node
        while isinstance(current, cst.If):
            decoder = self._lookup(current.test, "hasattr")
            target = _single_assign(current.body)
            if decoder is None or target is None:
                if decoders:
                    self.refused = "an embedding `hasattr` chain of another form"
                return None
            decoders.append(decoder)
            targets.add(target)
            current = current.orelse
        if len(targets) != 1 or not _same(decoders):
            self.refused = "an embedding `hasattr` chain assigning different names"
            return None
        return decoders[0], targets.pop(), current


def _or_operands(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.Or):
        return [*_or_operands(node.left), *_or_operands(node.right)]
    return [node]


def _same(nodes: Sequence[cst.BaseExpression | None]) -> bool:
    return len({cst.Module([]).code_for_node(n) for n in nodes if n is not None}) == 1


def _single_assign(body: cst.BaseSuite) -> str | None:
    """``v`` of a block that is exactly ``v = <decoder>.<embed...>``."""
    if not (isinstance(body, cst.IndentedBlock) and len(body.body) == 1):
        return None
    line = body.body[0]
    if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
        return None
    small = line.body[0]
    if not (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and isinstance(small.value, cst.Attribute)
        and "embed" in small.value.attr.value
    ):
        return None
    return small.targets[0].target.value


# -- the helper -------------------------------------------------------------------------------


def add_input_embedding_helper(source: str) -> str:
    """``get_input_embedding`` right after ``class PPMissingLayer`` (the end of the module
    when there is none), with ``ParallelLMHead`` and ``VocabParallelEmbedding`` imported.
    A module already defining it unchanged is left alone; defined otherwise, refused."""
    tree = parse(source)
    wanted = cst.parse_statement(HELPER_SOURCE)
    existing = [s for s in tree.body if isinstance(s, cst.FunctionDef) and s.name.value == HELPER]
    if existing:
        if not existing[0].with_changes(leading_lines=()).deep_equals(wanted):
            raise CodemodRefused(f"{HELPER} is already defined, differently: refusing")
        return source
    at = next(
        (
            index + 1
            for index, s in enumerate(tree.body)
            if isinstance(s, cst.ClassDef) and s.name.value == ANCHOR
        ),
        len(tree.body),
    )
    spaced = wanted.with_changes(
        leading_lines=[cst.EmptyLine(), cst.EmptyLine()] if at < len(tree.body) or at else []
    )
    body = list(tree.body)
    body.insert(at, spaced)
    if at < len(body) - 1:
        following = body[at + 1]
        body[at + 1] = following.with_changes(
            leading_lines=[cst.EmptyLine(), cst.EmptyLine(), *following.leading_lines[2:]]
            if len(following.leading_lines) >= 2
            else [cst.EmptyLine(), cst.EmptyLine()]
        )
    code = tree.with_changes(body=body).code
    for name in ("ParallelLMHead", "VocabParallelEmbedding"):
        code = add_import_name(code, EMBEDDING_MODULE, name)
    return code


# -- cases ------------------------------------------------------------------------------------


def _decoder_case(functions: Sequence[str], lms: Sequence[str]) -> Callable[[str], str]:
    return lambda source: fallback_decoder_reads(source, functions, lms)


def _embedding_case(
    functions: Sequence[str], lms: Sequence[str], decoders: Sequence[str]
) -> Callable[[str], str]:
    return lambda source: embedding_by_holder(source, functions, lms, decoders)


LOAD_EAGLE = """def load_eagle_model(target_model, vllm_config):
    target_language_model = (
        target_model.get_language_model()
        if hasattr(target_model, "get_language_model")
        else target_model
    )
    target_inner = target_language_model.model
    maybe_share_target_embed(target_inner)
    if hasattr(target_inner, "topk_indices_buffer"):
        return target_inner.topk_indices_buffer
"""
V1_PROPOSER = """class Proposer:
    def _maybe_share_embeddings(self, target_language_model):
        if get_pp_group().world_size == 1:
            inner_model = getattr(target_language_model, "model", None)
            if inner_model is None:
                raise AttributeError("Target model does not have 'model' attribute")
            if hasattr(inner_model, "embed_tokens"):
                target_embed_tokens = inner_model.embed_tokens
            elif hasattr(inner_model, "embedding"):
                target_embed_tokens = inner_model.embedding
            else:
                raise AttributeError(
                    "Target model does not have 'embed_tokens' or 'embedding' attribute"
                )
            self.share(target_embed_tokens)

    def _maybe_share_lm_head(self, target_language_model):
        if hasattr(target_language_model.model, "topk_indices_buffer"):
            self.buffer = target_language_model.model.topk_indices_buffer
"""
SHARE_EMBED = """from vllm.model_executor.models.utils import PPMissingLayer


def maybe_share_target_embed(draft_model, draft_inner, target_inner):
    target_embed = getattr(target_inner, "embed_tokens", None) or getattr(
        target_inner, "embedding", None
    )
    draft_embed = getattr(draft_inner, "embed_tokens", None)
    return target_embed, draft_embed
"""
GEMMA4 = """def _share_embeddings(self, draft_model, target_model):
    target_language_model = target_model.get_language_model()
    target_embed = getattr(target_language_model.model, "embed_tokens", None)
    return target_embed
"""
UTILS = """import torch.nn as nn

from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding


class PPMissingLayer(nn.Identity):
    pass


def is_pp_missing_parameter(name, model):
    return False
"""

CASES: list[Case] = [
    Case(
        "a strict `.model` read, and the same name read again, become the fallback",
        _decoder_case(["load_eagle_model"], ["target_language_model"]),
        LOAD_EAGLE,
        LOAD_EAGLE.replace(
            "target_language_model.model",
            'getattr(target_language_model, "model", target_language_model)',
        ),
    ),
    Case(
        "the V1 proposer: `getattr(..., None)` loses its None guard, the nested reads become "
        "the fallback, the hasattr chain is left to the embedding codemod",
        _decoder_case(
            ["_maybe_share_embeddings", "_maybe_share_lm_head"], ["target_language_model"]
        ),
        V1_PROPOSER,
        V1_PROPOSER.replace(
            """            inner_model = getattr(target_language_model, "model", None)
            if inner_model is None:
                raise AttributeError("Target model does not have 'model' attribute")
""",
            "            inner_model = "
            'getattr(target_language_model, "model", target_language_model)\n',
        ).replace(
            "target_language_model.model",
            'getattr(target_language_model, "model", target_language_model)',
        ),
    ),
    Case(
        "a function not named is left alone",
        _decoder_case(["load_dflash_model"], ["target_language_model"]),
        LOAD_EAGLE,
    ),
    Case(
        "dflash's fallback read is already what the codemod writes",
        _decoder_case(["load_dflash_model"], ["target_language_model"]),
        LOAD_EAGLE.replace("load_eagle_model", "load_dflash_model").replace(
            "target_language_model.model",
            'getattr(target_language_model, "model", target_language_model)',
        ),
    ),
    Case(
        "a decoder read with another default is refused",
        _decoder_case(["f"], ["lm"]),
        'def f(lm):\n    inner = getattr(lm, "model", lm.backbone)\n    return inner\n',
        refuses="a default other than None",
    ),
    Case(
        "the `or` of getattr lookups becomes the helper, imported beside PPMissingLayer",
        _embedding_case(["maybe_share_target_embed"], [], ["target_inner"]),
        SHARE_EMBED,
        SHARE_EMBED.replace(
            "import PPMissingLayer", "import PPMissingLayer, get_input_embedding"
        ).replace(
            """    target_embed = getattr(target_inner, "embed_tokens", None) or getattr(
        target_inner, "embedding", None
    )
""",
            "    target_embed = get_input_embedding(target_inner)\n",
        ),
    ),
    Case(
        "one getattr on a decoder read (gemma4's MTP loader)",
        _embedding_case(["_share_embeddings"], ["target_language_model"], []),
        GEMMA4,
        "from vllm.model_executor.models.utils import get_input_embedding\n\n\n"
        + GEMMA4.replace(
            'getattr(target_language_model.model, "embed_tokens", None)',
            "get_input_embedding(target_language_model.model)",
        ),
    ),
    Case(
        "the V1 proposer's hasattr chain becomes the helper and its else a None guard",
        _embedding_case(["_maybe_share_embeddings"], ["target_language_model"], ["inner_model"]),
        V1_PROPOSER,
        "from vllm.model_executor.models.utils import get_input_embedding\n\n\n"
        + V1_PROPOSER.replace(
            """            if hasattr(inner_model, "embed_tokens"):
                target_embed_tokens = inner_model.embed_tokens
            elif hasattr(inner_model, "embedding"):
                target_embed_tokens = inner_model.embedding
            else:
""",
            """            target_embed_tokens = get_input_embedding(inner_model)
            if target_embed_tokens is None:
""",
        ),
    ),
    Case(
        "a draft's own embedding (not the target's decoder) is left alone",
        _embedding_case(["maybe_share_target_embed"], [], ["target_inner"]),
        SHARE_EMBED.replace("target_inner, ", "other, ").replace(
            "(\n        target_inner,", "(\n        other,"
        ),
    ),
    Case(
        "a lookup mixed with another operand is refused",
        _embedding_case(["f"], [], ["inner"]),
        'def f(inner):\n    return getattr(inner, "embed_tokens", None) or inner.wte\n',
        refuses="mixed with something else",
    ),
    Case(
        "the helper goes right after PPMissingLayer, its two classes imported",
        add_input_embedding_helper,
        UTILS,
        UTILS.replace(
            "import VocabParallelEmbedding", "import ParallelLMHead, VocabParallelEmbedding"
        ).replace(
            "    pass\n\n\n",
            "    pass\n\n\n" + HELPER_SOURCE + "\n\n",
        ),
    ),
    Case(
        "a module defining another get_input_embedding is refused",
        add_input_embedding_helper,
        UTILS + "\n\ndef get_input_embedding(model):\n    return model.wte\n",
        refuses="already defined, differently",
    ),
]
