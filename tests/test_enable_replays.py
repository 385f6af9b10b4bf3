"""eagle3-enable replayed on real releases: the plan matches what upstream merged next.

For each window (MiniMax-M2 0.19.1 -> 0.20.0, Granite 0.31.0 -> 0.32.0, MiMoV2Flash 0.24.0 ->
0.25.0, Gemma 4 0.19.0 -> 0.19.1) the bot proposes on the older tree, the patch is applied to
a scratch checkout, and the EAGLE-relevant lines are compared with the next release's file: the
mixin on the decoder, the interface on the target, the capture points (what is captured, with
which residual, where), and the return. Other lines changed upstream in the same windows and
are not compared.

One known difference, by design: upstream's MiniMax-M2 and Granite fixes count the capture
from ``0`` with a plain ``enumerate``; the bot follows the absolute form these releases' own
newer decoders use (``self.start_layer`` and ``enumerate(..., start=self.start_layer)``). The
two are equal whenever the decoder is one pipeline stage (``start_layer == 0``), which is all
these fixes support; the comparison below maps both to "the first layer's input" and "after
layer i".
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from bot.base_tree import CheckedOutTree
from bot.codemods.base import CodemodRefused
from bot.drafts import load_catalogue
from bot.recipes import fixer_named
from bot.recipes.base import FileEdit, Finding, FixPlan, PlanContext, PublishedEdit, ScanContext
from bot.recipes.eagle3_enable.analysis import DecoderShape
from bot.recipes.eagle3_enable.detection import candidates
from bot.recipes.eagle3_enable.publish import PUBLISH_RULES
from bot.recipes.eagle3_enable.shared import SHARED_DECODER
from bot.scan.findings import scan
from bot.tree.fetch import release_tree
from bot.tree.worktree import head_commit, scratch_worktree
from tests.cli import propose_class

pytestmark = pytest.mark.vllm_tree

MODELS = "vllm/model_executor/models"
WINDOWS = [
    ("0.19.1", "0.20.0", "MiniMaxM2ForCausalLM", "MiniMaxM2Model", "minimax_m2.py"),
    ("0.31.0", "0.32.0", "GraniteForCausalLM", "GraniteModel", "granite.py"),
    ("0.24.0", "0.25.0", "MiMoV2FlashForCausalLM", "MiMoV2Model", "mimo_v2.py"),
    # Gemma 4: a per-layer input read before the layer call, layers returning (h, None), the
    # final norm picked by whether the residual is None; its contributed test stands in for
    # the per-layer input methods (get_per_layer_inputs, project_per_layer_inputs)
    ("0.19.0", "0.19.1", "Gemma4ForCausalLM", "Gemma4Model", "gemma4.py"),
]


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    assert len(found) == 1, name
    return found[0]


def _bases(cls: ast.ClassDef) -> set[str]:
    return {ast.unparse(b) for b in cls.bases}


def _first_index(node: ast.expr) -> str:
    """``0`` and ``self.start_layer`` both mean the first layer's input on one stage."""
    text = ast.unparse(node)
    return "first" if text in ("0", "self.start_layer") else text


def eagle_lines(source: str, decoder: str, target: str) -> dict[str, object]:
    """The EAGLE-relevant facts of a decoder and its target, formatting-free."""
    module = ast.parse(source)
    decoder_cls, target_cls = _class(module, decoder), _class(module, target)
    forward = next(
        n for n in decoder_cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"
    )
    captures = []
    loop_index = None
    for node in ast.walk(forward):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Tuple):
            loop_index = ast.unparse(node.target.elts[0])
    for node in ast.walk(forward):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "self._maybe_add_hidden_state":
            where, index, stream, residual = node.args
            in_loop = ast.unparse(index) == f"{loop_index} + 1"
            captures.append(
                (
                    "list" if ast.unparse(where) == "[]" else ast.unparse(where),
                    "after layer" if in_loop else _first_index(index),
                    ast.unparse(stream),
                    ast.unparse(residual),
                )
            )
    guarded_returns = [
        ast.unparse(n.body[0].value)
        for n in ast.walk(forward)
        if isinstance(n, ast.If)
        and ast.unparse(n.test) == "len(aux_hidden_states) > 0"
        and isinstance(n.body[0], ast.Return)
        and n.body[0].value is not None
    ]
    last = forward.body[-1]
    return {
        "decoder_mixin": "EagleModelMixin" in _bases(decoder_cls),
        "target_interface": "SupportsEagle3" in _bases(target_cls),
        "imports": sorted(
            a.name
            for n in module.body
            if isinstance(n, ast.ImportFrom) and (n.module or "").endswith("interfaces")
            for a in n.names
            if a.name in ("EagleModelMixin", "SupportsEagle3")
        ),
        "captures": sorted(captures),
        "tuple_return": guarded_returns,
        "plain_return": ast.unparse(last),
    }


