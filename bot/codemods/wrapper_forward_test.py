"""Codemod: a CPU test that runs a multimodal wrapper plan's forwarding methods.

Written the way the release's own wrapper test is (``test_qwen3_omni_exposes_eagle3_to_its_
text_backbone`` in ``tests/model_executor/test_qwen3_omni.py``): the real wrapper class built
with ``__new__`` and ``nn.Module.__init__`` (no weights, no config), a small stand-in language
model set as ``self.<attribute>`` that records the layers it is given and answers its default
layers. A new ``tests/model_executor/test_<module>_eagle3.py`` (the directory a CI job collects,
where an enabled decoder's forward test goes), one ``cpu_test``:

- forwarding (the language model sets its aux layers itself): the wrapper's two protocol
  methods reach the stand-in;
- behind the tree's run-time guard: a stand-in without ``SupportsEagle3`` gets the guard's
  error and is never called; one with it is reached.

The module is imported in the test's body, as upstream's test does: a platform variant that
cannot be imported off its platform fails (or skips, with the tree's own ``test_registry_imports``
skip) that test alone. Before the fix the wrapper has neither method, so the test fails.
"""

from __future__ import annotations

import ast
from typing import Any

from bot.codemods.aux_forward_test import LICENSE_HEADER, aux_test_path, created_file
from bot.codemods.base import Case, CodemodRefused, require_dotted, require_identifier
from bot.codemods.delegate_methods import DEFAULT_LAYERS, SET_LAYERS
from bot.codemods.regression_test import snake_case

# What the tree's guards raise (the wrapper publish rule accepts the same ones).
GUARD_ERRORS = frozenset({"RuntimeError", "ValueError", "TypeError", "NotImplementedError"})
# The only name a platform skip taken from the tree's test_registry_imports may read.
_SKIP_NAMES = frozenset({"current_platform"})
_TAPS = (1, 3)
_DEFAULT = (2, 5)


def wrapper_test_name(class_name: str, guarded: bool) -> str:
    # short suffixes: the release's line length (88) holds the longest wrapper's name
    what = "guards_eagle3_layers" if guarded else "forwards_eagle3_layers"
    return f"test_{snake_case(class_name)}_{what}"


def wrapper_forward_test(
    *,
    module: str,
    wrapper: str,
    attribute: str,
    guard_error: str | None = None,
    skip: tuple[str, str] | None = None,
) -> str:
    """The test function's source. ``guard_error``: the error the tree's guard raises (the
    plan adds the guard); None for plain forwarding. ``skip``: the tree's
    ``test_registry_imports`` skip for the class (condition and reason, as source)."""
    require_dotted(module, "module")
    require_identifier(wrapper, "wrapper class")
    require_identifier(attribute, "language model attribute")
    if guard_error is not None and guard_error not in GUARD_ERRORS:
        raise CodemodRefused(f"the guard raises {guard_error!r}, not a plain error")
    package, _, alias = module.rpartition(".")
    if not package:
        raise CodemodRefused(f"{module} is not in a package")
    guarded = guard_error is not None
    lm = f"model.{attribute}"
    head = (
        (_skip_mark(skip) if skip else "")
        + "@pytest.mark.cpu_test\n"
        + f"def {wrapper_test_name(wrapper, guarded)}():\n"
        + f"    from {package} import {alias}\n"
        + (
            "    from vllm.model_executor.models.interfaces import SupportsEagle3\n"
            if guarded
            else ""
        )
        + "\n"
        "    class LanguageModel(torch.nn.Module):\n"
        "        aux_layers = None\n"
        "\n"
        f"        def {SET_LAYERS}(self, layers):\n"
        "            self.aux_layers = layers\n"
        "\n"
        f"        def {DEFAULT_LAYERS}(self):\n"
        f"            return {_DEFAULT!r}\n"
        "\n"
        + (
            "    class Eagle3LanguageModel(LanguageModel, SupportsEagle3):\n        pass\n\n"
            if guarded
            else ""
        )
        + f"    wrapper = {alias}.{wrapper}\n"
        "    model = wrapper.__new__(wrapper)\n"
        "    torch.nn.Module.__init__(model)\n"
    )
    if guarded:
        refused = (
            f"    {lm} = LanguageModel()\n"
            f"    with pytest.raises({guard_error}):\n"
            f"        model.{SET_LAYERS}({_TAPS!r})\n"
            f"    with pytest.raises({guard_error}):\n"
            f"        model.{DEFAULT_LAYERS}()\n"
            f"    assert {lm}.aux_layers is None\n"
            "\n"
        )
        capable = "Eagle3LanguageModel"
    else:
        refused, capable = "", "LanguageModel"
    return (
        head + refused + f"    {lm} = {capable}()\n"
        f"    model.{SET_LAYERS}({_TAPS!r})\n"
        f"    assert {lm}.aux_layers == {_TAPS!r}\n"
        f"    assert model.{DEFAULT_LAYERS}() == {_DEFAULT!r}\n"
    )


