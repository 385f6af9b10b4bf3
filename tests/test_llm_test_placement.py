"""Where the contributed test through LLM goes on 0.34.0, and which CI step runs it.

Read from the real tree's ``.buildkite/test_areas/*.yaml`` (tests/AGENTS.md: "A test no step
selects never runs"): the V1 Spec Decode step runs ``v1/spec_decode`` for changes under
``vllm/model_executor/``; the old stand-in tests' folder, ``tests/model_executor/``, is run by
the AMD job alone; a model under ``vllm/models/<package>/`` is not in the step's dependencies,
so the plan adds it, and publish accepts exactly that addition.
"""

from __future__ import annotations

import functools

import pytest

from bot.base_tree import CheckedOutTree
from bot.codemods.base import CodemodRefused
from bot.codemods.ci_step_dependency import add_step_dependency
from bot.codemods.llm_target_test import LLM_TEST_FUNCTION, LLM_TEST_PATH
from bot.recipes.base import Declined, PublishedEdit
from bot.recipes.llm_test import (
    ci_step_dependency,
    example_arch,
    follows_agents_rules,
    llm_test_edits,
    placement,
)
from bot.tree.ci_steps import is_ci_step_file, selecting_steps
from bot.tree.fetch import release_tree

QWEN2_MOE = "vllm/model_executor/models/qwen2_moe.py"
KIMI_AMD = "vllm/models/kimi_k3/amd/linear.py"


def test_the_spec_decode_step_runs_the_llm_test_and_only_amd_runs_model_executor() -> None:
    tree = release_tree("0.34.0")
    assert follows_agents_rules(tree)
    (step,) = selecting_steps(tree, LLM_TEST_PATH, LLM_TEST_FUNCTION)
    assert step.key == "v1-spec-decode"
    assert step.covers(QWEN2_MOE) and not step.covers(KIMI_AMD)
    old = selecting_steps(tree, "tests/model_executor/test_qwen2_moe_eagle3.py", "test_x")
    assert [s.key for s in old] == ["amd-model-executor"]
    # -k filters are read: the Eagle 2 step's "not deepseek_eagle and not qwen3_eagle3"
    eagle = "tests/v1/e2e/spec_decode/eagle/test_eagle_correctness.py"
    keys = {s.key for s in selecting_steps(tree, eagle, "test_eagle_correctness_light")}
    assert "spec-decode-eagle-2-llama3-qwen-vl-other" in keys


def test_a_platform_package_model_adds_itself_to_the_step() -> None:
    tree = release_tree("0.34.0")
    planned = llm_test_edits(tree, {"KimiLinearForCausalLM": None}, [KIMI_AMD])
    assert not isinstance(planned, Declined)
    edits, node_ids, where = planned
    assert [e.kind for e in edits] == ["llm-test", "ci-step-dependency"]
    assert where.uncovered == (KIMI_AMD,)
    assert node_ids == (f"{LLM_TEST_PATH}::{LLM_TEST_FUNCTION}[KimiLinearForCausalLM]",)
    covered = llm_test_edits(tree, {"Qwen2MoeForCausalLM": "norm"}, [QWEN2_MOE])
    assert not isinstance(covered, Declined)
    assert [e.kind for e in covered[0]] == ["llm-test"]


def test_a_platform_package_model_is_proposed_with_its_steps_edit_and_verify_takes_it(
    tmp_path,
) -> None:
    # 0.34.0's FlintForCausalLM (vllm/models/flint/): a ready enablement whose proposal
    # failed ("not a Python file path inside the tree") until the YAML edit was allowed.
    from bot import pipeline
    from bot.tree.worktree import scratch_worktree
    from bot.verify import scratch

    tree = release_tree("0.34.0")
    out = tmp_path / "flint"
    plan = pipeline.propose(tree, out, class_name="FlintForCausalLM", dedupe=False)
    assert plan.status == "ready"
    patch = out / "patch.diff"
    step_hunk = "+++ b/.buildkite/test_areas/spec_decode.yaml\n"
    assert step_hunk in patch.read_text(encoding="utf-8")
    assert "+    - vllm/models/flint/model.py\n" in patch.read_text(encoding="utf-8")
    with scratch_worktree(tree, str(plan.base_commit)) as checkout:
        touched = scratch.touched_files(checkout, patch)
    assert ".buildkite/test_areas/spec_decode.yaml" in touched
    assert "vllm/models/flint/model.py" in touched
    assert is_ci_step_file(".buildkite/test_areas/spec_decode.yaml")
    for elsewhere in (".buildkite/test_areas/../x.yaml", ".buildkite/release.yaml", "setup.cfg"):
        assert not is_ci_step_file(elsewhere)


