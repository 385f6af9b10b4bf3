"""The tests a plan contributes, and the scope of its declarations, on the real 0.34.0 tree.

- eagle3-enable plans on a tree with tests/AGENTS.md (0.34.0) carry the test through LLM, no
  stand-in; the forward test on stand-ins (what older trees get) is still re-derived whole by
  publish, which refuses anything else (a tampered assertion, an existing file).
- a platform variant is imported from its own module (KimiLinear's amd variant), and an
  architecture the tree's ``test_registry_imports`` skips off its platform keeps that skip
  (Dots3Note).
- wrappers whose code pins the text architecture (PaliGemma, Glm4v) get what their pinned
  language models call for; subclasses a declaration reaches are named in the write-up.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from pathlib import Path
from typing import Any

import pytest

from bot.base_tree import CheckedOutTree
from bot.codemods.aux_forward_test import aux_test_path, new_aux_test_file
from bot.codemods.base import CodemodRefused
from bot.codemods.llm_target_test import LLM_TEST_PATH, llm_test_node_id
from bot.codemods.regression_test import platform_skip
from bot.errors import BotError
from bot.plan import Plan, PlanDir
from bot.propose.proposal import proposal_for
from bot.publish.checks import FileChange, check_confined
from bot.recipes.base import PublishedEdit
from bot.recipes.eagle3_enable.publish import aux_forward_test
from bot.scan.findings import scan
from bot.tree.fetch import release_tree

MIXTRAL = "vllm.model_executor.models.mixtral"


@functools.cache
def _enable_findings() -> dict[str, dict[str, Any]]:
    """0.34.0's eagle3-enable findings as plan.json carries them, by class."""
    found = scan(release_tree("0.34.0")).findings
    return {f.class_name: f.to_json() for f in found if f.recipe == "eagle3-enable"}


def _plan_finding(target: str) -> dict[str, Any]:
    return copy.deepcopy(_enable_findings()[target])


def _mixtral_finding() -> dict[str, Any]:
    return _plan_finding("MixtralForCausalLM")


def _test_text(residual: str = "residual-stream") -> str:
    return new_aux_test_file(
        module=MIXTRAL,
        decoder="MixtralModel",
        target="MixtralForCausalLM",
        residual=residual,
        norm="norm",
    )


@functools.cache
def _base() -> CheckedOutTree:
    """0.34.0 as publish sees a base tree: every field of the test is read from it."""
    return CheckedOutTree(release_tree("0.34.0"))


def _edit(after: str, before: str = "", path: str | None = None) -> PublishedEdit:
    return PublishedEdit(
        path or aux_test_path(MIXTRAL),
        "aux-forward-test",
        before,
        after,
        "MixtralForCausalLM",
        _mixtral_finding(),
        _base(),
    )


def test_publish_accepts_exactly_the_forward_test_the_recipe_writes() -> None:
    aux_forward_test(_edit(_test_text()))


_NEW_SHAPES = {
    # explicit-add: the pair's stand-in, the decoder sums it; the layer call's `idx=idx`
    "HYV3ForCausalLM": dict(
        module="vllm.model_executor.models.hy_v3",
        decoder="HYV3Model",
        residual="explicit-add",
        norm="norm",
        layer_params=("positions", "hidden_states", "residual", "idx"),
    ),
    # `getattr(self.config, "llama_4_scaling", None)`: an empty stand-in config
    "AXK1ForCausalLM": dict(
        module="vllm.model_executor.models.AXK1",
        decoder="AXK1Model",
        residual="residual-stream",
        norm="norm",
        config_defaults=("llama_4_scaling",),
        layer_params=("positions", "hidden_states", "residual", "llama_4_scaling"),
    ),
    # the same layer call in both branches of `if not layer._is_no_op_attention:`
    "DeciLMForCausalLM": dict(
        module="vllm.model_executor.models.nemotron_nas",
        decoder="DeciModel",
        residual="residual-stream",
        norm="norm",
        layer_flags=("_is_no_op_attention",),
    ),
}
_FLAGS = (
    "    for tap, layer in enumerate(model.layers):  # each branch of the loop's if runs\n"
    "        layer._is_no_op_attention = tap >= 2\n"
)


