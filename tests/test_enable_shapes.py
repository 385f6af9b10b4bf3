"""eagle3-enable's named decoder shapes and refusals, each on a small synthetic tree.

Every shape the analysis names is one case here (loop kind, residual kind), and so is every
refusal the issue lists; a refused shape yields a finding that says "needs a human" and a plan
that is not ready, never a patch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.drafts import load_catalogue
from bot.recipes import Declined, Finding, FixPlan, PlanContext, fixer_named
from bot.recipes.eagle3_enable.analysis import DecoderShape, decoder_shape
from bot.recipes.eagle3_enable.detection import candidates
from bot.recipes.eagle3_enable.recipe import _edits
from bot.scan.findings import scan, scan_context
from tests.synthetic import dedent, make_tree

TEXT = "_TEXT_GENERATION_MODELS"
HEADER = """
from itertools import islice

import torch
from torch import nn

from .interfaces import SupportsPP
"""

LAYER_PAIR = """
class Layer(nn.Module):
    def forward(self, positions, hidden_states, residual):
        if residual is None:
            residual = hidden_states
        hidden_states = self.mlp(hidden_states)
        return hidden_states, residual
"""

LAYER_SUMMED_PAIR = """
class Layer(nn.Module):
    def forward(self, positions, hidden_states, residual):
        residual = hidden_states
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states, residual
"""

LAYER_ONE = """
class Layer(nn.Module):
    def forward(self, positions, hidden_states):
        return hidden_states + self.mlp(hidden_states)
"""

TARGET = """
class DemoForCausalLM(nn.Module, SupportsPP):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = DemoModel(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions, intermediate_tensors=None):
        return self.model(input_ids, positions, intermediate_tensors)
"""


def decoder(loop: str, tail: str, init_residual: bool = True) -> str:
    residual = "        residual = None\n" if init_residual else ""
    return (
        "class DemoModel(nn.Module):\n"
        "    def __init__(self, *, vllm_config, prefix=''):\n"
        "        super().__init__()\n"
        "        self.start_layer, self.end_layer, self.layers = make_layers(\n"
        "            4, lambda prefix: Layer(prefix=prefix), prefix=prefix\n"
        "        )\n"
        "        self.norm = RMSNorm(8)\n\n"
        "    def forward(self, input_ids, positions, intermediate_tensors=None):\n"
        "        hidden_states = self.embed_tokens(input_ids)\n"
        f"{residual}"
        f"{loop}"
        "        if not get_pp_group().is_last_rank:\n"
        "            return IntermediateTensors({'hidden_states': hidden_states})\n"
        f"{tail}"
        "        return hidden_states\n"
    )


PAIR_CALL = "            hidden_states, residual = layer(positions, hidden_states, residual)\n"
ONE_CALL = "            hidden_states = layer(positions, hidden_states)\n"
SLICE = "        for layer in self.layers[self.start_layer : self.end_layer]:\n"
ISLICE = "        for layer in islice(self.layers, self.start_layer, self.end_layer):\n"
ENUMERATE = (
    "        for i, layer in enumerate(islice(self.layers, self.start_layer, self.end_layer)):\n"
)
RANGE = (
    "        for i in range(self.start_layer, self.end_layer):\n"
    "            layer = self.layers[i]\n"
)
FUSED_NORM = "        hidden_states, _ = self.norm(hidden_states, residual)\n"
PLAIN_NORM = "        hidden_states = self.norm(hidden_states)\n"
EXPLICIT_ADD_ONLY = "        hidden_states = hidden_states + residual\n"
EXPLICIT_ADD = EXPLICIT_ADD_ONLY + PLAIN_NORM

# Cohere's shape: each layer rebinds the residual it is given before reading it, and the final
# norm takes the residual but hands it back unused.
PASS_NORM = """

class PassNorm(nn.Module):
    def forward(self, hidden_states, residuals=None):
        hidden_states = hidden_states * self.weight
        return hidden_states, residuals
"""
ADDING_NORM = PASS_NORM.replace("hidden_states * self.weight", "hidden_states + residuals")


# Cohere 0.34.0: the norm class comes from a module-level factory returning one of two classes.
NORM_FACTORY = """

def select_norm(config):
    if config.rms:
        return PassNorm, 1e-6
    return OtherNorm, 1e-5
