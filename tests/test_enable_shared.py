"""eagle3-enable for a decoder several targets share: one set, fixed together or not at all.

A synthetic tree holds the shape of 0.34.0's OpenPangu and Longcat: two targets build the same
decoder, and a third builds a subclass of it that inherits its ``forward``. The three are ready
together; the decoder file gains the mixin and the capture once and every target the interface;
publish's rules accept exactly that patch. When one member is blocked, every member is refused
and says why. The real 0.34.0 sets are proposed on the real tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.base_tree import CheckedOutTree
from bot.codemods.aux_forward_test import create_shared_aux_forward_test
from bot.codemods.base import CodemodRefused
from bot.codemods.regression_test import add_registry_eagle3_test
from bot.plan import Plan
from bot.recipes.base import Finding, PublishedEdit
from bot.recipes.eagle3_enable.evidence import EnableEvidence
from bot.recipes.eagle3_enable.publish import PUBLISH_RULES
from bot.recipes.eagle3_enable.shared import (
    SHARED_DECODER,
    SHARED_INTERFACE,
    shared_edits,
    shared_forward_tests,
    shared_set_of,
)
from bot.recipes.evidence import At, Bound, Located, SharedSet
from bot.scan.findings import scan
from bot.verify.check import Check
from bot.verify.checks import rescan_check, resolved_by
from bot.verify.smoke import set_smoke_check
from bot.verify.smoke_target import set_targets_of, target_of
from tests.synthetic import make_tree
from tests.test_enable_shapes import (
    FUSED_NORM,
    HEADER,
    ISLICE,
    LAYER_PAIR,
    PAIR_CALL,
    TEXT,
    decoder,
)

DEMO = "vllm/model_executor/models/demo.py"
NGRAM = "vllm/model_executor/models/demo_ngram.py"
TARGETS = ("DemoChatForCausalLM", "DemoForCausalLM", "DemoNgramForCausalLM")


def _target(name: str, decoder_class: str) -> str:
    return (
        f"class {name}(nn.Module, SupportsPP):\n"
        "    def __init__(self, *, vllm_config, prefix=''):\n"
        "        super().__init__()\n"
        f"        self.model = {decoder_class}(vllm_config=vllm_config, prefix=prefix)\n\n"
        "    def forward(self, input_ids, positions, intermediate_tensors=None):\n"
        "        return self.model(input_ids, positions, intermediate_tensors)\n"
    )


NGRAM_SOURCE = (
    "from torch import nn\n\n"
    "from .demo import DemoModel\n"
    "from .interfaces import SupportsPP\n\n\n"
    "class DemoNgramModel(DemoModel):\n"
    "    def __init__(self, *, vllm_config, prefix=''):\n"
    "        super().__init__(vllm_config=vllm_config, prefix=prefix)\n"
    "        self.ngram = None\n\n\n" + _target("DemoNgramForCausalLM", "DemoNgramModel")
)


def shared_tree(root: Path, *, chat_forward: str | None = None) -> Path:
    """Two targets building DemoModel in demo.py, a third building DemoNgramModel (which
    inherits DemoModel.forward) in demo_ngram.py. ``chat_forward`` replaces the forward of
    DemoChatForCausalLM (to block that one member)."""
    decoder_source = decoder(ISLICE + PAIR_CALL, FUSED_NORM)
    chat = _target("DemoChatForCausalLM", "DemoModel")
    if chat_forward is not None:
        chat = chat.replace(
            "        return self.model(input_ids, positions, intermediate_tensors)\n", chat_forward
        )
    source = (
        HEADER
        + "from vllm.distributed import get_pp_group\n"  # as OpenPangu's and Longcat's modules
        + LAYER_PAIR
        + "\n\n"
        + decoder_source
        + "\n\n"
        + _target("DemoForCausalLM", "DemoModel")
        + "\n\n"
        + chat
    )
    registry = {
        TEXT: {
            "DemoForCausalLM": ("demo", "DemoForCausalLM"),
            "DemoChatForCausalLM": ("demo", "DemoChatForCausalLM"),
            "DemoNgramForCausalLM": ("demo_ngram", "DemoNgramForCausalLM"),
        }
    }
    models = {
        "model_executor/models/demo.py": source,
        "model_executor/models/demo_ngram.py": NGRAM_SOURCE,
    }
    return make_tree(root, models, registry)


def _enable(tree: Path) -> dict[str, dict]:
    found = scan(tree, use_cache=False).findings
    return {f.class_name: f.evidence.to_json() for f in found if f.recipe == "eagle3-enable"}


def test_the_targets_sharing_a_decoder_are_ready_together(tmp_path: Path) -> None:
    evidence = _enable(shared_tree(tmp_path))
    assert set(evidence) == set(TARGETS)
    for name in TARGETS:
        assert evidence[name]["refused"] is None, evidence[name]["refused"]
        assert evidence[name]["shared"] == {
            "decoder": "DemoModel",
            "targets": list(TARGETS),
            "lead": "DemoChatForCausalLM",
            "paths": [DEMO, DEMO, NGRAM],
        }


def test_one_blocked_member_refuses_the_whole_set_naming_it(tmp_path: Path) -> None:
    blocked = "        return self.model(input_ids, positions, intermediate_tensors) * 2\n"
    evidence = _enable(shared_tree(tmp_path, chat_forward=blocked))
    own = "DemoChatForCausalLM.forward does not hand self.model's output back unchanged"
    assert own in evidence["DemoChatForCausalLM"]["refused"]
    for name in ("DemoForCausalLM", "DemoNgramForCausalLM"):
        refused = evidence[name]["refused"]
        assert refused.startswith("needs a human: DemoModel.forward runs in ")
        assert "so they are fixed together only" in refused
        assert f"DemoChatForCausalLM is refused ({own})" in refused
        assert "shared" not in evidence[name]


def test_an_inheriting_decoder_alone_stays_refused(tmp_path: Path) -> None:
    """DemoNgramModel inherits DemoModel.forward, but no target builds DemoModel itself:
    editing it would reach decoders nobody checks."""
    tree = shared_tree(tmp_path)
    registry = tree / "vllm/model_executor/models/registry.py"
    text = registry.read_text()
    for name in ("DemoForCausalLM", "DemoChatForCausalLM"):
        text = text.replace(f'    "{name}": ("demo", "{name}"),\n', "")
    registry.write_text(text)
    refused = _enable(tree)["DemoNgramForCausalLM"]["refused"]
    assert "DemoNgramModel inherits forward from DemoModel, which no target builds itself" in (
        refused
    )


def _set(tree: Path):
    context = scan(tree, use_cache=False).context
    found = shared_set_of(context, "DemoForCausalLM")
    assert found is not None
    return context, found


def test_the_model_file_edits_before_after_and_run_twice(tmp_path: Path) -> None:
    tree = shared_tree(tmp_path)
    context, found = _set(tree)
    assert found.lead.ref.name == "DemoChatForCausalLM"
    edits = {e.path: e for e in shared_edits(context, found)}
    assert {p: e.kind for p, e in edits.items()} == {DEMO: SHARED_DECODER, NGRAM: SHARED_INTERFACE}
    demo = edits[DEMO].apply((tree / DEMO).read_text())
    assert "class DemoModel(nn.Module, EagleModelMixin):" in demo
    assert demo.count("self._maybe_add_hidden_state(") == 2
    for name in ("DemoForCausalLM", "DemoChatForCausalLM"):
        assert f"class {name}(nn.Module, SupportsPP, SupportsEagle3):" in demo
    ngram = edits[NGRAM].apply((tree / NGRAM).read_text())
    assert "class DemoNgramForCausalLM(nn.Module, SupportsPP, SupportsEagle3):" in ngram
    assert "class DemoNgramModel(DemoModel):" in ngram  # inherits the mixin, not edited
    assert "_maybe_add_hidden_state" not in ngram
    # Run twice: the second run changes nothing.
    assert edits[DEMO].apply(demo) == demo
    assert edits[NGRAM].apply(ngram) == ngram
    compile(demo, DEMO, "exec")
    compile(ngram, NGRAM, "exec")


def test_the_forward_tests_one_file_per_module_one_test_per_target(tmp_path: Path) -> None:
    context, found = _set(shared_tree(tmp_path))
    planned = shared_forward_tests(context, found)
    assert not isinstance(planned, type(None))
    demo_path = "tests/model_executor/test_demo_eagle3.py"
    ngram_path = "tests/model_executor/test_demo_ngram_eagle3.py"
    assert set(planned) == {demo_path, ngram_path}
    module, tests = planned[ngram_path]
    text = create_shared_aux_forward_test("", module=module, tests=tests)
    # The inherited forward lives in demo: its module's get_pp_group is the one patched.
    assert "from vllm.model_executor.models import demo, demo_ngram\n" in text
    assert 'monkeypatch.setattr(demo, "get_pp_group", lambda: group)' in text
    assert "demo_ngram.DemoNgramModel.__new__(demo_ngram.DemoNgramModel)" in text
    assert create_shared_aux_forward_test(text, module=module, tests=tests) == text
    module, tests = planned[demo_path]
    text = create_shared_aux_forward_test("", module=module, tests=tests)
    assert text.count("@pytest.mark.cpu_test") == 2
    for name in ("demo_chat_for_causal_lm", "demo_for_causal_lm"):
        assert f"def test_{name}_collects_aux_hidden_states(" in text
    with pytest.raises(CodemodRefused, match="already exists"):
        create_shared_aux_forward_test("import torch\n", module=module, tests=tests)


class _Base:
    def __init__(self, tree: Path) -> None:
        self.context = scan(tree, use_cache=False).context

    def scan(self):
        return self.context


def _publish(
    tree: Path, path: str, kind: str, after: str, class_name: str = "DemoChatForCausalLM"
) -> None:
    (finding,) = [
        f.to_json()
        for f in scan(tree, use_cache=False).findings
        if (f.recipe, f.class_name) == ("eagle3-enable", class_name)
    ]
    before = (tree / path).read_text()
    edit = PublishedEdit(path, kind, before, after, class_name, finding, _Base(tree))
    PUBLISH_RULES[kind](edit)


def test_publish_accepts_exactly_the_sets_patch(tmp_path: Path) -> None:
    tree = shared_tree(tmp_path)
    context, found = _set(tree)
    edits = {e.path: e for e in shared_edits(context, found)}
    demo = edits[DEMO].apply((tree / DEMO).read_text())
    ngram = edits[NGRAM].apply((tree / NGRAM).read_text())
    _publish(tree, DEMO, SHARED_DECODER, demo)
    _publish(tree, NGRAM, SHARED_INTERFACE, ngram)
    # One target left undeclared: the others would carry the capture without the interface.
    partial = demo.replace(
        "class DemoForCausalLM(nn.Module, SupportsPP, SupportsEagle3):",
        "class DemoForCausalLM(nn.Module, SupportsPP):",
    )
    with pytest.raises(CodemodRefused, match="not what the recipe writes for the set"):
        _publish(tree, DEMO, SHARED_DECODER, partial)
    # Anything more in the decoder's file.
    more = demo.replace("        self.norm = RMSNorm(8)\n", "        self.norm = RMSNorm(16)\n")
    with pytest.raises(CodemodRefused):
        _publish(tree, DEMO, SHARED_DECODER, more)
    # Only a set's lead may carry the set's edits; the single-target kinds refuse its members.
    with pytest.raises(CodemodRefused, match="does not lead a set"):
        _publish(tree, DEMO, SHARED_DECODER, demo, class_name="DemoForCausalLM")
    with pytest.raises(CodemodRefused, match="not a ready eagle3-enable target"):
        _publish(tree, DEMO, "enable-decoder-and-declare", demo)


# -- the real sets of 0.34.0 ------------------------------------------------------------------

REAL_SETS = {
    "PanguUltraMoEForCausalLM": (
        "PanguEmbeddedForCausalLM",
        "OpenPanguModel",
        ("PanguEmbeddedForCausalLM", "PanguProMoEV2ForCausalLM", "PanguUltraMoEForCausalLM"),
        {"vllm/model_executor/models/openpangu.py": SHARED_DECODER},
    ),
    "LongcatFlashNgramForCausalLM": (
        "LongcatFlashForCausalLM",
        "FlashModel",
        ("LongcatFlashForCausalLM", "LongcatFlashNgramForCausalLM"),
        {
            "vllm/model_executor/models/longcat_flash.py": SHARED_DECODER,
            "vllm/model_executor/models/longcat_flash_ngram.py": SHARED_INTERFACE,
        },
    ),
}


@pytest.mark.vllm_tree
@pytest.mark.parametrize("asked", sorted(REAL_SETS))
def test_the_real_sets_of_0_34_0_are_one_plan_publish_accepts(tmp_path: Path, asked: str) -> None:
    """Asked for any member, propose writes the set's one plan (named after its lead), and the
    patch is exactly what publish's rules re-derive from the base tree."""
    from bot.codemods.llm_target_test import llm_test_node_id
    from bot.plan import read_plan_dir
    from bot.recipes.llm_test import example_arch
    from bot.tree.fetch import release_tree
    from bot.tree.worktree import head_commit, scratch_worktree
    from bot.verify import scratch
    from bot.verify.confine import confinement_check
    from tests.cli import propose_class

    lead, owner, targets, model_files = REAL_SETS[asked]
    tree = release_tree("0.34.0")
    result = propose_class(tree, asked, tmp_path / "plan")
    assert result.returncode == 0, result.stderr
    planned = read_plan_dir(tmp_path / "plan")
    plan = planned.plan
    assert (plan.status, plan.class_name) == ("ready", lead), plan.reason
    assert plan.finding["evidence"]["shared"]["targets"] == list(targets)
    kinds = {e["path"]: e["kind"] for e in plan.edits}
    assert {p: k for p, k in kinds.items() if p.startswith("vllm/")} == model_files
    assert kinds["tests/models/test_registry.py"] == "regression-test"
    for target in targets:
        assert f"class {target}(" in planned.patch
        assert f"test_registry_supports_eagle3[{target}]" in " ".join(plan.tests["cpu"])
        # tests/AGENTS.md: each member with an example model is a case of the test through LLM
        if isinstance(example_arch(tree, [target]), str):
            assert llm_test_node_id(target) in plan.tests["engine"]
    assert plan.tests["engine"]
    assert planned.patch.count(f"class {owner}(nn.Module, EagleModelMixin):") == 1
    assert f"**Fixed together.** `{owner}`'s `forward` runs under {len(targets)}" in (
        planned.pr_markdown
    )
    with scratch_worktree(tree, head_commit(tree)) as work:
        patch_file = tmp_path / "patch.diff"
        patch_file.write_text(planned.patch)
        files = scratch.touched_files(work, patch_file)
        check = confinement_check(planned, work, patch_file, files)
    assert check.passed, check.detail
    # The registry test must add exactly the set's architectures: one short, or one more.
    registry_test = "tests/models/test_registry.py"
    before = (tree / registry_test).read_text()
    rule = PUBLISH_RULES["regression-test"]
    for archs in (targets[1:], (*targets, "LlamaForCausalLM")):
        after = add_registry_eagle3_test(before, archs)
        edit = PublishedEdit(
            registry_test,
            "regression-test",
            before,
            after,
            lead,
            plan.finding,
            CheckedOutTree(tree),
        )
        with pytest.raises(CodemodRefused, match="exactly the set's architectures"):
            rule(edit)