@pytest.mark.parametrize("target", sorted(_NEW_SHAPES))
def test_publish_derives_the_new_shapes_forward_tests_from_the_base(target: str) -> None:
    """Publish re-derives every field from the base scan: the test the recipe writes for an
    explicit-add decoder, for a config read with a default and for a loop branching on a layer
    flag passes; one without the empty config or the flags (the forward would read a
    stand-in's missing attribute) is refused."""
    fields = {**_NEW_SHAPES[target], "target": target}
    module = str(fields["module"])
    text = new_aux_test_file(**fields)  # type: ignore[arg-type]
    finding = _plan_finding(target)

    def edit(after: str) -> PublishedEdit:
        path = aux_test_path(module)
        return PublishedEdit(path, "aux-forward-test", "", after, target, finding, _base())

    aux_forward_test(edit(text))
    tampered = (
        text.replace("    model.config = SimpleNamespace()\n", "")
        .replace(", idx):", "):")
        .replace(_FLAGS, "")
    )
    assert tampered != text
    with pytest.raises(CodemodRefused, match="not the one the recipe writes"):
        aux_forward_test(edit(tampered))


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (lambda t: t.replace("7.0 + tap", "7.0 + tap * 0"), "not the one the recipe writes"),
        (lambda t: t + "\nimport os\n", "not the one the recipe writes"),
        (lambda t: _test_text("no-residual"), "not the one the recipe writes"),
        (lambda t: t.replace("model.norm = AddNorm()", "model.norm = 1"), "not the one the"),
        (lambda t: t.replace("model.norm = AddNorm()", "model.ln_f = AddNorm()"), "not the one"),
    ],
)
def test_publish_refuses_a_changed_forward_test(change, refusal: str) -> None:
    with pytest.raises(CodemodRefused, match=refusal):
        aux_forward_test(_edit(change(_test_text())))


def test_the_residual_semantics_come_from_the_tree_not_the_plan() -> None:
    """A plan that records Mixtral's decoder as no-residual, with the test written for that:
    the test would pass for a capture that drops the residual. Refused (the tree says
    residual-stream)."""
    finding = _mixtral_finding()
    finding["evidence"]["shape"]["residual"] = "no-residual"
    tampered = dataclasses.replace(_edit(_test_text("no-residual")), finding=finding)
    with pytest.raises(CodemodRefused, match="not the one the recipe writes"):
        aux_forward_test(tampered)


def test_publish_refuses_the_forward_test_over_an_existing_file_or_elsewhere() -> None:
    with pytest.raises(CodemodRefused, match="new file"):
        aux_forward_test(_edit(_test_text(), before="import torch\n"))
    with pytest.raises(CodemodRefused, match="not where the recipe puts it"):
        aux_forward_test(_edit(_test_text(), path="tests/models/test_mixtral.py"))


def test_the_registry_imports_skip_is_read_from_the_tree() -> None:
    source = (release_tree("0.34.0") / "tests/models/test_registry.py").read_text()
    assert platform_skip(source, "Dots3NoteForCausalLM") == (
        "not current_platform.is_cuda()",
        '"Dots3 NOTE is only supported on CUDA"',
    )
    assert platform_skip(source, "MixtralForCausalLM") is None


@pytest.fixture(scope="module")
def scanned_0_34_0():
    return scan(release_tree("0.34.0"), use_cache=True)


def _propose(scanned, class_name: str):
    from bot.drafts import load_catalogue

    return proposal_for(
        release_tree("0.34.0"),
        scanned,
        triage=None,
        issue=None,
        class_name=class_name,
        upstream="vllm-project/vllm",
        catalogue=load_catalogue(),
    )


# What tests/AGENTS.md bans in a contributed test: stand-ins and patched methods.
_BANNED = ("SimpleNamespace", "MagicMock", "__new__", "monkeypatch.setattr")


def test_enable_plan_contributes_its_test_through_llm(scanned_0_34_0) -> None:
    """0.34.0 has tests/AGENTS.md: the test goes through LLM (the V1 Spec Decode step runs
    it), never on stand-in layers."""
    proposal = _propose(scanned_0_34_0, "MixtralForCausalLM")
    plan = proposal.plan
    assert plan.status == "ready", plan.reason
    assert f"diff --git a/{LLM_TEST_PATH} b/{LLM_TEST_PATH}\nnew file mode 100644\n" in (
        proposal.patch
    )
    assert '+    "MixtralForCausalLM": "norm",\n' in proposal.patch
    assert plan.tests["engine"] == [llm_test_node_id("MixtralForCausalLM")]
    assert "tests/model_executor/" not in proposal.patch
    added = [line for line in proposal.patch.splitlines() if line.startswith("+")]
    assert not [line for line in added if any(b in line for b in _BANNED)]
    assert "Not proven by this PR's tests" in proposal.pr_markdown


