"""Codemod: a CPU test that runs an enabled decoder's target's patched forward.

Written the way the release's own aux-state tests are (Plamo3's in ``tests/model_executor/``,
added between 0.28.0 and 0.29.0, and ``tests/v1/worker/test_eagle3_aux_hidden_states_pp.py``):
a new ``tests/model_executor/test_<module>_eagle3.py`` holding one ``cpu_test`` with the real
decoder and target classes, built with ``__new__`` around stand-in layers whose effect on the
residual stream is known (each adds 1), the pipeline group monkeypatched to one rank. With no
aux layers set the output is the stream after the last layer, unchanged; with taps set, each
captured state is the stream entering that layer. Before the fix the target has no
``set_aux_hidden_state_layers``, so the test fails; a capture that drops or double-counts the
residual gives other values, so it fails too.
"""

from __future__ import annotations

import ast
from typing import Any

from bot.codemods.base import Case, CodemodRefused, require_dotted, require_identifier
from bot.codemods.regression_test import snake_case

AUX_TEST_DIR = "tests/model_executor"
LICENSE_HEADER = (
    "# SPDX-License-Identifier: Apache-2.0\n"
    "# SPDX-FileCopyrightText: Copyright contributors to the vLLM project\n"
    "\n"
)
LAYERS = 4
TAPS = (0, 1, 3)
# The layer stand-in for each residual semantics the enable analysis names.
_LAYERS: dict[str, str] = {
    "residual-stream": (
        "        def forward(self, positions, hidden_states, residual):\n"
        "            if residual is not None:\n"
        "                hidden_states = hidden_states + residual\n"
        "            return torch.ones_like(hidden_states), hidden_states\n"
    ),
    "full-stream-pair": (
        "        def forward(self, positions, hidden_states, residual):\n"
        "            return hidden_states + 1, torch.full_like(hidden_states, 100.0)\n"
    ),
    "no-residual": (
        "        def forward(self, positions, hidden_states):\n"
        "            return hidden_states + 1\n"
    ),
}
# An explicit-add decoder's layers hand back the same pair; the decoder sums it after the loop
# (`hidden_states = hidden_states + residual`), and AddNorm's one-argument call passes it on.
_LAYERS["explicit-add"] = _LAYERS["residual-stream"]
RESIDUAL_KINDS = tuple(_LAYERS)
# The final norm's stand-in. Given the residual, a residual-stream norm adds it (the stream is
# their sum); a full-stream-pair decoder's stream is the layer's first value alone, so its norm
# hands the residual back untouched (Cohere's norm classes: ``return hidden_states, residuals``).
_ADD_NORM = (
    "    class AddNorm(torch.nn.Module):\n"
    "        def forward(self, hidden_states, residual=None):\n"
    "            if residual is None:\n"
    "                return hidden_states\n"
    "            return hidden_states + residual, hidden_states + residual\n"
    "\n"
)
_KEEP_NORM = (
    "    class KeepResidualNorm(torch.nn.Module):\n"
    "        def forward(self, hidden_states, residual=None):\n"
    "            if residual is None:\n"
    "                return hidden_states\n"
    "            return hidden_states, residual\n"
    "\n"
)
_NORMS = {kind: _KEEP_NORM if kind == "full-stream-pair" else _ADD_NORM for kind in _LAYERS}
_NORM_CLASS = {
    kind: "KeepResidualNorm" if kind == "full-stream-pair" else "AddNorm" for kind in _LAYERS
}
# Names the test binds itself: a model module imported under one of them would be shadowed
# (``vllm/models/flint/model.py`` as ``model``, then ``model = model.FlintModel.__new__(...)``).
_TEST_NAMES = frozenset(
    {"model", "target", "output", "aux", "hidden", "tap", "taps", "inner", "group", "layer"}
    | {"per_layer"}
    | {"monkeypatch", "torch", "pytest", "SimpleNamespace"}
)


def aux_forward_test_name(class_name: str) -> str:
    return f"test_{snake_case(class_name)}_collects_aux_hidden_states"