def _snake(name: str) -> str:
    from bot.codemods.regression_test import snake_case

    return snake_case(name)


# -- verify: every member is smoke-checked and must be gone on the re-scan --------------------


def _set_plan(paths: list[str] | None = None) -> Plan:
    lead = "DemoChatForCausalLM"
    shared = SharedSet("DemoModel", TARGETS, tuple(paths or [DEMO, DEMO, NGRAM]), lead)
    decoder = Bound("DemoModel", DEMO, 1, attribute="self.model", assigned_at=At(DEMO, 2))
    evidence = EnableEvidence(Located(lead, DEMO, 3), decoder, None, None, shared)
    finding = Finding(
        "eagle3-enable", lead, DEMO.removesuffix(".py").replace("/", "."), DEMO, 3, (), evidence, ""
    ).to_json()
    edits = [
        {"path": DEMO, "kind": SHARED_DECODER, "description": ""},
        {"path": NGRAM, "kind": SHARED_INTERFACE, "description": ""},
    ]
    return Plan(
        status="draft",
        reason="",
        recipe="eagle3-enable",
        class_name="DemoChatForCausalLM",
        finding=finding,
        edits=edits,
    )


def test_verify_smoke_checks_every_member_in_a_file_the_plan_edits() -> None:
    plan = _set_plan()
    assert str(target_of(plan)) == "vllm.model_executor.models.demo:DemoChatForCausalLM"
    assert [str(t) for t in set_targets_of(plan)] == [
        "vllm.model_executor.models.demo:DemoForCausalLM",
        "vllm.model_executor.models.demo_ngram:DemoNgramForCausalLM",
    ]
    # A member said to live in a file the plan does not edit is not taken from the plan.
    elsewhere = _set_plan([DEMO, DEMO, "vllm/model_executor/models/other.py"])
    assert [t.class_name for t in set_targets_of(elsewhere)] == ["DemoForCausalLM"]


