"""Which findings share a plan (bot/recipes/grouping.py): by fix shape, wrappers by family,
capped."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.errors import BotError
from bot.recipes.base import Finding
from bot.recipes.eagle3_enable.evidence import EnableEvidence
from bot.recipes.eagle3_interface.evidence import AuxCollected, InterfaceEvidence, Mixin
from bot.recipes.eagle3_wrapper.evidence import LanguageModel, WrapperEvidence, WrapperForward
from bot.recipes.evidence import At, Bound, BuildsOn, Evidence, Located
from bot.recipes.grouping import INTERFACE_ONLY, group_findings, group_key


def _finding(recipe: str, name: str, shape: str | None = None, lm: str = "Qwen2ForCausalLM"):
    path = f"vllm/{name.lower()}.py"
    evidence = _evidence(recipe, Located(name, path, 1), shape, lm)
    return Finding(recipe, name, "vllm.m", path, 1, (name,), evidence, "")


def _evidence(recipe: str, where: Located, shape: str | None, lm: str) -> Evidence:
    """The record each recipe's detector makes; only the fields grouping reads matter."""
    at = At(where.path, 2)
    decoder = Bound("DemoModel", where.path, 3, attribute="self.model", assigned_at=at)
    if recipe == "eagle3-wrapper":
        assert shape is not None
        language_model = LanguageModel(
            lm, "vllm/lm.py", 1, "self.language_model", "init", at, False
        )
        forward = WrapperForward(where.path, 4, "hidden_states")
        return WrapperEvidence(where, shape, "", language_model, None, forward, (where.name,))
    if recipe == "eagle3-enable":
        return EnableEvidence(where, decoder, shape=None, refused=None)
    mixin = Mixin("DemoModel", where.path, 3, chain=("DemoModel",))
    aux = AuxCollected(where.path, 5, (6,), ())
    return InterfaceEvidence(where, decoder, mixin, aux, sibling=None)


GAP = _finding("eagle3-interface", "Glm4ForCausalLM")
WRAPPER = _finding("eagle3-wrapper", "AaaVL", "interface")
DELEGATE_A = _finding("eagle3-wrapper", "KimiVL", "delegate", "DeepseekV2ForCausalLM")
DELEGATE_B = _finding("eagle3-wrapper", "OtherVL", "delegate", "DeepseekV2ForCausalLM")
RUNTIME = _finding("eagle3-wrapper", "LlavaNext", "runtime", "text_config.architectures")
ENABLE = _finding("eagle3-enable", "Gemma2ForCausalLM")


def test_keys_follow_the_fix_shape():
    assert group_key(GAP) == group_key(WRAPPER) == INTERFACE_ONLY
    assert (
        group_key(DELEGATE_A) == group_key(DELEGATE_B) == "wrapper-delegate-DeepseekV2ForCausalLM"
    )
    assert group_key(RUNTIME) == "wrapper-runtime"
    assert group_key(ENABLE) == "eagle3-enable-Gemma2ForCausalLM"  # alone: per-class evidence


def test_groups_keep_priority_order_and_members_a_stable_order():
    groups = group_findings([ENABLE, WRAPPER, DELEGATE_B, GAP, DELEGATE_A])
    assert [g.name for g in groups] == [
        "eagle3-enable-Gemma2ForCausalLM",
        INTERFACE_ONLY,
        "wrapper-delegate-DeepseekV2ForCausalLM",
    ]
    assert [f.class_name for f in groups[1].findings] == ["Glm4ForCausalLM", "AaaVL"]
    assert [f.class_name for f in groups[2].findings] == ["KimiVL", "OtherVL"]