def aux_forward_test(
    *,
    module: str,
    alias: str,
    decoder: str,
    target: str,
    residual: str,
    norm: str | None,
    scalars: tuple[str, ...] = (),
    config_scalars: tuple[str, ...] = (),
    config_defaults: tuple[str, ...] = (),
    forward_alias: str | None = None,
    child: str | None = None,
    pp_group: bool = True,
    layer_params: tuple[str, ...] = (),
    layer_flags: tuple[str, ...] = (),
    per_layer_inputs: tuple[str, ...] = (),
    per_layer_params: tuple[str, ...] = (),
    hands_back_none: bool = False,
    decoder_attr: str = "model",
    layers_attr: str = "layers",
) -> str:
    """The test function's source (identifiers only come in; each is checked).

    ``decoder_attr`` / ``layers_attr``: where the target keeps its decoder and the decoder its
    layers (``self.transformer``, ``self.h``), when the target's own two methods reach them.

    ``layer_flags``: the layer attributes the decoder's loop branches on (DeciLM's
    ``if not layer._is_no_op_attention:``, the same call in both branches): False on the first
    half of the stand-in layers, True on the second, so a tap comes out of each branch.

    ``pp_group``: whether the module binds ``get_pp_group`` (monkeypatched to one rank).
    ``layer_params``: the stand-in layer's parameters where the decoder's layer call does not
    fit the usual ``(positions, hidden_states[, residual])`` (Zamba2 passes
    ``original_hidden_states`` and ``positions`` by keyword after the stream; Param2MoE passes
    ``hidden_states, positions, residual``): the call's own names, which must include the ones
    the stand-in's body uses.

    ``norm``: the decoder's final norm attribute; None where the target applies the norm
    (Step-3.5), so the decoder returns the stream as the last layer leaves it.

    ``child``: a nested decoder's child class (Plamo3Decoder), built around the stand-in
    layers and set as the decoder's ``layers``.

    ``scalars`` / ``config_scalars``: ``self.<x>`` / ``self.config.<x>`` the forward multiplies
    the stream by (FalconH1's ``embedding_multiplier``, HyperCLOVAX's muP one): set to 1.0.
    ``config_defaults``: ``self.config.<x>`` the forward reads with
    ``getattr(self.config, "x", <constant>)`` (AXK1's ``llama_4_scaling``): left off the
    stand-in config, so the forward takes its default.
    ``forward_alias``: the module the decoder's ``forward`` is defined in when the decoder
    inherits it from another module's class (its ``get_pp_group`` is the one forward calls).

    ``per_layer_inputs``: the decoder's own methods whose result the loop slices per layer
    (``x[:, i, :]``) and hands each layer (Gemma 4's ``project_per_layer_inputs``), set on the
    instance to return zeros of shape ``(tokens, layers, hidden)``; ``per_layer_params``: the
    layer parameters that receive the slice, which each stand-in layer adds to the stream (the
    whole tensor, or a slice along another axis, does not fit the stream and fails the test).
    ``hands_back_none``: every layer returns ``(hidden_states, None)`` (full-stream-pair
    decoders whose capture passes the residual by name), and so do the stand-ins."""
    pp_alias = forward_alias or alias
    for name in (*scalars, *config_scalars, *config_defaults):
        require_identifier(name, "scalar attribute")
    require_dotted(module, "module")
    for value, what in (
        (alias, "module alias"),
        (pp_alias, "forward's module alias"),
        (decoder, "decoder class"),
        (target, "target class"),
        (decoder_attr, "decoder attribute"),
        (layers_attr, "layers attribute"),
        *([(norm, "norm attribute")] if norm is not None else []),
        *([(child, "child class")] if child is not None else []),
    ):
        require_identifier(value, what)
    if residual not in _LAYERS:
        raise CodemodRefused(f"no stand-in layer for residual semantics {residual!r}")
    if norm is None and residual not in ("no-residual", "explicit-add"):
        # the stream would leave the decoder without its residual: not what the test expects
        # (an explicit-add decoder sums it before returning, norm or not)
        raise CodemodRefused("no stand-in for a decoder without a final norm that keeps a residual")
    for name in layer_params:
        require_identifier(name, "layer parameter")
    for name in layer_flags:
        require_identifier(name, "layer flag")
    for name in per_layer_inputs:
        require_identifier(name, "per-layer input method")
    if set(per_layer_params) - set(layer_params) or bool(per_layer_params) != bool(
        per_layer_inputs
    ):
        raise CodemodRefused(
            "per-layer inputs need their methods and the layer parameters taking them"
        )
    if hands_back_none and residual != "full-stream-pair":
        raise CodemodRefused(f"no stand-in handing back None for {residual} decoders")
    if layer_flags and child is not None:
        raise CodemodRefused("no stand-in for a nested decoder whose loop branches on its layers")
    layer = _LAYERS[residual]
    if layer_params:
        needed = {"hidden_states"} | (set() if residual == "no-residual" else {"residual"})
        if not needed <= set(layer_params):
            raise CodemodRefused(
                f"stand-in parameters must name {' and '.join(sorted(needed))}, which its body uses"
            )
        body = layer.split("\n", 1)[1]  # the stand-in's body, under the call's own names
        layer = f"        def forward(self, {', '.join(layer_params)}):\n{body}"
    if hands_back_none:
        layer = layer.split("\n", 1)[0] + "\n            return hidden_states + 1, None\n"
    if per_layer_params:
        head, body = layer.split("\n", 1)
        adds = "            # zeros: only one layer's (tokens, hidden) slice fits\n" + "".join(
            f"            hidden_states = hidden_states + {name}\n" for name in per_layer_params
        )
        layer = f"{head}\n{adds}{body}"
    final = 7 + LAYERS
    return (
        "@pytest.mark.cpu_test\n"
        f'@pytest.mark.parametrize("taps", [(), {TAPS!r}])\n'
        f"def {aux_forward_test_name(target)}(monkeypatch, taps):\n"
        "    class StreamLayer(torch.nn.Module):\n"
        f"{layer}"
        "\n"
        + (_NORMS[residual] if norm is not None else "")
        + (
            "    group = SimpleNamespace(world_size=1, is_first_rank=True, is_last_rank=True)\n"
            f'    monkeypatch.setattr({pp_alias}, "get_pp_group", lambda: group)\n'
            if pp_group
            else ""
        )
        + f"    model = {alias}.{decoder}.__new__({alias}.{decoder})\n"
        "    torch.nn.Module.__init__(model)\n"
        + _layers(alias, child, layers_attr)
        + _flags(layer_flags)
        + _per_layer(per_layer_inputs)
        + (f"    model.{norm} = {_NORM_CLASS[residual]}()\n" if norm is not None else "")
        + "    model.do_not_compile = True\n"
        + "".join(f"    model.{name} = 1.0\n" for name in scalars)
        + (
            "".join(
                f"    # no config.{name}: forward takes its default\n" for name in config_defaults
            )
            + "    model.config = SimpleNamespace("
            + ", ".join(f"{name}=1.0" for name in config_scalars)
            + ")\n"
            if config_scalars or config_defaults
            else ""
        )
        + f"    target = {alias}.{target}.__new__({alias}.{target})\n"
        "    torch.nn.Module.__init__(target)\n"
        f"    target.{decoder_attr} = model\n"
        "    target.set_aux_hidden_state_layers(taps)\n"
        "\n"
        "    output = target(\n"
        "        input_ids=None,\n"
        "        positions=torch.arange(2),\n"
        "        inputs_embeds=torch.full((2, 8), 7.0),\n"
        "    )\n"
        "    if taps:\n"
        "        output, aux = output\n"
        "        for hidden, tap in zip(aux, taps, strict=True):\n"
        "            torch.testing.assert_close(hidden, torch.full((2, 8), 7.0 + tap))\n"
        f"    torch.testing.assert_close(output, torch.full((2, 8), {float(final)!r}))\n"
    )