@pytest.mark.parametrize(
    "target", ["FalconH1ForCausalLM", "HyperCLOVAXForCausalLM", "AXK1ForCausalLM"]
)
def test_what_a_stand_in_had_to_model_needs_nothing_through_llm(
    scanned_0_34_0, target: str
) -> None:
    """Stream multipliers and config reads the stand-in test set by hand: through LLM the real
    model reads its real config; the plan is ready without them."""
    proposal = _propose(scanned_0_34_0, target)
    assert proposal.plan.status == "ready", proposal.plan.reason
    assert f'+    "{target}": "' in proposal.patch  # with its decoder's final norm
    assert "SimpleNamespace" not in proposal.patch


def test_amd_variant_is_imported_directly(scanned_0_34_0) -> None:
    proposal = _propose(scanned_0_34_0, "KimiLinearForCausalLM")
    assert proposal.plan.tests["cpu"] == [
        "tests/models/kimi_k3/test_eagle3.py::"
        "test_kimi_linear_for_causal_lm_amd_advertises_eagle3_support"
    ]
    assert "+    from vllm.models.kimi_k3.amd import linear\n" in proposal.patch
    assert "+    assert supports_eagle3(linear.KimiLinearForCausalLM)\n" in proposal.patch


def test_dots3_note_keeps_the_trees_cuda_skip(scanned_0_34_0) -> None:
    patch = _propose(scanned_0_34_0, "Dots3NoteForCausalLM").patch
    assert "+                not current_platform.is_cuda(),\n" in patch
    assert '+                reason="Dots3 NOTE is only supported on CUDA",\n' in patch


@pytest.mark.parametrize(
    ("wrapper", "pinned", "waits_for"),
    [
        (
            "PaliGemmaForConditionalGeneration",
            "GemmaForCausalLM, Gemma2ForCausalLM",
            ("GemmaForCausalLM, Gemma2ForCausalLM", "Gemma2ForCausalLM"),
        ),
        (
            "Glm4vForConditionalGeneration",
            "Glm4ForCausalLM, Glm4MoeForCausalLM",
            ("Glm4MoeForCausalLM", "Glm4MoeForCausalLM"),
        ),
    ],
)
def test_pinned_wrappers_wait_for_their_language_models(
    scanned_0_34_0, wrapper: str, pinned: str, waits_for: tuple[str, str]
) -> None:
    plan = _propose(scanned_0_34_0, wrapper).plan
    assert plan.status != "ready"
    assert f"pins the language model to {pinned}" in plan.reason
    language_models, plan_of = waits_for
    assert f"depends on the fix for {language_models} first" in plan.reason
    assert plan.reason.endswith(f"the plan(s) it depends on: {plan_of} (eagle3-enable)")
    assert wrapper not in {f.class_name for f in scanned_0_34_0.findings}


def test_a_wrapper_over_a_language_model_being_enabled_names_that_plan(scanned_0_34_0) -> None:
    plan = _propose(scanned_0_34_0, "Gemma3ForConditionalGeneration").plan
    assert plan.status != "ready"
    assert plan.reason.endswith("the plan(s) it depends on: Gemma3ForCausalLM (eagle3-enable)")


@pytest.mark.parametrize(
    ("wrapper", "reached", "kind"),
    [
        ("Qwen2VLForConditionalGeneration", "JinaVLForSequenceClassification", "pooling"),
        ("VoxtralForConditionalGeneration", "VoxtralRealtimeGeneration", "streaming"),
        ("Step3VLForConditionalGeneration", "Step5ForConditionalGeneration", "generation"),
    ],
)
def test_subclasses_a_declaration_reaches_are_named(
    scanned_0_34_0, wrapper: str, reached: str, kind: str
) -> None:
    proposal = _propose(scanned_0_34_0, wrapper)
    assert proposal.plan.status == "ready", proposal.plan.reason
    line = next(
        line for line in proposal.pr_markdown.splitlines() if line.startswith(f"  - `{reached}`")
    )
    assert f", {kind}): " in line


def _enable_plan_dir(tmp_path: Path, kind: str) -> PlanDir:
    plan = Plan(
        status="ready",
        reason="",
        recipe="eagle3-enable",
        class_name="MixtralForCausalLM",
        finding=_mixtral_finding(),
        edits=[{"path": aux_test_path(MIXTRAL), "kind": kind, "description": ""}],
    )
    return PlanDir(plan=plan, patch="", pr_markdown="", path=tmp_path)


