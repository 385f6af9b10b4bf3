"""eagle3-enable on nested decoders: the loop lives in a child module the decoder calls once.

Upstream enabled one between 0.28.0 and 0.29.0 (Plamo3): the mixin on ``Plamo3Model`` and on
its child ``Plamo3Decoder``, the child collects and hands the aux list back as a third value,
``__len__`` on the child (the interface's default counts ``len(model.layers)``), and the parent
passes the aux layers down with its own ``_set_aux_hidden_state_layers``. The bot's plan on
0.28.0 is replayed against 0.29.0's EAGLE-relevant lines, and publish's rule (which derives the
capture from the base tree) accepts exactly that patch. The 0.34.0 decoders the scan once
called "nested?" are refused with what their code actually does.

One known difference, by design (as in ``test_enable_replays.py``): upstream's Plamo3 capture
counts from ``0`` with a plain ``enumerate``; the bot follows the absolute form
(``self.start_layer``, ``enumerate(..., start=self.start_layer)``) 0.28.0's own newer decoders
use. The two are equal on one pipeline stage, which the mixin's default keeps.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from bot.codemods.base import CodemodRefused
from bot.recipes.base import PublishedEdit
from bot.recipes.eagle3_enable.publish import PUBLISH_RULES
from bot.tree.fetch import release_tree
from tests.cli import propose_class, run_bot
from tests.test_enable_replays import _class, _patched, eagle_lines, published_edit

pytestmark = pytest.mark.vllm_tree

PLAMO3 = "vllm/model_executor/models/plamo3.py"
PARENT, CHILD, TARGET = "Plamo3Model", "Plamo3Decoder", "Plamo3ForCausalLM"


def _method_body(cls: ast.ClassDef, name: str) -> list[str]:
    found = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return [ast.unparse(s) for s in found[0].body] if found else []


def nested_eagle_lines(source: str) -> dict[str, object]:
    """The EAGLE-relevant facts of a two-module decoder: the child's (mixin, captures, the
    return handing the aux list back, ``__len__``) and the parent's (mixin, the delegating
    ``_set_aux_hidden_state_layers``, the call taking the aux list back, the guarded return),
    and the target's interface."""
    module = ast.parse(source)
    parent = _class(module, PARENT)
    forward = next(n for n in parent.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    child_calls = [
        ast.unparse(n.targets[0])
        for n in ast.walk(forward)
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and ast.unparse(n.value.func) == "self.layers"
    ]
    return {
        "child": eagle_lines(source, CHILD, TARGET),
        "child_len": _method_body(_class(module, CHILD), "__len__"),
        "parent": eagle_lines(source, PARENT, TARGET),
        "parent_delegates": _method_body(parent, "_set_aux_hidden_state_layers"),
        "parent_call": child_calls,
    }


@pytest.fixture(scope="module")
def plamo3(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, str]:
    """The bot's Plamo3 plan on 0.28.0: plan.json, plamo3.py before and after the patch."""
    tree = release_tree("0.28.0")
    out = tmp_path_factory.mktemp("plamo3") / "plan"
    result = propose_class(tree, TARGET, out)
    assert result.returncode == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["status"] == "ready", plan["reason"]
    after = _patched(tree, (out / "patch.diff").read_text(), PLAMO3)
    plan["pr_md"] = (out / "pr.md").read_text()  # the write-up, read by the replay test
    return plan, (tree / PLAMO3).read_text(), after


def test_plamo3_replay_matches_0_29_0(plamo3: tuple[dict, str, str]) -> None:
    plan, before, after = plamo3
    assert plan["recipe"] == "eagle3-enable"
    ours = nested_eagle_lines(after)
    upstream = nested_eagle_lines((release_tree("0.29.0") / PLAMO3).read_text())
    gap = nested_eagle_lines(before)
    assert not gap["child"]["decoder_mixin"] and gap["child"]["captures"] == []  # a real gap
    assert not gap["parent"]["decoder_mixin"] and gap["parent_delegates"] == []
    assert ours == upstream
    # what the comparison holds, spelled out
    assert ours["parent_call"] == ["(hidden_states, residual, aux_hidden_states)"]
    assert ours["child_len"] == ["return len(self.layers)"]
    assert ours["parent_delegates"] == ["self.layers._set_aux_hidden_state_layers(layers)"]
    assert "The loop lives in `Plamo3Decoder` (`self.layers`)" in plan["pr_md"]


def _published(plan: dict, before: str, after: str) -> PublishedEdit:
    return published_edit(plan, before, after, "0.28.0", PLAMO3)


def test_publish_accepts_exactly_the_bots_nested_edit(plamo3: tuple[dict, str, str]) -> None:
    plan, before, after = plamo3
    edit = _published(plan, before, after)
    assert edit.kind == "enable-decoder-and-declare"
    PUBLISH_RULES[edit.kind](edit)


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (
            "aux_hidden_states, idx + 1, hidden_states, residual",
            "aux_hidden_states, idx + 2, hidden_states, residual",
            "change to Plamo3Decoder is not the mixin and the aux capture",
        ),
        (
            "    def __len__(self) -> int:\n        return len(self.layers)\n\n",
            "",
            "change to Plamo3Decoder is not the mixin and the aux capture",
        ),
        (
            "        self.layers._set_aux_hidden_state_layers(layers)\n",
            "        self.aux_hidden_state_layers = layers\n",
            "change to Plamo3Model is not the mixin and the aux capture",
        ),
        (
            "class Plamo3Decoder(torch.nn.Module, EagleModelMixin):",
            "class Plamo3Decoder(torch.nn.Module):",
            "change to Plamo3Decoder is not the mixin and the aux capture",
        ),
    ],
    ids=["child capture index", "no __len__", "parent keeps the layers", "child without mixin"],
)
def test_publish_refuses_a_tampered_nested_edit(
    plamo3: tuple[dict, str, str], old: str, new: str, why: str
) -> None:
    plan, before, after = plamo3
    assert old in after
    edit = _published(plan, before, after.replace(old, new, 1))
    with pytest.raises(CodemodRefused, match=why):
        PUBLISH_RULES[edit.kind](edit)