"""


def _with_factory_norm(source: str) -> str:
    return source.replace(
        "        self.norm = RMSNorm(8)\n",
        "        norm_cls, eps = select_norm(vllm_config)\n        self.norm = norm_cls(8)\n",
    )


def _with_norm(source: str, norm_class: str) -> str:
    return source.replace("self.norm = RMSNorm(8)", f"self.norm = {norm_class}(8)")


# After-loop shapes read on 0.34.0 (BailingMoe, BailingMoeV3, Param2MoE, Flint, HYV3,
# Step-3.5): each is the standard capture written differently.
OPTIONAL_NORM = (
    "        if residual is None:\n"
    "            hidden_states = self.norm(hidden_states)\n"
    "        else:\n"
    "            hidden_states, _ = self.norm(hidden_states, residual)\n"
)
OPTIONAL_NORM_NOT_NONE = (
    "        if residual is not None:\n"
    "            hidden_states, _ = self.norm(hidden_states, residual)\n"
    "        else:\n"
    "            hidden_states = self.norm(hidden_states)\n"
)
ADD_THEN_REBIND = (
    "        hidden_states = hidden_states + residual\n"
    "        residual = hidden_states\n"
    "\n"
    "        hidden_states = self.norm(hidden_states)\n"
)
PP_EXIT = (
    "        if not get_pp_group().is_last_rank:\n"
    "            return IntermediateTensors({'hidden_states': hidden_states})\n"
)
# The pipeline exit with the final norm in its else (BailingMoe).
PP_EXIT_ELSE = PP_EXIT + "        else:\n" + OPTIONAL_NORM.replace("        ", "            ")
# Flint's exit: this stage ends before the last layer.
END_LAYER_EXIT = PP_EXIT.replace(
    "not get_pp_group().is_last_rank", "self.end_layer != len(self.layers)"
)
WHOLE_WITH_BOOKKEEPING = (
    "        num_attn = 0\n"
    "        for layer in self.layers:\n"
    "            if isinstance(layer, Layer):\n"
    "                num_attn += 1\n"
)
# A layer returning through a helper whose own tuples agree with its annotation (Flint).
LAYER_THROUGH_HELPER = """
class Layer(nn.Module):
    def forward(self, positions, hidden_states, residual):
        if residual is None:
            residual = hidden_states
        return self._post(hidden_states, residual)

    def _post(self, hidden_states, residual) -> tuple[torch.Tensor, torch.Tensor]:
        fast = self.mlp.fast(hidden_states, residual)
        if fast is not None:
            return fast
        return self.mlp(hidden_states), residual
"""
# Orion's layer: annotated as a pair, returns one tensor; the annotation alone is not believed.
LAYER_ONE_MISANNOTATED = """
class Layer(nn.Module):
    def forward(self, positions, hidden_states) -> tuple[torch.Tensor, torch.Tensor]:
        hidden_states = hidden_states + self.mlp(hidden_states)
        return hidden_states