def _layers(alias: str, child: str | None, layers_attr: str = "layers") -> str:
    """The stand-in layers on the decoder, or on a nested decoder's child set as its layers."""
    layers = f"torch.nn.ModuleList(StreamLayer() for _ in range({LAYERS}))"
    if child is None:
        return (
            f"    model.start_layer, model.end_layer = 0, {LAYERS}\n"
            f"    model.{layers_attr} = {layers}\n"
        )
    return (
        f"    inner = {alias}.{child}.__new__({alias}.{child})\n"
        "    torch.nn.Module.__init__(inner)\n"
        f"    inner.start_layer, inner.end_layer = 0, {LAYERS}\n"
        f"    inner.layers = {layers}\n"
        "    model.layers = inner\n"
    )


def _per_layer(methods: tuple[str, ...]) -> str:
    """The decoder's per-layer input methods on the instance: each returns zeros holding one
    ``(2, 8)`` slice per stand-in layer, whatever it is given."""
    if not methods:
        return ""
    return f"    per_layer = torch.zeros(2, {LAYERS}, 8)\n" + "".join(
        f"    model.{name} = lambda *args: per_layer\n" for name in methods
    )


def _flags(layer_flags: tuple[str, ...]) -> str:
    """Each flag False on the first half of the stand-in layers and True on the second: the
    taps after layer 0 and after layer 2 come out of different branches of the loop's ``if``
    (alternating flags would put both in one, and a capture in one branch only would pass)."""
    if not layer_flags:
        return ""
    half = LAYERS // 2
    return (
        "    for tap, layer in enumerate(model.layers):  # each branch of the loop's if runs\n"
        + "".join(f"        layer.{name} = tap >= {half}\n" for name in layer_flags)
    )


def module_alias(module: str) -> str:
    """The name the test imports ``module`` under: its last component, or, where the test binds
    that name itself, the last two joined (``vllm.models.flint.model`` as ``flint_model``)."""
    require_dotted(module, "module")
    parts = module.split(".")
    if parts[-1] not in _TEST_NAMES:
        return parts[-1]
    return "_".join(parts[-2:])


def aux_test_path(module: str) -> str:
    """Where the test goes: next to upstream's Plamo3 aux-layer test, one file per model
    module (``tests/model_executor`` is collected by a CI job, so the file is tethered)."""
    return f"{AUX_TEST_DIR}/test_{module_alias(module)}_eagle3.py"