# What each 0.34.0 decoder the scan used to call "a nested decoder?" actually does, in the
# refusal's words (each must be there; Gemma 3n's embedding blocker stays named). OPT, which
# hands its child decoder's output back whole, is ready: tests/test_enable_child_decoder.py.
REFUSALS_0_34_0 = {
    "SolarForCausalLM": [
        "SolarModel.forward's loop at line 318 changes hidden_states, residual before the layer "
        "call (lines 327, 330)"
    ],
    "HrmTextForCausalLM": [
        "HrmTextModel.forward runs its child modules (self.H_module, self.L_module) inside a "
        "loop (line 439)"
    ],
    "Qwen4ExpForCausalLM": [
        "the layer returns 3 values (hidden_states, block_output, injection): the stream is "
        "carried in more than one tensor between layers"
    ],
    "Gemma3nForCausalLM": [
        "through its own methods (fast_prefill_forward -> ",
        "several forward paths",
        "the bot finds 0 VocabParallelEmbedding built in Gemma3nTextModel",
    ],
}


def test_decoders_without_the_two_module_form_are_refused_with_what_they_do() -> None:
    result = run_bot("scan", str(release_tree("0.34.0")), "--json")
    assert result.returncode == 0, result.stderr
    findings = {
        f["class"]: f
        for f in json.loads(result.stdout)
        if f["recipe"] == "eagle3-enable" and f["class"] in REFUSALS_0_34_0
    }
    assert set(findings) == set(REFUSALS_0_34_0)
    for name, phrases in REFUSALS_0_34_0.items():
        refused = findings[name]["evidence"]["refused"]
        assert refused is not None and "nested decoder?" not in refused, name
        for phrase in phrases:
            assert phrase in refused, (name, refused)
        assert findings[name]["priority"]["fixable"] is False


def test_a_nested_decoder_refused_on_0_34_0_gets_no_patch(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    result = propose_class(release_tree("0.34.0"), "SolarForCausalLM", out)
    assert result.returncode == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["status"] != "ready"
    assert "changes hidden_states, residual before the layer call" in plan["reason"]
    assert (out / "patch.diff").read_text() == ""