def _patched(tree: Path, patch: str, path: str) -> str:
    with scratch_worktree(tree, head_commit(tree)) as scratch:
        subprocess.run(["git", "apply", "-"], cwd=scratch, input=patch, text=True, check=True)
        return (scratch / path).read_text()


@pytest.mark.parametrize(
    ("old", "new", "target", "decoder", "filename"),
    [pytest.param(*w, id=w[2]) for w in WINDOWS],
)
def test_replay_matches_the_next_release(
    tmp_path: Path, old: str, new: str, target: str, decoder: str, filename: str
) -> None:
    tree = release_tree(old)
    out = tmp_path / "plan"
    result = propose_class(tree, target, out)
    assert result.returncode == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["status"] == "ready", plan["reason"]
    assert plan["recipe"] == "eagle3-enable"
    path = f"{MODELS}/{filename}"
    ours = eagle_lines(_patched(tree, (out / "patch.diff").read_text(), path), decoder, target)
    upstream = eagle_lines((release_tree(new) / path).read_text(), decoder, target)
    before = eagle_lines((tree / path).read_text(), decoder, target)
    assert before["captures"] == [] and not before["decoder_mixin"]  # the gap was real
    assert ours == upstream


@pytest.fixture(scope="module")
def minimax(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, str]:
    """The bot's own MiniMax-M2 plan on 0.19.1: plan.json, the model file before and after."""
    tree = release_tree("0.19.1")
    out = tmp_path_factory.mktemp("minimax") / "plan"
    result = propose_class(tree, "MiniMaxM2ForCausalLM", out)
    assert result.returncode == 0, result.stderr
    path = f"{MODELS}/minimax_m2.py"
    after = _patched(tree, (out / "patch.diff").read_text(), path)
    return json.loads((out / "plan.json").read_text()), (tree / path).read_text(), after


def published_edit(
    plan: dict, before: str, after: str, release: str, filename: str
) -> PublishedEdit:
    """The plan's edit of ``filename`` as publish sees it, over ``release``'s tree as base."""
    (edit,) = [e for e in plan["edits"] if e["path"].endswith(filename)]
    return PublishedEdit(
        path=edit["path"],
        kind=edit["kind"],
        before=before,
        after=after,
        class_name=plan["class_name"],
        finding=Finding.from_json(plan["finding"]),
        base=CheckedOutTree(release_tree(release)),
    )


def _published(plan: dict, before: str, after: str) -> PublishedEdit:
    return published_edit(plan, before, after, "0.19.1", "minimax_m2.py")


def test_publish_accepts_the_bots_own_decoder_edit(minimax: tuple[dict, str, str]) -> None:
    plan, before, after = minimax
    edit = _published(plan, before, after)
    assert edit.kind == "enable-decoder-and-declare"
    PUBLISH_RULES[edit.kind](edit)


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (
            "aux_hidden_states, idx + 1, hidden_states, residual",
            "aux_hidden_states, idx + 2, hidden_states, residual",
            "not the mixin and the aux capture",
        ),
        (
            "            return hidden_states, aux_hidden_states\n",
            "            return hidden_states, aux_hidden_states[::-1]\n",
            "not the mixin and the aux capture",
        ),
        (
            "        hidden_states, _ = self.norm(hidden_states, residual)\n",
            "        hidden_states, _ = self.norm(hidden_states * 2, residual)\n",
            "not the mixin and the aux capture",
        ),
        (
            "from .interfaces import EagleModelMixin,",
            "import os\nfrom .interfaces import EagleModelMixin,",
            "imports os",
        ),
    ],
    ids=["capture index", "reordered aux list", "stream changed", "extra import"],
)
def test_publish_refuses_a_tampered_decoder_edit(
    minimax: tuple[dict, str, str], old: str, new: str, why: str
) -> None:
    plan, before, after = minimax
    assert old in after
    edit = _published(plan, before, after.replace(old, new, 1))
    with pytest.raises(CodemodRefused, match=why):
        PUBLISH_RULES[edit.kind](edit)