def new_aux_test_file(
    *,
    module: str,
    decoder: str,
    target: str,
    residual: str,
    norm: str | None,
    scalars: tuple[str, ...] = (),
    config_scalars: tuple[str, ...] = (),
    config_defaults: tuple[str, ...] = (),
    child: str | None = None,
    pp_group: bool = True,
    layer_params: tuple[str, ...] = (),
    layer_flags: tuple[str, ...] = (),
    per_layer_inputs: tuple[str, ...] = (),
    per_layer_params: tuple[str, ...] = (),
    hands_back_none: bool = False,
    decoder_attr: str = "model",
    layers_attr: str = "layers",
) -> str:
    """The whole new test file: the release's license header, the imports, the test."""
    fields = {
        "decoder": decoder,
        "target": target,
        "residual": residual,
        "norm": norm,
        "scalars": scalars,
        "config_scalars": config_scalars,
        **({"config_defaults": config_defaults} if config_defaults else {}),
        "child": child,
        "pp_group": pp_group,
        "layer_params": layer_params,
        **({"layer_flags": layer_flags} if layer_flags else {}),
        **(
            {"per_layer_inputs": per_layer_inputs, "per_layer_params": per_layer_params}
            if per_layer_inputs
            else {}
        ),
        **({"hands_back_none": True} if hands_back_none else {}),
        **({"decoder_attr": decoder_attr} if decoder_attr != "model" else {}),
        **({"layers_attr": layers_attr} if layers_attr != "layers" else {}),
    }
    return new_shared_aux_test_file(module=module, tests=(fields,))


def new_shared_aux_test_file(*, module: str, tests: tuple[dict[str, Any], ...]) -> str:
    """One module's test file for targets fixed together (a decoder several targets share):
    one test per target of ``module``, each as :func:`aux_forward_test` writes it, the modules
    their forwards live in imported in one line."""
    require_dotted(module, "module")
    package, _, name = module.rpartition(".")
    if not package or not tests:
        raise CodemodRefused(f"no shared forward test for {module}")
    alias = module_alias(module)
    aliases = {alias}
    for fields in tests:
        forward = fields.get("forward_module")
        if forward is not None:
            require_dotted(forward, "forward's module")
            forward_package, _, forward_alias = forward.rpartition(".")
            if forward_package != package:
                raise CodemodRefused(f"{forward} is not in {package}")
            aliases.add(forward_alias)
    functions = [
        aux_forward_test(
            module=module,
            alias=alias,
            forward_alias=_alias_of(fields.get("forward_module")),
            **{k: v for k, v in fields.items() if k not in ("module", "forward_module")},
        )
        for fields in sorted(tests, key=lambda f: str(f.get("target")))
    ]
    # SimpleNamespace is used at all: a pipeline group patched, or config scalars set.
    namespace = any(
        f.get("pp_group", True) or f.get("config_scalars") or f.get("config_defaults")
        for f in tests
    )
    return (
        f"{LICENSE_HEADER}"
        + ("from types import SimpleNamespace\n\n" if namespace else "")
        + "import pytest\n"
        "import torch\n"
        "\n" + _import_line(package, name, alias, aliases) + "\n\n" + "\n\n".join(functions)
    )


def _import_line(package: str, name: str, alias: str, aliases: set[str]) -> str:
    if alias == name:
        return f"from {package} import {', '.join(sorted(aliases))}\n"
    if aliases != {alias}:
        raise CodemodRefused(f"{package}.{name} shares a test file with another module")
    return f"from {package} import {name} as {alias}\n"


def _alias_of(module: str | None) -> str | None:
    return module.rpartition(".")[2] if module else None


def create_shared_aux_forward_test(
    source: str, *, module: str, tests: tuple[dict[str, Any], ...]
) -> str:
    """:func:`create_aux_forward_test` for :func:`new_shared_aux_test_file`."""
    return created_file(source, new_shared_aux_test_file(module=module, tests=tests))


def create_aux_forward_test(source: str, **fields: Any) -> str:
    """The codemod for a file that does not exist yet (``source`` is empty): its text
    (:func:`new_aux_test_file`'s). Run again on its own output, nothing changes."""
    return created_file(source, new_aux_test_file(**fields))


def created_file(source: str, text: str) -> str:
    """``text`` for a file not there yet; ``source`` unchanged when it already is ``text``."""
    if source and ast.dump(ast.parse(source)) == ast.dump(ast.parse(text)):
        return source
    if source:
        raise CodemodRefused("the test file already exists; not overwriting it")
    return text


_MIXTRAL = dict(
    module="vllm.model_executor.models.mixtral",
    decoder="MixtralModel",
    target="MixtralForCausalLM",
    residual="residual-stream",
    norm="norm",
)