def _skip_mark(skip: tuple[str, str]) -> str:
    """``@pytest.mark.skipif(<condition>, reason=<reason>)``, the condition reading
    ``current_platform`` only and the reason one string literal (both come from the tree)."""
    condition, reason = skip
    try:
        test = ast.parse(condition, mode="eval")
        said = ast.parse(reason, mode="eval").body
    except SyntaxError:
        raise CodemodRefused("the platform skip does not parse") from None
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    calls_ok = all(
        isinstance(n.func, ast.Attribute) for n in ast.walk(test) if isinstance(n, ast.Call)
    )
    if not names <= _SKIP_NAMES or not calls_ok:
        raise CodemodRefused("the platform skip reads more than current_platform")
    if not (isinstance(said, ast.Constant) and isinstance(said.value, str)):
        raise CodemodRefused("the platform skip's reason is not one string")
    return f"@pytest.mark.skipif({condition}, reason={reason})\n"


def new_wrapper_test_file(**fields: Any) -> str:
    """The whole new file: the release's license header, the imports, the test."""
    skip = fields.get("skip")
    return (
        f"{LICENSE_HEADER}"
        "import pytest\n"
        "import torch\n"
        + ("\nfrom vllm.platforms import current_platform\n" if skip else "")
        + "\n\n"
        + wrapper_forward_test(**fields)
    )


def create_wrapper_forward_test(source: str, **fields: Any) -> str:
    """The codemod for a file that does not exist yet (``source`` is empty): its text.
    Run again on its own output, nothing changes; any other file there is refused."""
    return created_file(source, new_wrapper_test_file(**fields))


def wrapper_test_path(module: str) -> str:
    """The enabled decoders' forward test's place: one file per model module."""
    return aux_test_path(module)


_KIMI_VL = dict(
    module="vllm.model_executor.models.kimi_vl",
    wrapper="KimiVLForConditionalGeneration",
    attribute="language_model",
)
_LLAVA_NEXT = dict(
    module="vllm.model_executor.models.llava_next",
    wrapper="LlavaNextForConditionalGeneration",
    attribute="language_model",
    guard_error="RuntimeError",
)
_DOTS3 = dict(
    module="vllm.models.dots3_note.nvidia.multimodal",
    wrapper="Dots3NoteForCausalLM",
    attribute="language_model",
    skip=("not current_platform.is_cuda()", '"Dots3 NOTE is only supported on CUDA"'),
)


# The guarded case written out: what the cases compare the codemod's output with.
_LLAVA_NEXT_FILE = f"""{LICENSE_HEADER}import pytest
import torch


@pytest.mark.cpu_test
def test_llava_next_for_conditional_generation_guards_eagle3_layers():
    from vllm.model_executor.models import llava_next
    from vllm.model_executor.models.interfaces import SupportsEagle3

    class LanguageModel(torch.nn.Module):
        aux_layers = None

        def set_aux_hidden_state_layers(self, layers):
            self.aux_layers = layers

        def get_eagle3_default_aux_hidden_state_layers(self):
            return (2, 5)

    class Eagle3LanguageModel(LanguageModel, SupportsEagle3):
        pass

    wrapper = llava_next.LlavaNextForConditionalGeneration
    model = wrapper.__new__(wrapper)
    torch.nn.Module.__init__(model)
    model.language_model = LanguageModel()
    with pytest.raises(RuntimeError):
        model.set_aux_hidden_state_layers((1, 3))
    with pytest.raises(RuntimeError):
        model.get_eagle3_default_aux_hidden_state_layers()
    assert model.language_model.aux_layers is None

    model.language_model = Eagle3LanguageModel()
    model.set_aux_hidden_state_layers((1, 3))
    assert model.language_model.aux_layers == (1, 3)
    assert model.get_eagle3_default_aux_hidden_state_layers() == (2, 5)
"""