"""


def decoder_tail(loop: str, after: str, init_residual: bool = True) -> str:
    """A decoder whose whole after-loop part is ``after`` (no standard exit added)."""
    return decoder(loop, "", init_residual).replace(
        PP_EXIT + "        return hidden_states\n", after
    )


READY = [
    ("slice", "residual-stream", LAYER_PAIR, decoder(SLICE + PAIR_CALL, FUSED_NORM)),
    ("islice", "residual-stream", LAYER_PAIR, decoder(ISLICE + PAIR_CALL, FUSED_NORM)),
    ("enumerate", "residual-stream", LAYER_PAIR, decoder(ENUMERATE + PAIR_CALL, FUSED_NORM)),
    ("range", "residual-stream", LAYER_PAIR, decoder(RANGE + PAIR_CALL, FUSED_NORM)),
    ("islice", "explicit-add", LAYER_PAIR, decoder(ISLICE + PAIR_CALL, EXPLICIT_ADD)),
    # MiMo's: the sum returned, the target norms it
    ("islice", "explicit-add", LAYER_PAIR, decoder(ISLICE + PAIR_CALL, EXPLICIT_ADD_ONLY)),
    ("islice", "no-residual", LAYER_ONE, decoder(ISLICE + ONE_CALL, PLAIN_NORM, False)),
    ("islice", "full-stream-pair", LAYER_SUMMED_PAIR, decoder(ISLICE + PAIR_CALL, PLAIN_NORM)),
    (
        "islice",
        "full-stream-pair",
        LAYER_SUMMED_PAIR + PASS_NORM,
        _with_norm(decoder(ISLICE + PAIR_CALL, FUSED_NORM), "PassNorm"),
    ),
    (
        "islice",
        "full-stream-pair",
        LAYER_SUMMED_PAIR + PASS_NORM + PASS_NORM.replace("PassNorm", "OtherNorm") + NORM_FACTORY,
        _with_factory_norm(decoder(ISLICE + PAIR_CALL, FUSED_NORM)),
    ),
    ("islice", "residual-stream", LAYER_PAIR, decoder(ISLICE + PAIR_CALL, OPTIONAL_NORM)),
    ("slice", "residual-stream", LAYER_PAIR, decoder(SLICE + PAIR_CALL, OPTIONAL_NORM_NOT_NONE)),
    (
        "islice",
        "residual-stream",
        LAYER_PAIR,
        decoder_tail(ISLICE + PAIR_CALL, PP_EXIT_ELSE + "        return hidden_states\n"),
    ),
    (
        "slice",
        "residual-stream",
        LAYER_PAIR,
        decoder_tail(
            SLICE + PAIR_CALL, END_LAYER_EXIT + FUSED_NORM + "        return hidden_states\n"
        ),
    ),
    ("enumerate", "explicit-add", LAYER_PAIR, decoder(ENUMERATE + PAIR_CALL, ADD_THEN_REBIND)),
    ("range", "no-residual", LAYER_ONE, decoder(RANGE + ONE_CALL, "", False)),
    (
        "whole",
        "full-stream-pair",
        LAYER_SUMMED_PAIR,
        decoder(WHOLE_WITH_BOOKKEEPING + PAIR_CALL, PLAIN_NORM),
    ),
    ("slice", "residual-stream", LAYER_THROUGH_HELPER, decoder(SLICE + PAIR_CALL, FUSED_NORM)),
    (
        "islice",
        "no-residual",
        LAYER_ONE_MISANNOTATED,
        decoder(ISLICE + ONE_CALL, PLAIN_NORM, False),
    ),
]

# DeciLM's loop: the same call in both branches of an `if` on the layer, bookkeeping after it.
BRANCHED = (
    "            if not layer.no_op:\n    "
    + PAIR_CALL
    + "                kv_cache_index += 1\n"
    + "            else:\n    "
    + PAIR_CALL
)
READY.append(
    ("islice", "residual-stream", LAYER_PAIR, decoder(ISLICE + BRANCHED, FUSED_NORM)),
)
# OPT's and ChatGLM's child decoders: a finishing step under a flag of the module, after a loop
# whose layers return the one full stream
FLAGGED_NORM = (
    "        if self.final_norm is not None:\n"
    "            hidden_states = self.final_norm(hidden_states)\n"
)

REFUSED = [
    (
        "a finishing step under a flag after a loop of (stream, residual) pairs",
        LAYER_PAIR,
        decoder(ISLICE + PAIR_CALL, FUSED_NORM + FLAGGED_NORM),
        "branches on `self.final_norm is not None`",
    ),
    (
        "a different layer call in each branch of an if",
        LAYER_PAIR,
        decoder(
            ISLICE + BRANCHED.removesuffix("residual)\n") + "None)\n",
            FUSED_NORM,
        ),
        "loop at line 27 calls the layer inside `if not layer.no_op:` / `else:` (a different "
        "call in each)",
    ),
    (
        "the same call in both branches, but one branch changes the stream",
        LAYER_PAIR,
        decoder(
            ISLICE + BRANCHED.replace("kv_cache_index += 1", "hidden_states = hidden_states * 2"),
            FUSED_NORM,
        ),
        "(the same call in both branches), but a branch does more than bookkeeping",
    ),
    (
        "a layer loop inside another loop: each layer runs several times (IQuestLoopCoder)",
        LAYER_ONE,
        decoder(
            "        for loop_idx in range(self.loop_num):\n"
            + ISLICE.replace("        for", "            for")
            + "    "
            + ONE_CALL,
            PLAIN_NORM,
            False,
        ),
        "loop at line 24 runs inside another loop (`for loop_idx in range(self.loop_num)`, line "
        "23): every layer runs once per pass of it, several times per token",
    ),
    (
        "a layer method that hands back something else than the stream (AliceAI)",
        LAYER_PAIR,
        decoder(ISLICE + "            count, partial = layer.forward_bank(positions, bank)\n", ""),
        "loop at line 27 calls layer.forward_bank(...), which hands back (count, partial) rather "
        "than the hidden stream",
    ),
    (
        "layers ignore the residual they are given, and the final norm may add it",
        LAYER_SUMMED_PAIR,
        decoder(ISLICE + PAIR_CALL, FUSED_NORM),
        "the layers ignore the residual they are given, but the final norm",
    ),
    (
        "layers ignore the residual they are given, and the final norm adds it",
        LAYER_SUMMED_PAIR + ADDING_NORM,
        _with_norm(decoder(ISLICE + PAIR_CALL, FUSED_NORM), "PassNorm"),
        "the layers ignore the residual they are given, but the final norm",
    ),
    (
        "a norm factory one of whose classes adds the residual",
        LAYER_SUMMED_PAIR + PASS_NORM + ADDING_NORM.replace("PassNorm", "OtherNorm") + NORM_FACTORY,
        _with_factory_norm(decoder(ISLICE + PAIR_CALL, FUSED_NORM)),
        "the layers ignore the residual they are given, but the final norm",
    ),
    (
        "layers ignore the residual they are given, yet the decoder adds it",
        LAYER_SUMMED_PAIR,
        decoder(ISLICE + PAIR_CALL, EXPLICIT_ADD),
        "yet the decoder adds it",
    ),
    (
        "a pair the decoder never adds back, the layer not summing it",
        LAYER_PAIR,
        decoder(ISLICE + PAIR_CALL, PLAIN_NORM),
        "never adds residual back",
    ),
    (
        "one value taken from a layer returning a pair",
        LAYER_PAIR,
        decoder(ISLICE + ONE_CALL, PLAIN_NORM, False),
        "takes one value from a layer that returns [2]",
    ),
    (
        "the stream changes between layers",
        LAYER_PAIR,
        decoder(ISLICE + PAIR_CALL + "            hidden_states = hidden_states * 2\n", FUSED_NORM),
        "the stream changes between layers",
    ),
    (
        "two loops over the layers (looped layers)",
        LAYER_PAIR,
        decoder(ISLICE + PAIR_CALL + ISLICE + PAIR_CALL, FUSED_NORM),
        "loops over layers 2 times",
    ),
    (
        "a loop under a condition (several forward paths)",
        LAYER_PAIR,
        decoder(
            "        if self.training:\n"
            + ISLICE.replace("        for", "            for")
            + "    "
            + PAIR_CALL,
            FUSED_NORM,
        ),
        "loop at line 28 is nested in `if self.training:` (line 27), a conditional forward path",
    ),
    (
        "every layer of a decoder without stage bounds",
        LAYER_PAIR,
        decoder("        for layer in self.layers:\n" + PAIR_CALL, FUSED_NORM).replace(
            "self.start_layer, self.end_layer, self.layers = make_layers(",
            "self.layers = make_layers(",
        ),
        "runs every layer of self.layers, and DemoModel keeps no self.start_layer",
    ),
    (
        "bookkeeping the stream reads is not bookkeeping",
        LAYER_PAIR,
        decoder(
            WHOLE_WITH_BOOKKEEPING.replace("num_attn += 1", "hidden_states = hidden_states * 2")
            + PAIR_CALL,
            FUSED_NORM,
        ),
        "changes hidden_states before the layer call (line 29): the stream a layer gets is not "
        "the one the previous layer handed back",
    ),
    (
        "a mode switch after the loop and no plain return: every blocker named",
        LAYER_PAIR,
        decoder_tail(
            ISLICE + PAIR_CALL,
            PP_EXIT
            + "        if self.enable_ihc:\n"
            + "            hidden_states = self.hc_head(hidden_states)\n"
            + "        return self.norm(hidden_states)\n",
        ),
        "line 31 branches on `self.enable_ihc` (if so: `hidden_states = "
        "self.hc_head(hidden_states)`), a second way of finishing the stream that a capture "
        "written for one path does not follow; line 33 applies the final norm inside the return "
        "(`return self.norm(hidden_states)`); the capture edit needs it assigned first "
        "(`hidden_states = ...`) and `return hidden_states`",
    ),
    (
        "no final norm, and layers returning a pair",
        LAYER_PAIR,
        decoder(ISLICE + PAIR_CALL, ""),
        "has no final norm and its layers return (hidden_states, residual)",
    ),
    (
        "something after the norm",
        LAYER_PAIR,
        decoder(ISLICE + PAIR_CALL, FUSED_NORM + "        hidden_states = hidden_states[:1]\n"),
        "cannot match to the standard capture: line 32 rebinds hidden_states",
    ),
    (
        "hyper-connections: the layer returns three streams",
        LAYER_PAIR,
        decoder(
            ISLICE
            + "            hidden_states, residual, extra = layer(hidden_states, residual)\n",
            FUSED_NORM,
        ),
        "the layer returns 3 values",
    ),
]


def _tree(tmp_path: Path, layer: str, decoder_source: str, extra: str = "") -> Path:
    source = HEADER + layer + "\n\n" + decoder_source + "\n\n" + TARGET + extra
    registry = {TEXT: {"DemoForCausalLM": ("demo", "DemoForCausalLM")}}
    if extra:
        registry[TEXT]["DemoChatForCausalLM"] = ("demo", "DemoChatForCausalLM")
    return make_tree(tmp_path, {"model_executor/models/demo.py": source}, registry)


def _enable_findings(tree: Path) -> list:
    return [f for f in scan(tree, use_cache=False).findings if f.recipe == "eagle3-enable"]


def _ctx(tree: Path, finding: Finding) -> PlanContext:
    result = scan(tree, use_cache=False)
    return PlanContext(
        scan=result.context,
        group=(finding,),
        findings=result.findings,
        arch=finding.architectures[0],
        catalogue=load_catalogue(include_user=False),
        preferred_draft=None,
        upstream="vllm-project/vllm",
        version=None,
        base_commit="0" * 40,
    )


def _plan(tree: Path, finding: Finding) -> FixPlan | Declined:
    recipe = fixer_named("eagle3-enable")
    assert recipe is not None
    return recipe.plan(finding, _ctx(tree, finding))


@pytest.mark.parametrize(
    ("loop", "residual", "layer", "source"), READY, ids=[f"{r[0]}/{r[1]}" for r in READY]
)
def test_named_shape(tmp_path: Path, loop: str, residual: str, layer: str, source: str) -> None:
    (finding,) = _enable_findings(_tree(tmp_path, layer, source))
    assert finding.evidence.refused is None
    shape = finding.evidence.shape
    assert (shape.loop, shape.residual) == (loop, residual)
    expected = None if residual in ("no-residual", "full-stream-pair") else "residual"
    assert shape.residual_name == expected


@pytest.mark.parametrize(
    ("layer", "source", "reason"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_refused_shape(tmp_path: Path, layer: str, source: str, reason: str) -> None:
    tree = _tree(tmp_path, layer, source)
    (finding,) = _enable_findings(tree)
    assert finding.evidence.shape is None
    assert finding.evidence.refused.startswith("needs a human: ")
    assert reason in finding.evidence.refused
    assert "needs a human: " in finding.summary
    planned = _plan(tree, finding)
    assert isinstance(planned, Declined)
    assert planned.reason.startswith("needs a human: ")


def test_a_subclass_that_post_processes_the_output_refuses_the_base(tmp_path: Path) -> None:
    subclass = dedent(
        """


        class DemoChatForCausalLM(DemoForCausalLM):
            def forward(self, input_ids, positions, intermediate_tensors=None):
                hidden_states = self.model(input_ids, positions, intermediate_tensors)
                return hidden_states * 2
        """
    )
    tree = _tree(tmp_path, LAYER_PAIR, decoder(ISLICE + PAIR_CALL, FUSED_NORM), subclass)
    by_class = {f.class_name: f for f in _enable_findings(tree)}
    refused = by_class["DemoForCausalLM"].evidence.refused
    assert "the subclass DemoChatForCausalLM overrides forward" in refused


def test_a_registered_subclass_that_passes_the_output_through_is_fine(tmp_path: Path) -> None:
    subclass = "\n\nclass DemoChatForCausalLM(DemoForCausalLM):\n    pass\n"
    tree = _tree(tmp_path, LAYER_PAIR, decoder(ISLICE + PAIR_CALL, FUSED_NORM), subclass)
    by_class = {f.class_name: f for f in _enable_findings(tree)}
    assert by_class["DemoForCausalLM"].evidence.refused is None


def ready_model_edit(tmp_path: Path) -> tuple[Path, Finding, Any]:
    """The recipe's one model-file edit (decoder and target) for the plain ready shape."""
    tree = _tree(tmp_path, LAYER_PAIR, decoder(ISLICE + PAIR_CALL, FUSED_NORM))
    (finding,) = _enable_findings(tree)
    ctx = _ctx(tree, finding)
    (candidate,) = candidates(ctx.scan)
    (model_edit,) = _edits(ctx, finding, candidate, candidate.verdict, absolute=False)
    assert model_edit.kind == "enable-decoder-and-declare"
    return tree, finding, model_edit