# The standard pair's file written out: what the cases compare the codemod's output with, so a
# change of the generator shows in a case. Each other shape below is this text with its own
# differences spelled out (the expected values checked by hand: taps 0, 1, 3 see the stream
# entering that layer, 7 + tap; the output is 7 + 4 layers).
_MIXTRAL_FILE = """\
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project

from types import SimpleNamespace

import pytest
import torch

from vllm.model_executor.models import mixtral


@pytest.mark.cpu_test
@pytest.mark.parametrize("taps", [(), (0, 1, 3)])
def test_mixtral_for_causal_lm_collects_aux_hidden_states(monkeypatch, taps):
    class StreamLayer(torch.nn.Module):
        def forward(self, positions, hidden_states, residual):
            if residual is not None:
                hidden_states = hidden_states + residual
            return torch.ones_like(hidden_states), hidden_states

    class AddNorm(torch.nn.Module):
        def forward(self, hidden_states, residual=None):
            if residual is None:
                return hidden_states
            return hidden_states + residual, hidden_states + residual

    group = SimpleNamespace(world_size=1, is_first_rank=True, is_last_rank=True)
    monkeypatch.setattr(mixtral, "get_pp_group", lambda: group)
    model = mixtral.MixtralModel.__new__(mixtral.MixtralModel)
    torch.nn.Module.__init__(model)
    model.start_layer, model.end_layer = 0, 4
    model.layers = torch.nn.ModuleList(StreamLayer() for _ in range(4))
    model.norm = AddNorm()
    model.do_not_compile = True
    target = mixtral.MixtralForCausalLM.__new__(mixtral.MixtralForCausalLM)
    torch.nn.Module.__init__(target)
    target.model = model
    target.set_aux_hidden_state_layers(taps)

    output = target(
        input_ids=None,
        positions=torch.arange(2),
        inputs_embeds=torch.full((2, 8), 7.0),
    )
    if taps:
        output, aux = output
        for hidden, tap in zip(aux, taps, strict=True):
            torch.testing.assert_close(hidden, torch.full((2, 8), 7.0 + tap))
    torch.testing.assert_close(output, torch.full((2, 8), 11.0))
"""
_PAIR_SIGNATURE = "        def forward(self, positions, hidden_states, residual):\n"
_PAIR_BODY = (
    "            if residual is not None:\n"
    "                hidden_states = hidden_states + residual\n"
    "            return torch.ones_like(hidden_states), hidden_states\n"
)
_ONE_BODY = "            return hidden_states + 1\n"
_ONE_RANK = (
    "    group = SimpleNamespace(world_size=1, is_first_rank=True, is_last_rank=True)\n"
    '    monkeypatch.setattr(mixtral, "get_pp_group", lambda: group)\n'
)


def _without_norm(text: str) -> str:
    """The written-out file for a decoder without a final norm: no norm stand-in, none set."""
    head, rest = text.split("    class AddNorm(", 1)
    return head + rest.split("\n\n", 1)[1].replace("    model.norm = AddNorm()\n", "")


def _named(text: str, alias: str, test: str, decoder: str, target: str) -> str:
    """The written-out file for another module's classes (``alias``) and test name."""
    return (
        text.replace("test_mixtral_for_causal_lm_", f"test_{test}_")
        .replace("mixtral.MixtralModel", f"{alias}.{decoder}")
        .replace("mixtral.MixtralForCausalLM", f"{alias}.{target}")
        .replace("import mixtral\n", f"import {alias}\n")
        .replace("(mixtral, ", f"({alias}, ")
    )


_CREATED = _MIXTRAL_FILE


def _create(source: str) -> str:
    return create_aux_forward_test(source, **_MIXTRAL)


def _writes(description: str, fields: dict[str, Any], expected: str) -> Case:
    """A case: no file there, and the codemod writes ``expected`` for ``fields``."""
    return Case(description, lambda s: create_aux_forward_test(s, **fields), "", expected)


_TARGET_NORM = dict(
    module="vllm.model_executor.models.step3p5",
    decoder="Step3p5Model",
    target="Step3p5ForCausalLM",
    residual="no-residual",
    norm=None,
)

_STREAM_FIRST = dict(
    module="vllm.model_executor.models.param2moe",
    decoder="Param2MoEModel",
    target="Param2MoEForCausalLM",
    residual="residual-stream",
    norm="norm",
    layer_params=("hidden_states", "positions", "residual"),
)

_EXPLICIT_ADD = dict(
    module="vllm.model_executor.models.hy_v3",
    decoder="HYV3Model",
    target="HYV3ForCausalLM",
    residual="explicit-add",
    norm="norm",
    layer_params=("positions", "hidden_states", "residual", "idx"),
)

_CONFIG_DEFAULT = dict(
    module="vllm.model_executor.models.AXK1",
    decoder="AXK1Model",
    target="AXK1ForCausalLM",
    residual="residual-stream",
    norm="norm",
    config_defaults=("llama_4_scaling",),
    layer_params=("positions", "hidden_states", "residual", "llama_4_scaling"),
)

_NESTED = dict(
    module="vllm.model_executor.models.plamo3",
    decoder="Plamo3Model",
    target="Plamo3ForCausalLM",
    residual="residual-stream",
    norm="norm",
    child="Plamo3Decoder",
)

_EVERY_LAYER = dict(
    module="vllm.model_executor.models.zamba2",
    decoder="Zamba2Model",
    target="Zamba2ForCausalLM",
    residual="no-residual",
    norm="final_layernorm",
    pp_group=False,
    layer_params=("hidden_states", "original_hidden_states", "positions"),
)

_BRANCHED = dict(
    module="vllm.model_executor.models.nemotron_nas",
    decoder="DeciModel",
    target="DeciLMForCausalLM",
    residual="residual-stream",
    norm="norm",
    layer_flags=("_is_no_op_attention",),
)