# Plain forwarding: no guard, no refused stand-in; the one stand-in is reached.
_KIMI_VL_FILE = (
    _LLAVA_NEXT_FILE.replace(
        "llava_next_for_conditional_generation_guards_eagle3_layers",
        "kimi_vl_for_conditional_generation_forwards_eagle3_layers",
    )
    .replace("llava_next.LlavaNext", "kimi_vl.KimiVL")
    .replace("import llava_next", "import kimi_vl")
    .replace("    from vllm.model_executor.models.interfaces import SupportsEagle3\n", "")
    .replace("    class Eagle3LanguageModel(LanguageModel, SupportsEagle3):\n        pass\n\n", "")
    .replace(
        "    model.language_model = LanguageModel()\n"
        "    with pytest.raises(RuntimeError):\n"
        "        model.set_aux_hidden_state_layers((1, 3))\n"
        "    with pytest.raises(RuntimeError):\n"
        "        model.get_eagle3_default_aux_hidden_state_layers()\n"
        "    assert model.language_model.aux_layers is None\n\n"
        "    model.language_model = Eagle3LanguageModel()\n",
        "    model.language_model = LanguageModel()\n",
    )
)


_DOTS3_FILE = (
    _KIMI_VL_FILE.replace(
        "import torch\n", "import torch\n\nfrom vllm.platforms import current_platform\n"
    )
    .replace(
        "@pytest.mark.cpu_test\n",
        '@pytest.mark.skipif(not current_platform.is_cuda(), reason="Dots3 NOTE is only supported '
        'on CUDA")\n@pytest.mark.cpu_test\n',
    )
    .replace("kimi_vl_for_conditional_generation", "dots3_note_for_causal_lm")
    .replace(
        "from vllm.model_executor.models import kimi_vl",
        "from vllm.models.dots3_note.nvidia import multimodal",
    )
    .replace("kimi_vl.KimiVLForConditionalGeneration", "multimodal.Dots3NoteForCausalLM")
)


def _create(fields: dict[str, Any]):  # noqa: ANN202 (a case's callable)
    return lambda source: create_wrapper_forward_test(source, **fields)


CASES: list[Case] = [
    Case("forwarding: a new file", _create(_KIMI_VL), "", _KIMI_VL_FILE),
    Case(
        "behind the guard: the guard's error for a text model without the interface",
        _create(_LLAVA_NEXT),
        "",
        _LLAVA_NEXT_FILE,
    ),
    Case(
        "another attribute holds the language model",
        _create({**_LLAVA_NEXT, "attribute": "llm"}),
        "",
        _LLAVA_NEXT_FILE.replace("model.language_model", "model.llm"),
    ),
    Case(
        "a platform variant keeps the tree's skip",
        _create(_DOTS3),
        "",
        _DOTS3_FILE,
    ),
    Case(
        "the file already written: no change",
        _create(_LLAVA_NEXT),
        _LLAVA_NEXT_FILE,
    ),
    Case(
        "another file there: refuse", _create(_KIMI_VL), "import torch\n", refuses="already exists"
    ),
    Case(
        "a guard raising something else: refuse",
        _create({**_LLAVA_NEXT, "guard_error": "SystemExit"}),
        "",
        refuses="not a plain error",
    ),
    Case(
        "a skip reading another name: refuse",
        _create({**_DOTS3, "skip": ("__import__('os').system('x')", '"x"')}),
        "",
        refuses="more than current_platform",
    ),
    Case(
        "hostile attribute: refuse",
        _create({**_KIMI_VL, "attribute": "x; import os"}),
        "",
        refuses="not a Python identifier",
    ),
]