def test_the_sets_smoke_check_passes_only_when_every_member_passes() -> None:
    names = ["m:A", "m:B"]
    ok = Check("smoke", True, "values match")
    assert set_smoke_check(names, [ok, ok]).passed is True
    failed = set_smoke_check(names, [ok, Check("smoke", False, "aux values differ")])
    assert (failed.passed, failed.detail) == (False, "m:B: aux values differ")
    unchecked = set_smoke_check(names, [Check("smoke", None, "not checked: no config"), ok])
    assert (unchecked.passed, unchecked.detail) == (None, "m:A: not checked: no config")


def test_the_rescan_wants_every_member_gone() -> None:
    # A plan written before plans recorded what they resolve: the set is read from its finding.
    keys = resolved_by(_set_plan())
    assert [cls for _, cls, _ in keys] == list(TARGETS)
    assert rescan_check(keys, keys, []).passed is True
    recipe, cls, path = keys[2]
    left = Finding(recipe, cls, "demo_ngram", path, 1, (cls,), {}, "still a gap")
    still = rescan_check(keys, keys, [left])
    assert still.passed is False
    assert "DemoNgramForCausalLM (eagle3-enable) is still found" in still.detail


@pytest.mark.vllm_tree
def test_bot_scan_json_marks_the_real_sets_and_bailings_fixable_on_an_agents_tree() -> None:
    import json

    from bot.tree.fetch import release_tree
    from tests.cli import run_bot

    result = run_bot("scan", str(release_tree("0.34.0")), "--json")
    assert result.returncode == 0, result.stderr
    enable = {f["class"]: f for f in json.loads(result.stdout) if f["recipe"] == "eagle3-enable"}
    for _, _, targets, _ in REAL_SETS.values():
        for name in targets:
            assert enable[name]["priority"]["fixable"] is True, name
            assert enable[name]["evidence"]["refused"] is None
    # BailingMoe's decoder is shared too. Its members' stand-in forward tests cannot be written
    # (Sarvam builds the decoder from another module), but 0.34.0 has tests/AGENTS.md: the test
    # goes through LLM, so the set is fixable, building on the core-drafter-loader plan that
    # lifts the loaders' embedding lookup (word_embeddings).
    for name in ("BailingMoeForCausalLM", "BailingMoeV2ForCausalLM", "SarvamMoEForCausalLM"):
        assert enable[name]["priority"]["fixable"] is True, name
        assert enable[name]["evidence"]["refused"] is None, name
        assert enable[name]["evidence"]["builds_on"]["recipe"] == "core-drafter-loader", name