_COHERE = dict(
    module="vllm.model_executor.models.cohere",
    decoder="CohereModel",
    target="CohereForCausalLM",
    residual="full-stream-pair",
    norm="norm",
)

# The other shapes' files, each the standard one with its differences.
_COHERE_FILE = (
    _named(_MIXTRAL_FILE, "cohere", "cohere_for_causal_lm", "CohereModel", "CohereForCausalLM")
    .replace(
        _PAIR_BODY, "            return hidden_states + 1, torch.full_like(hidden_states, 100.0)\n"
    )
    .replace("AddNorm()", "KeepResidualNorm()")
    .replace("    class AddNorm(", "    class KeepResidualNorm(")
    .replace(
        "            return hidden_states + residual, hidden_states + residual\n",
        "            return hidden_states, residual\n",
    )
)
_HYV3_FILE = _named(
    _MIXTRAL_FILE, "hy_v3", "hyv3_for_causal_lm", "HYV3Model", "HYV3ForCausalLM"
).replace(_PAIR_SIGNATURE, "        def forward(self, positions, hidden_states, residual, idx):\n")
_HYV3_WITHOUT_NORM_FILE = _without_norm(_HYV3_FILE)
_STEP3P5_FILE = _without_norm(
    _named(_MIXTRAL_FILE, "step3p5", "step3p5_for_causal_lm", "Step3p5Model", "Step3p5ForCausalLM")
).replace(
    _PAIR_SIGNATURE + _PAIR_BODY,
    "        def forward(self, positions, hidden_states):\n" + _ONE_BODY,
)
_ZAMBA2_FILE = (
    _named(
        _MIXTRAL_FILE.replace(_ONE_RANK, "").replace("from types import SimpleNamespace\n\n", ""),
        "zamba2",
        "zamba2_for_causal_lm",
        "Zamba2Model",
        "Zamba2ForCausalLM",
    )
    .replace(
        _PAIR_SIGNATURE + _PAIR_BODY,
        "        def forward(self, hidden_states, original_hidden_states, positions):\n"
        + _ONE_BODY,
    )
    .replace("    model.norm = AddNorm()\n", "    model.final_layernorm = AddNorm()\n")
)
_PARAM2MOE_FILE = _named(
    _MIXTRAL_FILE,
    "param2moe",
    "param2_mo_e_for_causal_lm",
    "Param2MoEModel",
    "Param2MoEForCausalLM",
).replace(_PAIR_SIGNATURE, "        def forward(self, hidden_states, positions, residual):\n")
_PLAMO3_FILE = _named(
    _MIXTRAL_FILE, "plamo3", "plamo3_for_causal_lm", "Plamo3Model", "Plamo3ForCausalLM"
).replace(
    "    model.start_layer, model.end_layer = 0, 4\n"
    "    model.layers = torch.nn.ModuleList(StreamLayer() for _ in range(4))\n",
    "    inner = plamo3.Plamo3Decoder.__new__(plamo3.Plamo3Decoder)\n"
    "    torch.nn.Module.__init__(inner)\n"
    "    inner.start_layer, inner.end_layer = 0, 4\n"
    "    inner.layers = torch.nn.ModuleList(StreamLayer() for _ in range(4))\n"
    "    model.layers = inner\n",
)
_AXK1_FILE = (
    _named(_MIXTRAL_FILE, "AXK1", "axk1_for_causal_lm", "AXK1Model", "AXK1ForCausalLM")
    .replace(
        _PAIR_SIGNATURE,
        "        def forward(self, positions, hidden_states, residual, llama_4_scaling):\n",
    )
    .replace(
        "    model.do_not_compile = True\n",
        "    model.do_not_compile = True\n"
        "    # no config.llama_4_scaling: forward takes its default\n"
        "    model.config = SimpleNamespace()\n",
    )
)

_DECILM_FILE = _named(
    _MIXTRAL_FILE, "nemotron_nas", "deci_lm_for_causal_lm", "DeciModel", "DeciLMForCausalLM"
).replace(
    "    model.norm = AddNorm()\n",
    "    for tap, layer in enumerate(model.layers):  # each branch of the loop's if runs\n"
    "        layer._is_no_op_attention = tap >= 2\n"
    "    model.norm = AddNorm()\n",
)