def test_the_decoder_and_target_edit(tmp_path: Path) -> None:
    tree, _, model_edit = ready_model_edit(tmp_path)
    source = (tree / model_edit.path).read_text()
    patched = model_edit.apply(source)
    assert "class DemoModel(nn.Module, EagleModelMixin):" in patched
    assert "class DemoForCausalLM(nn.Module, SupportsPP, SupportsEagle3):" in patched
    assert "from .interfaces import EagleModelMixin, SupportsEagle3, SupportsPP" in patched
    assert "aux_hidden_states = self._maybe_add_hidden_state([], 0, hidden_states, residual)" in (
        patched
    )
    assert "self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, residual)" in (
        patched
    )
    assert model_edit.apply(patched) == patched
    compile(patched, "demo.py", "exec")


def test_a_pooling_registration_is_never_a_target(tmp_path: Path) -> None:
    source = (
        HEADER + LAYER_PAIR + "\n\n" + decoder(ISLICE + PAIR_CALL, FUSED_NORM) + "\n\n" + TARGET
    )
    registry = {"_EMBEDDING_MODELS": {"DemoForCausalLM": ("demo", "DemoForCausalLM")}}
    tree = make_tree(tmp_path, {"model_executor/models/demo.py": source}, registry)
    assert _enable_findings(tree) == []
    registry = {TEXT: {"DemoForCausalLM": ("demo", "DemoForCausalLM")}}
    tree = make_tree(tmp_path / "text", {"model_executor/models/demo.py": source}, registry)
    assert len(_enable_findings(tree)) == 1  # the same model, registered for generation


