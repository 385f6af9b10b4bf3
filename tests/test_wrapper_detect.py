"""eagle3-wrapper detection on small synthetic trees: each case is one way a wrapper is built."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.codemods.base import CodemodRefused
from bot.codemods.safety import changed_lines_confined
from bot.codemods.spans import AfterClassBody
from bot.drafts import load_catalogue
from bot.recipes.base import Declined, PlanContext
from bot.recipes.eagle3_wrapper.recipe import RECIPE, assess_all
from bot.scan.findings import scan_context
from tests.synthetic import READY_DECODER, make_tree

TEXT = "_TEXT_GENERATION_MODELS"
MM = "_MULTIMODAL_MODELS"
HEADER = """
from torch import nn

from .interfaces import EagleModelMixin, SupportsEagle3, SupportsMultiModal, SupportsPP
from .utils import init_vllm_registered_model
"""
LM = (
    READY_DECODER.format(name="LmModel")
    + """
class LmForCausalLM(nn.Module, SupportsPP, SupportsEagle3):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = LmModel(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
"""
)
REGISTRY = {TEXT: {"LmForCausalLM": ("lm", "LmForCausalLM")}}


def wrapper(
    name: str, build: str, returns: str, bases: str = "nn.Module, SupportsMultiModal"
) -> str:
    return f"""
class {name}({bases}):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        {build}

    def forward(self, input_ids, positions):
        hidden_states = {returns}(input_ids, positions)
        return hidden_states
"""


def wrapper_findings(tmp_path: Path, source: str, wrappers: list[str]) -> list[dict]:
    registry = {**REGISTRY, MM: {name: ("vl", name) for name in wrappers}}
    models = {"model_executor/models/lm.py": HEADER + LM, "model_executor/models/vl.py": source}
    make_tree(tmp_path, models, registry)
    from bot.scan.findings import scan

    return [f.to_json() for f in scan(tmp_path, use_cache=False).findings]


def rejections(tmp_path: Path) -> dict[str, str]:
    ctx = scan_context(tmp_path, use_cache=False)
    return {ref.name: a.reason for ref, a in assess_all(ctx).items() if a.shape is None}


VL_HEADER = HEADER + "from .lm import LmForCausalLM\n"


def test_literal_architectures_through_the_registry(tmp_path: Path) -> None:
    build = (
        "self.language_model = init_vllm_registered_model(vllm_config=vllm_config, "
        'hf_config=vllm_config.text_config, architectures=["LmForCausalLM"])'
    )
    source = VL_HEADER + wrapper("AVL", build, "self.language_model.model")
    found = wrapper_findings(tmp_path, source, ["AVL"])
    assert [(f["recipe"], f["class"]) for f in found] == [("eagle3-wrapper", "AVL")]
    evidence = found[0]["evidence"]
    assert evidence["shape"] == "interface"
    assert evidence["language_model"]["name"] == "LmForCausalLM"
    assert evidence["language_model"]["how"] == 'architectures=["LmForCausalLM"]'
    assert evidence["forward"]["returns"] == "self.language_model.model(...)"
    assert evidence["lm_decoder"]["name"] == "LmModel"


def test_helper_method_and_llm_attribute(tmp_path: Path) -> None:
    source = VL_HEADER + wrapper(
        "BVL", "self.llm = self.init_llm(vllm_config=vllm_config)", "self.llm"
    ).replace(
        "    def forward",
        "    def init_llm(self, vllm_config):\n"
        "        return LmForCausalLM(vllm_config=vllm_config)\n\n    def forward",
    )
    found = wrapper_findings(tmp_path, source, ["BVL"])
    assert [f["class"] for f in found] == ["BVL"]
    assert found[0]["evidence"]["language_model"]["attribute"] == "self.llm"
    assert found[0]["evidence"]["language_model"]["how"] == "self.init_llm()"


def test_local_then_attribute_and_forward_that_transforms_is_rejected(tmp_path: Path) -> None:
    build = (
        "lm = init_vllm_registered_model(vllm_config=vllm_config, "
        'architectures=["LmForCausalLM"])\n        self.language_model = lm'
    )
    source = VL_HEADER + wrapper("CVL", build, "self.language_model.model").replace(
        "return hidden_states", "return hidden_states * 2"
    )
    found = wrapper_findings(tmp_path, source, ["CVL"])
    assert found == []
    reason = rejections(tmp_path)["CVL"]
    assert "forward does not hand back self.language_model(...)" in reason


def test_runtime_text_config_is_reported_with_what_would_work(tmp_path: Path) -> None:
    build = (
        "self.language_model = init_vllm_registered_model("
        "vllm_config=vllm_config, hf_config=vllm_config.text_config)"
    )
    source = VL_HEADER + wrapper("DVL", build, "self.language_model.model")
    found = wrapper_findings(tmp_path, source, ["DVL"])
    assert [f["class"] for f in found] == ["DVL"]
    evidence = found[0]["evidence"]
    assert evidence["shape"] == "runtime"
    assert evidence["works_with"] == ["LmForCausalLM"]
    assert "proposed only with the tree's clear-error guard" in found[0]["summary"]


def test_family_base_gets_one_finding_for_its_wrappers(tmp_path: Path) -> None:
    build = "self.language_model = LmForCausalLM(vllm_config=vllm_config)"
    source = (
        VL_HEADER
        + wrapper("FamilyBase", build, "self.language_model.model")
        + "\n\nclass OneVL(FamilyBase):\n    pass\n\n\nclass TwoVL(FamilyBase):\n    pass\n"
    )
    found = wrapper_findings(tmp_path, source, ["OneVL", "TwoVL"])
    assert [(f["class"], f["evidence"]["covers"]) for f in found] == [
        ("FamilyBase", ["OneVL", "TwoVL"])
    ]
    assert found[0]["architectures"] == ["OneVL", "TwoVL"]


def test_no_family_fix_when_one_subclass_is_not_ready(tmp_path: Path) -> None:
    build = "self.language_model = LmForCausalLM(vllm_config=vllm_config)"
    source = (
        VL_HEADER
        + wrapper("FamilyBase", build, "self.language_model.model")
        + "\n\nclass OneVL(FamilyBase):\n    pass\n\n\nclass TwoVL(FamilyBase):\n"
        "    def forward(self, input_ids, positions):\n"
        "        return self.language_model.model(input_ids, positions)[0]\n"
    )
    found = wrapper_findings(tmp_path, source, ["OneVL", "TwoVL"])
    assert [(f["class"], f["evidence"]["covers"]) for f in found] == [("OneVL", ["OneVL"])]
    assert "TwoVL" in rejections(tmp_path)


def test_language_model_whose_decoder_does_not_collect_is_for_eagle3_enable(
    tmp_path: Path,
) -> None:
    lm = """
class PlainModel(nn.Module, EagleModelMixin):
    def forward(self, input_ids, positions):
        return input_ids


class PlainForCausalLM(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = PlainModel(vllm_config=vllm_config)

    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
"""
    build = "self.language_model = PlainForCausalLM(vllm_config=vllm_config)"
    source = VL_HEADER + lm + wrapper("EVL", build, "self.language_model")
    assert wrapper_findings(tmp_path, source, ["EVL"]) == []
    reason = rejections(tmp_path)["EVL"]
    assert "does not collect aux hidden states (eagle3-enable)" in reason


def test_get_language_model_returning_self(tmp_path: Path) -> None:
    header = VL_HEADER.replace("from .lm import LmForCausalLM", "from .lm import LmModel")
    source = header + wrapper(
        "SelfVL", "self.model = LmModel(vllm_config=vllm_config)", "self.model"
    ).replace(
        "    def forward",
        "    def get_language_model(self):\n        return self\n\n    def forward",
    )
    found = wrapper_findings(tmp_path, source, ["SelfVL"])
    assert [f["class"] for f in found] == ["SelfVL"]
    assert found[0]["evidence"]["language_model"]["attribute"] == "self"


def test_a_protocol_that_does_not_follow_get_language_model_needs_delegation(
    tmp_path: Path,
) -> None:
    build = "self.language_model = LmForCausalLM(vllm_config=vllm_config)"
    source = VL_HEADER + wrapper("OldVL", build, "self.language_model.model")
    wrapper_findings(tmp_path, source, ["OldVL"])
    interfaces = tmp_path / "vllm/model_executor/models/interfaces.py"
    text = interfaces.read_text()
    # An older protocol: the default methods look at self.model only.
    interfaces.write_text(text.replace("self.get_language_model()", "self"))
    ctx = scan_context(tmp_path, use_cache=False)
    (assessment,) = assess_all(ctx).values()
    assert assessment.shape == "delegate"
    assert "does not follow get_language_model()" in assessment.reason


def test_runtime_wrapper_is_declined_where_the_tree_has_no_guard(tmp_path: Path) -> None:
    build = (
        "self.language_model = init_vllm_registered_model("
        "vllm_config=vllm_config, hf_config=vllm_config.text_config)"
    )
    source = VL_HEADER + wrapper("DVL", build, "self.language_model.model")
    wrapper_findings(tmp_path, source, ["DVL"])
    ctx = scan_context(tmp_path, use_cache=False)
    (finding,) = RECIPE.detect(ctx)
    plan_ctx = PlanContext(
        scan=ctx,
        group=(finding,),
        findings=(finding,),
        arch="DVL",
        catalogue=load_catalogue(),
        preferred_draft=None,
        upstream="vllm-project/vllm",
        version=None,
        base_commit="0" * 40,
    )
    declined = RECIPE.plan(finding, plan_ctx)
    assert isinstance(declined, Declined)
    assert "clear-error guard" in declined.reason
    # Nor a missing-interface error to write one in the words of (a tree that has one gets a
    # guard written: eagle3_wrapper/cases.py's BEHIND_A_WRITTEN_GUARD).
    assert "neither a wrapper's guard nor a missing-interface error" in declined.reason


def test_methods_appended_to_a_class_body_may_land_after_its_blank_lines() -> None:
    before = "class A:\n    x = 1\n\n\nclass B:\n    pass\n"
    after = "class A:\n    x = 1\n\n    def f(self):\n        pass\n\n\nclass B:\n    pass\n"
    spans = AfterClassBody("A").lines(before)
    assert spans == [(3, 2), (4, 3), (5, 4)]  # insertions only, after line 2, 3 or 4
    changed_lines_confined(before, after, spans)
    with pytest.raises(CodemodRefused):
        changed_lines_confined(before, before.replace("class B:", "class C:"), spans)


def test_a_registered_subclass_that_is_not_ready_blocks_its_parents_fix(tmp_path: Path) -> None:
    build = "self.language_model = LmForCausalLM(vllm_config=vllm_config)"
    source = (
        VL_HEADER
        + wrapper("ParentVL", build, "self.language_model.model")
        + "\n\nclass ChildVL(ParentVL):\n"
        "    def forward(self, input_ids, positions):\n"
        "        return self.language_model.model(input_ids, positions)[0]\n"
    )
    assert wrapper_findings(tmp_path, source, ["ParentVL", "ChildVL"]) == []
    reason = rejections(tmp_path)["ParentVL"]
    assert reason.startswith("the declaration would also reach ChildVL, which is not ready")


def test_super_forward_hands_back_what_the_parent_does(tmp_path: Path) -> None:
    build = "self.language_model = LmForCausalLM(vllm_config=vllm_config)"
    source = (
        VL_HEADER
        + wrapper("ParentVL", build, "self.language_model.model")
        + "\n\nclass ChildVL(ParentVL):\n"
        "    def forward(self, input_ids, positions):\n"
        "        return super().forward(input_ids, positions[0])\n"
    )
    found = wrapper_findings(tmp_path, source, ["ParentVL", "ChildVL"])
    assert [(f["class"], f["evidence"]["covers"]) for f in found] == [
        ("ParentVL", ["ChildVL", "ParentVL"])
    ]