_PER_LAYER = dict(
    module="vllm.model_executor.models.gemma4",
    decoder="Gemma4Model",
    target="Gemma4ForCausalLM",
    residual="full-stream-pair",
    norm="norm",
    layer_params=("positions", "hidden_states", "residual", "per_layer_input"),
    per_layer_inputs=("get_per_layer_inputs", "project_per_layer_inputs"),
    per_layer_params=("per_layer_input",),
    hands_back_none=True,
)
# Written out: the per-layer inputs' stand-ins and the layers handing back None, as a reviewer
# reads them.
_PER_LAYER_WRITTEN = (
    "# SPDX-License-Identifier: Apache-2.0\n"
    "# SPDX-FileCopyrightText: Copyright contributors to the vLLM project\n"
    "\n"
    "from types import SimpleNamespace\n"
    "\n"
    "import pytest\n"
    "import torch\n"
    "\n"
    "from vllm.model_executor.models import gemma4\n"
    "\n"
    "\n"
    "@pytest.mark.cpu_test\n"
    '@pytest.mark.parametrize("taps", [(), (0, 1, 3)])\n'
    "def test_gemma4_for_causal_lm_collects_aux_hidden_states(monkeypatch, taps):\n"
    "    class StreamLayer(torch.nn.Module):\n"
    "        def forward(self, positions, hidden_states, residual, per_layer_input):\n"
    "            # zeros: only one layer's (tokens, hidden) slice fits\n"
    "            hidden_states = hidden_states + per_layer_input\n"
    "            return hidden_states + 1, None\n"
    "\n"
    "    class KeepResidualNorm(torch.nn.Module):\n"
    "        def forward(self, hidden_states, residual=None):\n"
    "            if residual is None:\n"
    "                return hidden_states\n"
    "            return hidden_states, residual\n"
    "\n"
    "    group = SimpleNamespace(world_size=1, is_first_rank=True, is_last_rank=True)\n"
    '    monkeypatch.setattr(gemma4, "get_pp_group", lambda: group)\n'
    "    model = gemma4.Gemma4Model.__new__(gemma4.Gemma4Model)\n"
    "    torch.nn.Module.__init__(model)\n"
    "    model.start_layer, model.end_layer = 0, 4\n"
    "    model.layers = torch.nn.ModuleList(StreamLayer() for _ in range(4))\n"
    "    per_layer = torch.zeros(2, 4, 8)\n"
    "    model.get_per_layer_inputs = lambda *args: per_layer\n"
    "    model.project_per_layer_inputs = lambda *args: per_layer\n"
    "    model.norm = KeepResidualNorm()\n"
    "    model.do_not_compile = True\n"
    "    target = gemma4.Gemma4ForCausalLM.__new__(gemma4.Gemma4ForCausalLM)\n"
    "    torch.nn.Module.__init__(target)\n"
    "    target.model = model\n"
    "    target.set_aux_hidden_state_layers(taps)\n"
    "\n"
    "    output = target(\n"
    "        input_ids=None,\n"
    "        positions=torch.arange(2),\n"
    "        inputs_embeds=torch.full((2, 8), 7.0),\n"
    "    )\n"
    "    if taps:\n"
    "        output, aux = output\n"
    "        for hidden, tap in zip(aux, taps, strict=True):\n"
    "            torch.testing.assert_close(hidden, torch.full((2, 8), 7.0 + tap))\n"
    "    torch.testing.assert_close(output, torch.full((2, 8), 11.0))\n"
)

_NGRAM = "vllm.model_executor.models.longcat_flash_ngram"
_FLINT = "vllm.models.flint.model"  # its last name is a test local: imported as flint_model
_SHARED_TESTS: tuple[dict[str, Any], ...] = (
    {
        "module": _NGRAM,
        "decoder": "FlashNgramModel",
        "target": "LongcatFlashNgramForCausalLM",
        "residual": "residual-stream",
        "norm": "norm",
        "forward_module": "vllm.model_executor.models.longcat_flash",
    },
)
# The set's file: the decoder's module and the inherited forward's (whose get_pp_group is
# patched), one import line.
_SHARED_CREATED = _named(
    _MIXTRAL_FILE.replace(
        "import mixtral\n", "import longcat_flash, longcat_flash_ngram\n"
    ).replace("(mixtral, ", "(longcat_flash, "),
    "longcat_flash_ngram",
    "longcat_flash_ngram_for_causal_lm",
    "FlashNgramModel",
    "LongcatFlashNgramForCausalLM",
)


_FLINT_FILE = _named(
    _MIXTRAL_FILE, "flint_model", "flint_for_causal_lm", "FlintModel", "FlintForCausalLM"
).replace(
    "from vllm.model_executor.models import flint_model\n",
    "from vllm.models.flint import model as flint_model\n",
)


def _create_shared(source: str) -> str:
    return create_shared_aux_forward_test(source, module=_NGRAM, tests=_SHARED_TESTS)