@pytest.mark.vllm_tree
def test_cohere_layers_hand_on_the_whole_stream() -> None:
    """CohereDecoderLayer rebinds `residual = hidden_states` before reading the residual it is
    given and returns the whole stream first, so the aux state is `hidden_states` alone (as
    upstream's own Cohere2Moe capture in 0.31.0 is); capturing `hidden_states + residual`
    counted the residual twice, which the smoke harness's value check caught. On 0.34.0 the
    final norm's class comes from `select_norm_impl`, which returns one of two local classes;
    both hand the residual back unused, so the answer is the same."""
    from bot.tree.fetch import release_tree

    def cohere(version: str) -> Finding:
        found = scan(release_tree(version)).findings
        return next(f for f in found if f.class_name == "CohereForCausalLM")

    for version in ("0.19.1", "0.34.0"):
        shape = cohere(version).evidence.shape
        assert (shape.residual, shape.residual_name) == ("full-stream-pair", None)


def test_the_scan_knows_the_forward_tests_stand_in_layers() -> None:
    from bot.codemods.aux_forward_test import RESIDUAL_KINDS
    from bot.recipes.eagle3_enable.forward_reads import FORWARD_TEST_RESIDUALS

    assert set(RESIDUAL_KINDS) == FORWARD_TEST_RESIDUALS