def test_the_cap_splits_a_group_and_none_plans_one_class_each():
    wrappers = [_finding("eagle3-wrapper", f"W{n}VL", "interface") for n in range(5)]
    groups = group_findings([GAP, *wrappers], max_size=2)
    assert [g.name for g in groups] == [
        INTERFACE_ONLY,
        f"{INTERFACE_ONLY}-2",
        f"{INTERFACE_ONLY}-3",
    ]
    assert [len(g.findings) for g in groups] == [2, 2, 2]
    assert [len(g.findings) for g in group_findings([GAP, WRAPPER], by="none")] == [1, 1]


CORE = BuildsOn("core-eagle3-forwarding", "SupportsEagle3", "vllm/interfaces.py", "needs it")
RUNTIME_AFTER_CORE = replace(
    RUNTIME,
    evidence=replace(RUNTIME.evidence, builds_on=CORE),  # type: ignore[type-var]
)
WRAPPER_AFTER_CORE = replace(
    WRAPPER,
    class_name="BbbVL",
    evidence=replace(WRAPPER.evidence, builds_on=CORE),  # type: ignore[type-var]
)
FORWARDING = Finding(
    "core-eagle3-forwarding",
    "SupportsEagle3",
    "vllm.interfaces",
    "vllm/interfaces.py",
    1,
    (),
    Evidence(Located("SupportsEagle3", "vllm/interfaces.py", 1)),
    "",
)


def test_a_group_building_on_a_core_fix_names_it_and_comes_after_it():
    groups = group_findings([RUNTIME_AFTER_CORE, GAP, WRAPPER, WRAPPER_AFTER_CORE, FORWARDING])
    by_name = {g.name: g for g in groups}
    assert by_name["wrapper-runtime"].builds_on == ("core-eagle3-forwarding:SupportsEagle3",)
    # the same shape as the interface-only members, but after the core: a group of its own
    after = by_name[f"{INTERFACE_ONLY}-after-core-eagle3-forwarding"]
    assert [f.class_name for f in after.findings] == ["BbbVL"]
    assert [f.class_name for f in by_name[INTERFACE_ONLY].findings] == [
        "Glm4ForCausalLM",
        "AaaVL",
    ]
    names = [g.name for g in groups]
    assert names.index("core-eagle3-forwarding") < names.index("wrapper-runtime")
    assert by_name[INTERFACE_ONLY].builds_on == ()


@pytest.mark.parametrize(
    ("kwargs", "error"), [({"by": "recipe"}, "--group-by"), ({"max_size": 0}, "at least 1")]
)
def test_bad_settings_are_one_line_errors(kwargs, error):
    with pytest.raises(BotError, match=error):
        group_findings([GAP], **kwargs)


def test_a_later_member_may_extend_the_registry_test_an_earlier_one_created():
    from bot.codemods.spans import TopLevelIfPresent

    span = TopLevelIfPresent("test_registry_supports_eagle3")
    source = "import x\n\n\n@m\ndef test_registry_supports_eagle3(a):\n    pass\n"
    assert span.lines(source) == [(4, 6)]
    assert span.lines("import x\n") == []


def test_a_members_new_file_is_in_its_own_commit(tmp_path) -> None:
    """A member whose edit creates a file (a wrapper's contributed test): its diff carries
    the new file, so its commit and the members' sum (patch.diff) agree."""
    import git

    from bot.propose.group import _diff_and_stage

    repo = git.Repo.init(tmp_path)
    (tmp_path / "a.py").write_text("x = 1\n")
    repo.git.add("-A")
    repo.git.commit("-qm", "base", "--author", "t <t@example.invalid>")
    (tmp_path / "a.py").write_text("x = 2\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_new.py").write_text("def test_x():\n    pass\n")
    patch = _diff_and_stage(tmp_path, ["a.py", "tests/test_new.py"])
    assert "diff --git a/tests/test_new.py b/tests/test_new.py\nnew file mode 100644\n" in patch
    assert "+def test_x():\n" in patch and "-x = 1\n+x = 2\n" in patch
    assert _diff_and_stage(tmp_path, ["a.py", "tests/test_new.py"]) == ""  # staged