def test_publish_takes_a_new_file_only_for_a_kind_that_rederives_it(tmp_path: Path) -> None:
    created = FileChange(
        aux_test_path(MIXTRAL), "A", "000000", "100644", b"", _test_text().encode(), _base()
    )
    check_confined(_enable_plan_dir(tmp_path, "aux-forward-test"), [created])
    with pytest.raises(BotError, match="only edits existing files"):
        check_confined(_enable_plan_dir(tmp_path, "regression-test"), [created])
    executable = FileChange(created.path, "A", "000000", "100755", b"", created.after)
    with pytest.raises(BotError, match="only edits existing files"):
        check_confined(_enable_plan_dir(tmp_path, "aux-forward-test"), [executable])


def test_enabling_a_pinned_language_model_lets_its_wrapper_follow(scanned_0_34_0) -> None:
    """Glm4v pins Glm4 and Glm4Moe: enabling Glm4Moe makes Glm4v a wrapper finding, the plan
    that follows from it (issue: dependent plans are ordered), not harm the re-scan refuses."""
    proposal = _propose(scanned_0_34_0, "Glm4MoeForCausalLM")
    assert proposal.plan.status == "ready", proposal.plan.reason
    follows = next(line for line in proposal.pr_markdown.splitlines() if "pin their" in line)
    assert "`Glm4vForConditionalGeneration`" in follows
    assert "in code to `Glm4MoeForCausalLM`" in follows
    assert "`PaliGemmaForConditionalGeneration`" not in proposal.pr_markdown  # not Glm4Moe's


KIMI_VL = "vllm.model_executor.models.kimi_vl"
LLAVA_NEXT = "vllm.model_executor.models.llava_next"
DOTS3 = "vllm.models.dots3_note.nvidia.multimodal"
_DOTS3_SKIP = ("not current_platform.is_cuda()", '"Dots3 NOTE is only supported on CUDA"')


def _wrapper_edit(module: str, class_name: str, after: str, before: str = "") -> PublishedEdit:
    from bot.codemods.wrapper_forward_test import wrapper_test_path

    path = module.replace(".", "/") + ".py"
    return PublishedEdit(
        wrapper_test_path(module),
        "wrapper-forward-test",
        before,
        after,
        class_name,
        {"class": class_name, "module": module, "path": path},
        _base(),
    )


def _wrapper_test(module: str, wrapper: str, **fields: object) -> str:
    from bot.codemods.wrapper_forward_test import new_wrapper_test_file

    return new_wrapper_test_file(
        module=module, wrapper=wrapper, attribute="language_model", **fields
    )


@pytest.mark.parametrize(
    ("module", "wrapper", "fields"),
    [
        (KIMI_VL, "KimiVLForConditionalGeneration", {}),
        (DOTS3, "Dots3NoteForCausalLM", {"skip": _DOTS3_SKIP}),
    ],
)
def test_publish_accepts_exactly_the_forwarding_test_the_wrapper_recipe_writes(
    module: str, wrapper: str, fields: dict[str, object]
) -> None:
    from bot.recipes.eagle3_wrapper.publish import wrapper_forward_test

    wrapper_forward_test(_wrapper_edit(module, wrapper, _wrapper_test(module, wrapper, **fields)))


_GUARDED = _wrapper_test(
    LLAVA_NEXT, "LlavaNextForConditionalGeneration", guard_error="RuntimeError"
)