def _config_read(tmp_path: Path, read: str) -> tuple[Path, Finding]:
    """A ready decoder whose forward also reads the config (``read``: one line before the
    loop)."""
    source = decoder(f"        {read}\n" + ISLICE + PAIR_CALL, FUSED_NORM)
    tree = _tree(tmp_path, LAYER_PAIR, source)
    (finding,) = _enable_findings(tree)
    return tree, finding


def test_a_config_value_read_with_a_default_gets_an_empty_stand_in_config(
    tmp_path: Path,
) -> None:
    """AXK1's ``getattr(self.config, "llama_4_scaling", None)``: the contributed test sets an
    empty config, so the forward takes the default."""
    tree, finding = _config_read(tmp_path, 'scaling = getattr(self.config, "scaling", None)')
    assert finding.evidence.refused is None
    from bot.codemods.aux_forward_test import create_aux_forward_test
    from bot.recipes.eagle3_enable.forward_reads import forward_test_fields

    scanned = _ctx(tree, finding).scan
    (candidate,) = candidates(scanned)
    fields = forward_test_fields(scanned, candidate, candidate.verdict)
    assert isinstance(fields, dict)
    assert fields["config_defaults"] == ("scaling",)
    written = create_aux_forward_test("", **fields)
    assert "    # no config.scaling: forward takes its default\n" in written
    assert "    model.config = SimpleNamespace()\n" in written
    assert create_aux_forward_test(written, **fields) == written


