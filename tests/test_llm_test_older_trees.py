"""A tree without tests/AGENTS.md (0.29.0): the stand-in forward test is its own style, and
where that test cannot be written the plan contributes the test through LLM instead (the tree
has ``vllm_runner``, the example models and a CI step that runs the file), never a refusal for
want of a generated test. Publish re-derives the choice from the base: the test through LLM is
accepted only where the stand-in cannot be written.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from bot.base_tree import CheckedOutTree
from bot.codemods.base import CodemodRefused
from bot.codemods.llm_target_test import LLM_TEST_PATH, llm_test_node_id
from bot.recipes.base import PublishedEdit
from bot.recipes.eagle3_enable.publish import PUBLISH_RULES
from bot.recipes.llm_test import AGENTS_RULES, LLM_TEST_KIND, llm_test_unavailable
from bot.scan.findings import scan
from bot.tree.fetch import release_tree

VERSION = "0.29.0"


@pytest.fixture(scope="module")
def scanned():
    assert not (release_tree(VERSION) / AGENTS_RULES).exists()
    return scan(release_tree(VERSION), use_cache=True)


def _propose(scanned, class_name: str):
    from bot.drafts import load_catalogue
    from bot.propose.proposal import proposal_for

    return proposal_for(
        release_tree(VERSION),
        scanned,
        triage=None,
        issue=None,
        class_name=class_name,
        upstream="vllm-project/vllm",
        catalogue=load_catalogue(),
    )


def _new_file(patch: str, path: str) -> str:
    """The text a patch gives a file it creates."""
    section = patch.split(f"diff --git a/{path} b/{path}\n", 1)[1].split("\ndiff --git ", 1)[0]
    hunks = section.split("\n@@ ", 1)[1].split("\n", 1)[1]
    return "".join(line[1:] + "\n" for line in hunks.splitlines() if line.startswith("+"))


@functools.cache
def _base() -> CheckedOutTree:
    return CheckedOutTree(release_tree(VERSION))


def _llm_test_edit(scanned, class_name: str, after: str, changed: tuple[str, ...]):
    (finding,) = [
        f for f in scanned.findings if f.recipe == "eagle3-enable" and f.class_name == class_name
    ]
    return PublishedEdit(
        LLM_TEST_PATH, LLM_TEST_KIND, "", after, class_name, finding, _base(), changed
    )


def test_a_decoder_whose_stand_in_cannot_be_written_gets_the_test_through_llm(scanned) -> None:
    """SarvamMLAModel.forward reads self.embedding_dropout, which a stand-in test does not set
    up: refused on 0.29.0 before; now ready, its test through LLM, which publish accepts."""
    proposal = _propose(scanned, "SarvamMLAForCausalLM")
    plan = proposal.plan
    assert plan.status == "ready", plan.reason
    assert [e.kind for e in plan.edits] == [
        "enable-decoder-and-declare",
        "regression-test",
        "llm-test",
    ]
    assert plan.tests.engine == (llm_test_node_id("SarvamMLAForCausalLM"),)
    assert plan.tests.cpu == (
        "tests/models/test_registry.py::test_registry_supports_eagle3[SarvamMLAForCausalLM]",
    )
    assert "tests/model_executor/" not in proposal.patch
    text = _new_file(proposal.patch, LLM_TEST_PATH)
    assert '    "SarvamMLAForCausalLM": "norm",\n' in text
    assert "the contributed test runs the model through LLM" in proposal.pr_markdown
    assert (
        "this tree has no tests/AGENTS.md, and its own style of test, the forward on stand-in "
        "layers, cannot be written here (no contributed forward test: SarvamMLAModel.forward "
        "reads self.embedding_dropout" in proposal.pr_markdown
    )
    assert "the patched forward on stand-in layers" not in proposal.pr_markdown

    changed = ("vllm/model_executor/models/sarvam.py",)
    rule = PUBLISH_RULES[LLM_TEST_KIND]
    rule(_llm_test_edit(scanned, "SarvamMLAForCausalLM", text, changed))
    with pytest.raises(CodemodRefused):
        tampered = text.replace('"SarvamMLAForCausalLM": "norm"', '"SarvamMLAForCausalLM": None')
        rule(_llm_test_edit(scanned, "SarvamMLAForCausalLM", tampered, changed))


def test_a_set_whose_stand_ins_cannot_be_written_shares_one_test_through_llm(scanned) -> None:
    """BailingMoeModel runs in three targets, one of them in another module (a stand-in test
    imports one module): one test through LLM lists every member."""
    proposal = _propose(scanned, "BailingMoeForCausalLM")
    assert proposal.plan.status == "ready", proposal.plan.reason
    text = _new_file(proposal.patch, LLM_TEST_PATH)
    for arch in ("BailingMoeForCausalLM", "BailingMoeV2ForCausalLM", "SarvamMoEForCausalLM"):
        assert f'    "{arch}": ' in text
    assert len(proposal.plan.tests.engine) == 3


def test_a_decoder_whose_stand_in_can_be_written_keeps_the_trees_own_test(scanned) -> None:
    """Mixtral's stand-in forward test can be written: the tree's own style, no test through
    LLM; publish refuses one for it."""
    proposal = _propose(scanned, "MixtralForCausalLM")
    assert proposal.plan.status == "ready", proposal.plan.reason
    kinds = [e.kind for e in proposal.plan.edits]
    assert "aux-forward-test" in kinds and "llm-test" not in kinds
    assert not proposal.plan.tests.engine
    sarvam = _propose(scanned, "SarvamMLAForCausalLM").patch
    text = _new_file(sarvam, LLM_TEST_PATH).replace("SarvamMLAForCausalLM", "MixtralForCausalLM")
    edit = _llm_test_edit(
        scanned, "MixtralForCausalLM", text, ("vllm/model_executor/models/mixtral.py",)
    )
    with pytest.raises(CodemodRefused, match="the tree's own tests apply"):
        PUBLISH_RULES[LLM_TEST_KIND](edit)


def test_a_tree_without_what_the_test_uses_says_so(tmp_path: Path) -> None:
    assert llm_test_unavailable(release_tree(VERSION)) is None
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text("import pytest\n")
    assert llm_test_unavailable(tmp_path) == (
        "tests/conftest.py does not have the vllm_runner fixture, which the test through LLM uses"
    )
