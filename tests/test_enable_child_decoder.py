"""eagle3-enable on decoders that hand a child decoder's output back whole (0.34.0).

``OPTModel.forward`` is ``return self.decoder(...)``; ``ChatGLMModel.forward`` is
``hidden_states = self.encoder(...)`` then ``return hidden_states``. The child (``OPTDecoder``,
``GLMTransformer``) is a whole decoder: the loop, the final steps (under flags of the config:
``if self.final_layer_norm is not None``, ``if self.post_layer_norm``) and the return. The plan
puts the mixin and the capture in the child, leaves the parent unchanged, and gives the target
the interface's two methods reaching the child (``self.model.decoder``,
``self.transformer.encoder``); both build on the core-drafter-loader plan. Publish (which
derives the edit from the base tree) accepts exactly that and refuses the capture in the parent
or methods reaching the parent.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from bot.codemods.base import CodemodRefused
from bot.recipes.eagle3_enable.publish import PUBLISH_RULES
from bot.tree.fetch import release_tree
from tests.cli import propose_class, run_bot
from tests.test_enable_replays import _class, _patched, published_edit

pytestmark = pytest.mark.vllm_tree

CORE = "core-drafter-loader"
# target -> (file, parent, child, what the target's two methods reach)
FORMS = {
    "OPTForCausalLM": ("opt.py", "OPTModel", "OPTDecoder", "self.model.decoder"),
    "ChatGLMForCausalLM": (
        "chatglm.py",
        "ChatGLMModel",
        "GLMTransformer",
        "self.transformer.encoder",
    ),
}


@pytest.fixture(scope="module", params=sorted(FORMS))
def child_plan(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    target = request.param
    filename = FORMS[target][0]
    path = f"vllm/model_executor/models/{filename}"
    tree = release_tree("0.34.0")
    out = tmp_path_factory.mktemp(target) / "plan"
    result = propose_class(tree, target, out)
    assert result.returncode == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["status"] == "ready", plan["reason"]
    plan["pr_md"] = (out / "pr.md").read_text()
    after = _patched(tree, (out / "patch.diff").read_text(), path)
    return target, plan, (tree / path).read_text(), after


def _bases(source: str, name: str) -> list[str]:
    return [ast.unparse(b) for b in _class(ast.parse(source), name).bases]


def _methods(source: str, name: str) -> dict[str, list[str]]:
    return {
        n.name: [ast.unparse(s) for s in n.body]
        for n in _class(ast.parse(source), name).body
        if isinstance(n, ast.FunctionDef)
    }


def test_the_child_collects_and_the_target_reaches_it(child_plan) -> None:
    target, plan, before, after = child_plan
    _, parent, child, reached = FORMS[target]
    assert plan["finding"]["evidence"]["builds_on"]["recipe"] == CORE
    assert plan["finding"]["evidence"]["shape"]["inner"] == child
    # the child takes the mixin and collects; the parent is unchanged
    assert "EagleModelMixin" in _bases(after, child)
    assert ast.dump(_class(ast.parse(before), parent)) == ast.dump(_class(ast.parse(after), parent))
    child_forward = "\n".join(_methods(after, child)["forward"])
    assert "self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, None)" in (
        child_forward
    )
    assert "return (hidden_states, aux_hidden_states)" in child_forward
    assert "SupportsEagle3" in _bases(after, target)
    methods = _methods(after, target)
    assert methods["set_aux_hidden_state_layers"] == [
        f"{reached}._set_aux_hidden_state_layers(layers)"
    ]
    assert methods["get_eagle3_default_aux_hidden_state_layers"][0] == (
        f"num_layers = len({reached}.layers)"
    )
    # the contributed test through LLM (tests/AGENTS.md): the final steps run under config
    # flags, so it checks the output, not one norm
    assert plan["tests"]["engine"], plan["tests"]
    assert f"hands back whole what `self.{reached.rsplit('.', 1)[1]}`" in plan["pr_md"]
    assert f"This change teaches `{child}` to collect them" in plan["pr_md"]
    assert "no captured state is compared with the model's output" in plan["pr_md"]


def test_publish_accepts_exactly_the_bots_child_decoder_edit(child_plan) -> None:
    target, plan, before, after = child_plan
    edit = published_edit(plan, before, after, "0.34.0", FORMS[target][0])
    assert edit.kind == "enable-decoder-and-declare"
    PUBLISH_RULES[edit.kind](edit)


def test_publish_refuses_the_capture_in_the_wrong_module(child_plan) -> None:
    target, plan, before, after = child_plan
    _, parent, child, reached = FORMS[target]
    # the mixin on the parent (which has no loop) instead of the child
    moved = after.replace(
        f"class {child}(nn.Module, EagleModelMixin):", f"class {child}(nn.Module):"
    )
    moved = moved.replace(
        f"class {parent}(nn.Module", f"class {parent}(EagleModelMixin, nn.Module", 1
    )
    assert moved != after
    edit = published_edit(plan, before, moved, "0.34.0", FORMS[target][0])
    with pytest.raises(CodemodRefused):
        PUBLISH_RULES[edit.kind](edit)
    # the target's methods reaching the parent, not the child that collects
    parent_attr = reached.rsplit(".", 1)[0]
    wrong = after.replace(
        f"{reached}._set_aux_hidden_state_layers", f"{parent_attr}._set_aux_hidden_state_layers"
    )
    assert wrong != after
    edit = published_edit(plan, before, wrong, "0.34.0", FORMS[target][0])
    with pytest.raises(CodemodRefused, match=f"the two methods reaching {reached}"):
        PUBLISH_RULES[edit.kind](edit)


def test_51_of_the_64_enable_targets_are_ready_on_0_34_0() -> None:
    result = run_bot("scan", str(release_tree("0.34.0")), "--json")
    assert result.returncode == 0, result.stderr
    enable = [f for f in json.loads(result.stdout) if f["recipe"] == "eagle3-enable"]
    ready = {f["class"] for f in enable if not f["evidence"]["refused"]}
    assert len(enable) == 64
    assert {"OPTForCausalLM", "ChatGLMForCausalLM"} <= ready
    assert len(ready) >= 51, sorted(f["class"] for f in enable if f["evidence"]["refused"])
    for finding in enable:  # every one refused names why
        refused = finding["evidence"]["refused"]
        assert refused is None or refused.startswith("needs a human: "), finding["class"]


def test_the_parent_form_is_read_from_the_facts(tmp_path: Path) -> None:
    """``return self.decoder(...)`` is recorded as a child call handed back whole."""
    from bot.tree.decoder_loop import delegation

    func = ast.parse("def forward(self, x):\n    return self.decoder(x, positions=p)\n").body[0]
    assert isinstance(func, ast.FunctionDef)
    facts = delegation(func)
    assert facts is not None
    (call,) = facts["calls"]
    assert call["attr"] == "decoder" and call["returned"] and call["targets"] == []
    assert call["keywords"] == {"positions": "p"}