@functools.cache
def _base() -> CheckedOutTree:
    return CheckedOutTree(release_tree("0.34.0"))


def _step_edit(after: str, before: str, changed: tuple[str, ...]) -> PublishedEdit:
    base = _base()
    path = ".buildkite/test_areas/spec_decode.yaml"
    return PublishedEdit(path, "ci-step-dependency", before, after, "X", {}, base, changed)


def test_publish_accepts_exactly_the_steps_missing_model_file() -> None:
    before = (release_tree("0.34.0") / ".buildkite/test_areas/spec_decode.yaml").read_text()
    after = add_step_dependency(before, step_key="v1-spec-decode", path=KIMI_AMD)
    changed = (KIMI_AMD, LLM_TEST_PATH)
    ci_step_dependency(_step_edit(after, before, changed))
    other = add_step_dependency(before, step_key="v1-spec-decode", path="vllm/models/step5/")
    with pytest.raises(CodemodRefused, match="does not gain exactly"):
        ci_step_dependency(_step_edit(other, before, changed))
    with pytest.raises(CodemodRefused, match="needs no change"):
        ci_step_dependency(_step_edit(after, before, (QWEN2_MOE, LLM_TEST_PATH)))


def test_an_architecture_without_an_example_model_is_refused_with_the_reason() -> None:
    tree = release_tree("0.34.0")
    assert example_arch(tree, ["NoSuchForCausalLM", "Qwen2MoeForCausalLM"]) == (
        "Qwen2MoeForCausalLM"
    )
    refused = example_arch(tree, ["NoSuchForCausalLM"])
    assert isinstance(refused, Declined) and "no example model" in refused.reason


def test_placement_refuses_a_tree_without_the_test_folder(tmp_path) -> None:
    (tmp_path / "tests").mkdir()
    refused = placement(tmp_path, [QWEN2_MOE])
    assert isinstance(refused, Declined) and "tests/v1/spec_decode/" in refused.reason


def test_the_llm_test_passes_only_options_the_tree_takes_and_loads_targets_text_only() -> None:
    """Every keyword the file gives ``vllm_runner`` is a parameter of the tree's ``VllmRunner``
    or a field of its ``EngineArgs`` (what ``LLM`` takes); ``language_model_only=True`` loads a
    multimodal target without its processor and encoder (upstream's own spec-decode tests
    load multimodal targets that way: tests/v1/e2e/spec_decode/acceptance_rates/)."""
    import ast
    import re

    from bot.codemods.llm_target_test import new_llm_test_file

    tree = release_tree("0.34.0")
    conftest = (tree / "tests/conftest.py").read_text(encoding="utf-8")
    runner = conftest[conftest.index("class VllmRunner") :]
    runner = runner[runner.index("def __init__") : runner.index(") -> None:")]
    args = (tree / "vllm/engine/arg_utils.py").read_text(encoding="utf-8")
    engine_args = args[args.index("class EngineArgs") :]
    taken = set(re.findall(r"^\s+(\w+)\s*:", runner, re.M)) | set(
        re.findall(r"^    (\w+): ", engine_args, re.M)
    )
    source = new_llm_test_file({"Qwen2MoeForCausalLM": "norm"})
    (kwargs,) = [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "kwargs"
    ]
    given = {k.arg: k.value for k in kwargs.keywords}
    assert set(given) - taken == set()
    assert ast.literal_eval(given["language_model_only"]) is True