@pytest.mark.parametrize(
    "read",
    [
        "flag = self.config.use_flag",  # no default: the stand-in cannot know the value
        'flag = getattr(self.config, "use_flag", DEFAULT)',  # a default that is not a constant
    ],
)
def test_a_config_value_without_a_constant_default_is_refused(tmp_path: Path, read: str) -> None:
    tree, finding = _config_read(tmp_path, read)
    # (and this synthetic tree has nothing the test through LLM would use: no tests/)
    assert finding.evidence.refused == (
        "needs a human: no contributed forward test: DemoModel.forward reads self.config, "
        "which a test on stand-in layers does not set up; no test through LLM either: "
        "tests/conftest.py does not have the vllm_runner fixture, which the test through LLM uses"
    )
    assert isinstance(_plan(tree, finding), Declined)


# Gemma 4's shape: every layer hands back (h, None) and takes a per-layer input, one slice of
# a tensor the decoder's own methods build before the loop.
LAYER_PER_LAYER_INPUT = """
class Layer(nn.Module):
    def forward(self, positions, hidden_states, residual, per_layer_input=None):
        residual = hidden_states
        hidden_states = self.mlp(hidden_states) + residual + per_layer_input
        return hidden_states, None
"""
PER_LAYER_LOOP = (
    "        side = self.project_side(hidden_states, self.side_inputs(input_ids))\n"
    + ENUMERATE
    + "            layer_side = side[:, self.start_layer + i, :]\n"
    "            hidden_states, residual = layer(\n"
    "                positions, hidden_states, residual, per_layer_input=layer_side\n"
    "            )\n"
)
PER_LAYER_METHODS = (
    "    def side_inputs(self, input_ids):\n"
    "        return self.side_embed(input_ids)\n\n"
    "    def project_side(self, hidden_states, side):\n"
    "        return self.side_proj(hidden_states) + side\n\n"
    "    def forward("
)


def _per_layer_fields(tmp_path: Path, loop: str) -> dict | Declined:
    source = decoder(loop, OPTIONAL_NORM).replace("    def forward(", PER_LAYER_METHODS, 1)
    tree = _tree(tmp_path, LAYER_PER_LAYER_INPUT, source)
    (finding,) = _enable_findings(tree)
    from bot.recipes.eagle3_enable.forward_reads import forward_test_fields

    scanned = _ctx(tree, finding).scan
    (candidate,) = candidates(scanned)
    if not isinstance(candidate.verdict, DecoderShape):
        return Declined(candidate.verdict.reason)
    return forward_test_fields(scanned, candidate, candidate.verdict)


def test_per_layer_inputs_get_stand_in_methods_and_layers_taking_the_slice(
    tmp_path: Path,
) -> None:
    """The decoder's own methods building the per-layer tensor (one called in the other's
    arguments) return zeros in the contributed test, the stand-in layers take the slice by the
    call's keyword and add it, and hand back None as the real layers do."""
    fields = _per_layer_fields(tmp_path, PER_LAYER_LOOP)
    assert isinstance(fields, dict), fields
    assert fields["per_layer_inputs"] == ("project_side", "side_inputs")
    assert fields["per_layer_params"] == ("per_layer_input",)
    assert fields["hands_back_none"] is True
    from bot.codemods.aux_forward_test import create_aux_forward_test

    written = create_aux_forward_test("", **fields)
    assert "    model.side_inputs = lambda *args: per_layer\n" in written
    assert "            hidden_states = hidden_states + per_layer_input\n" in written
    assert "            return hidden_states + 1, None\n" in written


def test_a_decoder_method_whose_result_is_not_sliced_per_layer_is_still_refused(
    tmp_path: Path,
) -> None:
    """The slice handed over whole (``side`` itself, not ``side[:, i, :]``): the methods are
    not per-layer inputs, and the test on stand-in layers does not set them up."""
    loop = PER_LAYER_LOOP.replace("side[:, self.start_layer + i, :]", "side")
    fields = _per_layer_fields(tmp_path, loop)
    assert isinstance(fields, Declined)
    assert (
        "DemoModel.forward reads self.project_side, self.side_inputs, which a test on stand-in "
        "layers does not set up; no test through LLM either: " in fields.reason
    )