@pytest.mark.parametrize(
    ("module", "wrapper", "text", "refusal"),
    [
        # a runtime wrapper on 0.34.0 builds on the core-eagle3-forwarding plan: it adds no
        # method, so it contributes no forwarding test (the guarded form's rules run on the
        # wrapper recipe's cases, a tree whose defaults cannot be rewritten)
        (
            LLAVA_NEXT,
            "LlavaNextForConditionalGeneration",
            _GUARDED,
            "writes no forwarding test",
        ),
        (
            KIMI_VL,
            "KimiVLForConditionalGeneration",
            _wrapper_test(KIMI_VL, "KimiVLForConditionalGeneration").replace(
                "== (1, 3)", "is not None"
            ),
            "not the one the recipe writes",
        ),
        # the tree's CUDA skip dropped, or the test skipped everywhere
        (DOTS3, "Dots3NoteForCausalLM", _wrapper_test(DOTS3, "Dots3NoteForCausalLM"), "not the"),
        (
            DOTS3,
            "Dots3NoteForCausalLM",
            _wrapper_test(DOTS3, "Dots3NoteForCausalLM", skip=("True", '"x"')),
            "not the one",
        ),
        # an interface-only wrapper adds no method: no forwarding test to contribute
        (
            "vllm.model_executor.models.qwen2_vl",
            "Qwen2VLForConditionalGeneration",
            _wrapper_test("vllm.model_executor.models.qwen2_vl", "Qwen2VLForConditionalGeneration"),
            "writes no forwarding test",
        ),
        (MIXTRAL, "MixtralForCausalLM", _test_text(), "not one eagle3-wrapper finding"),
    ],
)
def test_publish_refuses_a_changed_forwarding_test(
    module: str, wrapper: str, text: str, refusal: str
) -> None:
    from bot.recipes.eagle3_wrapper.publish import wrapper_forward_test

    with pytest.raises(CodemodRefused, match=refusal):
        wrapper_forward_test(_wrapper_edit(module, wrapper, text))


def test_publish_refuses_the_forwarding_test_over_an_existing_file_or_elsewhere() -> None:
    from bot.recipes.eagle3_wrapper.publish import wrapper_forward_test

    edit = _wrapper_edit(
        KIMI_VL,
        "KimiVLForConditionalGeneration",
        _wrapper_test(KIMI_VL, "KimiVLForConditionalGeneration"),
        "import os\n",
    )
    with pytest.raises(CodemodRefused, match="new file"):
        wrapper_forward_test(edit)
    moved = dataclasses.replace(edit, before="", path="tests/models/test_kimi_vl_eagle3.py")
    with pytest.raises(CodemodRefused, match="not where the recipe puts it"):
        wrapper_forward_test(moved)


def test_a_runtime_wrapper_plan_builds_on_the_forwarding_core_and_is_tested_through_llm(
    scanned_0_34_0,
) -> None:
    """0.34.0's runtime wrappers need only the declaration once SupportsEagle3's defaults
    forward (the core-eagle3-forwarding plan): no guard, no stand-in test of their own; the
    tree has tests/AGENTS.md, so the wrapper is a case of the test through LLM (no capture
    check: its language model's capture is not this fix's)."""
    proposal = _propose(scanned_0_34_0, "LlavaNextForConditionalGeneration")
    assert proposal.plan.status == "ready", proposal.plan.reason
    assert proposal.plan.finding["evidence"]["builds_on"]["recipe"] == "core-eagle3-forwarding"
    assert "tests/model_executor/" not in proposal.patch
    assert '+    "LlavaNextForConditionalGeneration": None,\n' in proposal.patch
    assert proposal.plan.tests["engine"] == [llm_test_node_id("LlavaNextForConditionalGeneration")]
    kinds = [e["kind"] for e in proposal.plan.edits]
    assert kinds[0] == "declare-interface" and kinds[-1] == "llm-test"


def test_the_base_commit_export_carries_the_registry_test(tmp_path: Path) -> None:
    """Publish's base tree holds the registry test beside vllm/ (the forwarding test's platform
    skip is read from it), and exports without it where a commit has none."""
    import git

    from bot.base_tree import REGISTRY_TEST, CommitTree
    from tests.synthetic import make_tree

    toy = {"model_executor/models/toy.py": "class ToyForCausalLM:\n    pass\n"}
    registry = {"_TEXT_GENERATION_MODELS": {"ToyForCausalLM": ("toy", "ToyForCausalLM")}}
    tree = make_tree(tmp_path / "tree", toy, registry)
    repo = git.Repo.init(tree)
    repo.git.add("-A")
    repo.git.commit("-qm", "without", "--author", "t <t@example.invalid>")
    without = repo.head.commit.hexsha
    (tree / REGISTRY_TEST).parent.mkdir(parents=True)
    (tree / REGISTRY_TEST).write_text("def test_registry_imports(model_arch):\n    pass\n")
    repo.git.add("-A")
    repo.git.commit("-qm", "with", "--author", "t <t@example.invalid>")
    for commit, has in ((repo.head.commit.hexsha, True), (without, False)):
        with CommitTree(tree / ".git", commit) as base:
            base.scan()
            assert (base.root / REGISTRY_TEST).is_file() is has
            assert (base.root / "vllm/model_executor/models/registry.py").is_file()