CASES: list[Case] = [
    Case(
        "a set's file: the inherited forward's module imported and its get_pp_group patched",
        _create_shared,
        "",
        _SHARED_CREATED,
    ),
    Case("a set's file already written: no change", _create_shared, _SHARED_CREATED),
    Case("a set's file: another file there: refuse", _create_shared, "x = 1\n", refuses="exists"),
    Case(
        "a set's forward module in another package: refuse",
        lambda s: create_shared_aux_forward_test(
            s,
            module=_NGRAM,
            tests=({**_SHARED_TESTS[0], "forward_module": "vllm.other.longcat_flash"},),
        ),
        "",
        refuses="is not in vllm.model_executor.models",
    ),
    Case("a new file, the standard pair: header, imports, the test", _create, "", _CREATED),
    _writes(
        "a module named like a test local (model): imported under its package's name",
        {**_MIXTRAL, "module": _FLINT, "decoder": "FlintModel", "target": "FlintForCausalLM"},
        _FLINT_FILE,
    ),
    Case(
        "a set's module imported under an alias beside another module: refuse",
        lambda s: create_shared_aux_forward_test(
            s,
            module=_FLINT,
            tests=({**_SHARED_TESTS[0], "forward_module": "vllm.models.flint.base"},),
        ),
        "",
        refuses="shares a test file with another module",
    ),
    _writes(
        "a module without get_pp_group, layers called with their own parameters",
        _EVERY_LAYER,
        _ZAMBA2_FILE,
    ),
    _writes(
        "no final norm in the decoder (the target applies it): none set on the stand-in",
        _TARGET_NORM,
        _STEP3P5_FILE,
    ),
    _writes(
        "no final norm in an explicit-add decoder (it returns the sum): none set",
        {**_EXPLICIT_ADD, "norm": None},
        _HYV3_WITHOUT_NORM_FILE,
    ),
    Case(
        "no final norm, and a residual the decoder would drop: refuse",
        lambda s: create_aux_forward_test(s, **{**_TARGET_NORM, "residual": "residual-stream"}),
        "",
        refuses="without a final norm",
    ),
    _writes(
        "a layer called stream first: the stand-in takes the call's order",
        _STREAM_FIRST,
        _PARAM2MOE_FILE,
    ),
    Case(
        "stand-in parameters without the residual its body uses: refuse",
        lambda s: create_aux_forward_test(
            s, **{**_STREAM_FIRST, "layer_params": ("hidden_states", "positions")}
        ),
        "",
        refuses="must name hidden_states and residual",
    ),
    _writes("a nested decoder: the child holds the stand-in layers", _NESTED, _PLAMO3_FILE),
    _writes(
        "an explicit-add decoder: the pair's stand-in, the sum left to the decoder",
        _EXPLICIT_ADD,
        _HYV3_FILE,
    ),
    _writes(
        "a full-stream-pair decoder: the layer's first value is the stream, the norm keeps the "
        "residual out",
        _COHERE,
        _COHERE_FILE,
    ),
    Case(
        "an explicit-add decoder's test already written: no change",
        lambda s: create_aux_forward_test(s, **_EXPLICIT_ADD),
        _HYV3_FILE,
    ),
    _writes(
        "a config value read with a default: an empty stand-in config",
        _CONFIG_DEFAULT,
        _AXK1_FILE,
    ),
    _writes(
        "a loop branching on a layer flag: each half of the layers takes a branch",
        _BRANCHED,
        _DECILM_FILE,
    ),
    Case(
        "a layer flag's test already written: no change",
        lambda s: create_aux_forward_test(s, **_BRANCHED),
        _DECILM_FILE,
    ),
    Case(
        "a layer flag that is not a name: refuse",
        lambda s: create_aux_forward_test(s, **{**_BRANCHED, "layer_flags": ("x = 1;",)}),
        "",
        refuses="layer flag",
    ),
    Case(
        "a config default that is not a name: refuse",
        lambda s: create_aux_forward_test(
            s, **{**_CONFIG_DEFAULT, "config_defaults": ("llama_4_scaling=1;",)}
        ),
        "",
        refuses="scalar attribute",
    ),
    Case(
        "per-layer inputs sliced per layer, layers handing back None: the methods stand in, "
        "the stand-in layers add their slice",
        lambda s: create_aux_forward_test(s, **_PER_LAYER),
        "",
        _PER_LAYER_WRITTEN,
    ),
    Case(
        "per-layer inputs' test already written: no change",
        lambda s: create_aux_forward_test(s, **_PER_LAYER),
        _PER_LAYER_WRITTEN,
    ),
    Case(
        "a per-layer input no stand-in parameter takes: refuse",
        lambda s: create_aux_forward_test(
            s, **{**_PER_LAYER, "per_layer_params": ("per_layer_embeds",)}
        ),
        "",
        refuses="per-layer inputs need their methods",
    ),
    Case(
        "layers handing back None in a residual-stream decoder: refuse",
        lambda s: create_aux_forward_test(s, **{**_PER_LAYER, "residual": "residual-stream"}),
        "",
        refuses="no stand-in handing back None",
    ),
    Case(
        "a per-layer input method that is not a name: refuse",
        lambda s: create_aux_forward_test(s, **{**_PER_LAYER, "per_layer_inputs": ("x = 1;",)}),
        "",
        refuses="per-layer input method",
    ),
    Case("the new file already written: no change", _create, _CREATED),
    Case(
        "an unknown residual semantics: refuse",
        lambda s: create_aux_forward_test(
            s,
            module="vllm.model_executor.models.mixtral",
            decoder="MixtralModel",
            target="MixtralForCausalLM",
            residual="two-streams",
            norm="norm",
        ),
        "",
        refuses="no stand-in layer",
    ),
    Case(
        "another file there: refuse",
        _create,
        "import torch\n",
        refuses="already exists",
    ),
]