def test_a_branched_layer_call_is_captured_once_after_the_if(tmp_path: Path) -> None:
    """DeciLM's loop: the same call in both branches of ``if not layer.no_op:``. The capture
    goes after the ``if`` (both branches produced the stream), and the contributed test's
    stand-in layers carry the flag, False on the first half and True on the second, so the
    taps after layers 0 and 2 come out of different branches."""
    tree = _tree(tmp_path, LAYER_PAIR, decoder(ISLICE + BRANCHED, FUSED_NORM))
    (finding,) = _enable_findings(tree)
    ctx = _ctx(tree, finding)
    (candidate,) = candidates(ctx.scan)
    (model_edit,) = _edits(ctx, finding, candidate, candidate.verdict, absolute=False)
    patched = model_edit.apply((tree / model_edit.path).read_text())
    assert (
        "            else:\n"
        "                hidden_states, residual = layer(positions, hidden_states, residual)\n"
        "            self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, "
        "residual)\n"
    ) in patched
    assert patched.count("self._maybe_add_hidden_state(aux_hidden_states") == 1
    from bot.codemods.aux_forward_test import create_aux_forward_test
    from bot.recipes.eagle3_enable.forward_reads import forward_test_fields

    fields = forward_test_fields(ctx.scan, candidate, candidate.verdict)
    assert isinstance(fields, dict) and fields["layer_flags"] == ("no_op",)
    assert "        layer.no_op = tap >= 2\n" in create_aux_forward_test("", **fields)


ZAYA_LAYER = """
class Layer(nn.Module):
    def forward(self, residual, positions, router_states):
        hidden_states = self.attn(residual)
        hidden_states, router_states = self.mlp(hidden_states, router_states)
        return self.scale(hidden_states, residual), router_states
"""
ZAYA_LOOP = ISLICE + (
    "            hidden_states, router_states = layer(hidden_states, positions, router_states)\n"
)


def test_a_target_refusing_speculative_decoding_is_refused_first(tmp_path: Path) -> None:
    """Zaya's ``__init__`` raises when speculative tokens are configured: the model's own word,
    named before the decoder's blockers, whatever the decoder's shape."""
    guarded = TARGET.replace(
        "        super().__init__()\n",
        "        super().__init__()\n"
        "        if vllm_config.num_speculative_tokens:\n"
        '            raise NotImplementedError("Demo does not support speculative decoding.")\n',
    )
    source = HEADER + LAYER_PAIR + "\n\n" + decoder(ISLICE + PAIR_CALL, FUSED_NORM) + "\n\n"
    tree = make_tree(
        tmp_path,
        {"model_executor/models/demo.py": source + guarded},
        {TEXT: {"DemoForCausalLM": ("demo", "DemoForCausalLM")}},
    )
    (finding,) = _enable_findings(tree)
    assert finding.evidence.refused == (
        "needs a human: DemoForCausalLM.__init__ refuses speculative decoding itself (line 40: "
        "`if vllm_config.num_speculative_tokens: raise NotImplementedError('Demo does not "
        "support speculative decoding.')`), so declaring SupportsEagle3 would promise what the "
        "model's own code rejects"
    )
    assert isinstance(_plan(tree, finding), Declined)


def test_a_pair_carried_beside_the_stream_is_named(tmp_path: Path) -> None:
    """Zaya's loop unpacks ``(hidden_states, router_states)`` and applies the final norm inside
    the return: the refusal names both, the second value as what it is (carried from layer to
    layer, read by nothing after the loop), not as a residual."""
    source = decoder_tail(
        ZAYA_LOOP, "        return self.norm(hidden_states)\n", init_residual=False
    ).replace(
        "        hidden_states = self.embed",
        "        router_states = None\n        hidden_states = self.embed",
    )
    tree = _tree(tmp_path, ZAYA_LAYER, source)
    (finding,) = _enable_findings(tree)
    refused = finding.evidence.refused
    assert "applies the final norm inside the return (`return self.norm(hidden_states)`)" in refused
    assert (
        "the layers hand back (hidden_states, router_states) and nothing after the loop reads "
        "router_states: it is carried from layer to layer beside the stream, not a residual the "
        "decoder adds back, and the layer's forward does not show that hidden_states alone is "
        "the whole stream"
    ) in refused


def test_a_flagged_finishing_step_after_one_tensor_layers_is_read(tmp_path: Path) -> None:
    tree = _tree(tmp_path, LAYER_ONE, decoder(ISLICE + ONE_CALL, FLAGGED_NORM, False))
    index = scan_context(tree, use_cache=False).index
    (ref,) = [r for r in index.classes() if r.name == "DemoModel"]
    shape = decoder_shape(index, ref)
    assert isinstance(shape, DecoderShape), shape
    assert (shape.residual, shape.final_norm) == ("no-residual", "conditional")
    # without tests/AGENTS.md the stand-in forward test cannot set the flagged module up: the
    # finding is refused, and says so (on a tree with it, the test through LLM: CHILD's case)
    (finding,) = _enable_findings(tree)
    assert "reads self.final_norm, which a test on stand-in layers does not set up" in (
        finding.evidence.refused
    )