def test_a_refused_decoder_on_the_newest_release_gets_no_patch(tmp_path: Path) -> None:
    """0.34.0's DoryBackbone loops over its layers three times (several forward paths), and the
    release's drafter loaders refuse it too (its decoder is self.backbone): the plan names both
    blockers, is not ready, and carries no patch."""
    out = tmp_path / "plan"
    result = propose_class(release_tree("0.34.0"), "DoryForCausalLM", out)
    assert result.returncode == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["status"] != "ready"
    assert plan["reason"].startswith("needs a human: DoryBackbone.forward loops over layers")
    assert "vllm/v1/worker/gpu/spec_decode/eagle/utils.py:140" in plan["reason"]
    assert (out / "patch.diff").read_text() == ""


def test_every_ready_decoder_edit_on_the_newest_release_is_idempotent_and_compiles() -> None:
    """The recipe's own plan for every target 0.34.0's analysis finds ready (as many as the
    README tells users): a FixPlan, whose decoder edit applied twice changes nothing the second
    time, compiles, and puts the capture in the decoder's forward only."""
    tree = release_tree("0.34.0")
    scanned = scan(tree)
    ctx = scanned.context
    found = candidates(ctx)
    ready = [c for c in found if isinstance(c.verdict, DecoderShape)]
    # What the README tells users of 0.34.0, and what `bot scan` reports as fixable.
    assert (len(found), len(ready)) == _readme_enable_counts()
    fixable = {
        (f.class_name, f.path): f
        for f in scanned.findings
        if f.recipe == "eagle3-enable" and f.evidence.refused is None
    }
    assert set(fixable) == {(c.ref.name, ctx.index.path_of(c.ref)) for c in ready}
    planned = 0
    for candidate in ready:
        path = ctx.index.path_of(candidate.captured)  # a set's inherited forward is edited once
        source = (tree / path).read_text()
        finding = fixable[candidate.ref.name, ctx.index.path_of(candidate.ref)]
        edit = _recipe_decoder_edit(scanned.findings, ctx, finding)
        assert edit.path == path, candidate.ref.name
        planned += 1
        once = edit.apply(source)
        assert once != source, candidate.ref.name
        assert edit.apply(once) == once, candidate.ref.name
        compile(once, path, "exec")
        module = ast.parse(once)
        forward = next(
            n
            for n in _class(module, candidate.captured.name).body
            if isinstance(n, ast.FunctionDef) and n.name == "forward"
        )
        calls = [
            n
            for n in ast.walk(forward)
            if isinstance(n, ast.Call) and ast.unparse(n.func) == "self._maybe_add_hidden_state"
        ]
        assert len(calls) == 2, candidate.ref.name
        assert once.count("_maybe_add_hidden_state") == source.count("_maybe_add_hidden_state") + 2
    assert planned == _readme_enable_counts()[1]


def _readme_enable_counts() -> tuple[int, int]:
    """The eagle3-enable targets the README says 0.34.0 has, and how many are ready."""
    text = " ".join((Path(__file__).parents[1] / "README.md").read_text().split())
    said = re.search(
        r"nor collects aux hidden states: (\d+) on 0\.34\.0\. For (\d+) the analysis", text
    )
    assert said is not None, "the README no longer gives the 0.34.0 eagle3-enable counts"
    return int(said[1]), int(said[2])


def _recipe_decoder_edit(
    findings: Sequence[Finding], ctx: ScanContext, finding: Finding
) -> FileEdit:
    """The decoder edit of the recipe's own plan for ``finding``, as propose would plan it (for
    a target of a set sharing a decoder, the set's plan edits the decoder's file)."""
    recipe = fixer_named(finding.recipe)
    assert recipe is not None
    plan_ctx = PlanContext(
        scan=ctx,
        group=(finding,),
        findings=tuple(findings),
        arch=finding.architectures[0],
        catalogue=load_catalogue(include_user=False),
        preferred_draft=None,
        upstream="vllm-project/vllm",
        version="0.34.0",
        base_commit="0" * 40,
    )
    fix = recipe.plan(finding, plan_ctx)
    assert isinstance(fix, FixPlan), (finding.class_name, fix)
    (edit,) = [
        e for e in fix.edits if e.kind.startswith("enable-decoder") or e.kind == SHARED_DECODER
    ]
    return edit
