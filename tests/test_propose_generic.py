"""Generic propose: any recipe's FixPlan goes through the same do-no-harm checks.

Small synthetic vLLM-shaped git trees; the FixPlans are built the way a recipe builds them,
with edits on files other than the finding's (a shared base class) and edits that add methods
to a class body, the two shapes the eagle3-wrapper fix needs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import git
import pytest

from bot.codemods.base import CodemodRefused
from bot.codemods.bases import append_base_class
from bot.codemods.imports import add_import_name
from bot.codemods.spans import BetweenTopLevel, ClassBody, ClassHeader, Imports, resolve
from bot.errors import BotError
from bot.propose.proposal import apply_fix
from bot.recipes import FixPlan
from bot.recipes.base import (
    FileEdit,
    FixTests,
    RegistryDecision,
    WriteUp,
    step,
)
from bot.scan.findings import scan
from tests.synthetic import READY_DECODER, dedent, make_tree

MODELS = "vllm/model_executor/models"
HEADER = """
from torch import nn

from .interfaces import EagleModelMixin, SupportsEagle3, SupportsPP
"""
BASE = """
from torch import nn

from .interfaces import SupportsPP


class FooBase(nn.Module, SupportsPP):
    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
"""
FOO = (
    HEADER
    + READY_DECODER.format(name="FooModel")
    + """

class FooForCausalLM(FooBase):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = FooModel(vllm_config=vllm_config, prefix=prefix)
"""
).replace("from .interfaces", "from .base import FooBase\nfrom .interfaces")
BAR = (
    HEADER
    + READY_DECODER.format(name="BarModel")
    + """

class BarForCausalLM(nn.Module, SupportsPP, SupportsEagle3):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = BarModel(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
"""
)
METHOD = (
    "    def get_eagle3_default_aux_hidden_state_layers(self):\n"
    "        return self.model.get_eagle3_default_aux_hidden_state_layers()\n"
)


def add_method_at_end(source: str, class_name: str, method: str) -> str:
    """A test codemod: the method appended to the class body (text-level, enough here)."""
    lines = source.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith(f"class {class_name}("))
    end = start + 1
    while end < len(lines) and (lines[end].startswith((" ", "\n")) or not lines[end].strip()):
        end += 1
    while not lines[end - 1].strip():
        end -= 1
    return "".join([*lines[:end], "\n", method, *lines[end:]])


def drop_base(source: str, class_name: str, base: str) -> str:
    """A test codemod that removes a declaration: what a harmful edit looks like."""
    return source.replace(
        f"class {class_name}(nn.Module, SupportsPP, {base}):",
        (f"class {class_name}(nn.Module, SupportsPP):"),
    )


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    root = make_tree(
        tmp_path / "tree",
        {
            "model_executor/models/base.py": BASE,
            "model_executor/models/foo.py": FOO,
            "model_executor/models/bar.py": BAR,
            "model_executor/models/odd.py": "try:\n    pass\nexcept ValueError :\n    pass\n",
            "models/__init__.py": "",
        },
        {
            "_TEXT_GENERATION_MODELS": {
                "FooForCausalLM": ("foo", "FooForCausalLM"),
                "BarForCausalLM": ("bar", "BarForCausalLM"),
            }
        },
    )
    (root / "pyproject.toml").write_text("[tool.ruff]\nline-length = 88\n")
    (root / "tests/models").mkdir(parents=True)
    (root / "tests/models/__init__.py").write_text("")
    repo = git.Repo.init(root)
    repo.git.add("-A")
    repo.git.commit("-qm", "synthetic tree", "--no-verify", author="t <t@example.invalid>")
    return root


def declare_on_base() -> FileEdit:
    return FileEdit(
        path=f"{MODELS}/base.py",
        kind="declare-interface",
        description="declare the interface on the shared base",
        steps=(
            step(add_import_name, module=".interfaces", name="SupportsEagle3"),
            step(append_base_class, class_name="FooBase", base="SupportsEagle3"),
        ),
        confined_to=(Imports(), ClassHeader("FooBase")),
    )


def add_method(confined_to: tuple) -> FileEdit:
    return FileEdit(
        path=f"{MODELS}/base.py",
        kind="delegate",
        description="forward the default aux layers to the decoder",
        steps=(step(add_method_at_end, class_name="FooBase", method=METHOD),),
        confined_to=confined_to,
    )


def fix_for(tree: Path, *edits: FileEdit) -> tuple[FixPlan, tuple]:
    findings = scan(tree, use_cache=False).findings
    foo = next(f for f in findings if f.class_name == "FooForCausalLM")
    fix = FixPlan(
        recipe=foo.recipe,
        finding=foo,
        resolves=(foo,),
        variant=None,
        edits=edits,
        tests=FixTests(),
        registry=RegistryDecision(None, "no registry entry: synthetic"),
        writeup=WriteUp(sections={}, context={}),
        commit_title="synthetic",
        issue_comment="synthetic.",
    )
    return fix, findings


def head(tree: Path) -> str:
    return git.Repo(tree).head.commit.hexsha


def test_a_fix_on_a_base_class_in_another_file_with_a_method_in_its_body(tree: Path) -> None:
    fix, findings = fix_for(tree, declare_on_base(), add_method((ClassBody("FooBase"),)))
    applied = apply_fix(tree, head(tree), fix, findings)
    assert [e.kind for e in applied.edits] == ["declare-interface", "delegate"]
    assert f"+++ b/{MODELS}/base.py" in applied.patch
    assert f"{MODELS}/foo.py" not in applied.patch
    assert "+from .interfaces import SupportsEagle3, SupportsPP" in applied.patch
    assert "+class FooBase(nn.Module, SupportsPP, SupportsEagle3):" in applied.patch
    assert "+    def get_eagle3_default_aux_hidden_state_layers(self):" in applied.patch
    # The user's tree is untouched: the edits happened in a scratch worktree.
    assert not git.Repo(tree).is_dirty(untracked_files=True)


def test_touched_lines_are_formatted_with_the_trees_own_settings(tree: Path) -> None:
    # 96 characters: fine for the bot's own ruff settings, too long for the tree's (88).
    args = "first_argument_value, second_argument_value, third_value"
    long_call = f"        return self.model.combine({args})\n"
    sloppy = f"    def combine_all(self,{args.replace(', ', ' ,', 1)}) :\n"
    assert 88 < len(long_call) - 1 <= 100
    fix, findings = fix_for(
        tree,
        declare_on_base(),
        dataclasses.replace(
            add_method((ClassBody("FooBase"),)),
            steps=(step(add_method_at_end, class_name="FooBase", method=sloppy + long_call),),
        ),
    )
    patch = apply_fix(tree, head(tree), fix, findings).patch
    assert f"+    def combine_all(self, {args}):\n" in patch
    assert f"+        return self.model.combine(\n+            {args}\n+        )\n" in patch


def test_a_method_outside_the_declared_spans_is_refused(tree: Path) -> None:
    fix, findings = fix_for(
        tree, declare_on_base(), add_method((Imports(), ClassHeader("FooBase")))
    )
    with pytest.raises(CodemodRefused, match="outside the intended lines"):
        apply_fix(tree, head(tree), fix, findings)


def test_a_fix_that_leaves_its_finding_is_refused(tree: Path) -> None:
    fix, findings = fix_for(tree, add_method((ClassBody("FooBase"),)))
    with pytest.raises(BotError, match="FooForCausalLM is still reported after the edit"):
        apply_fix(tree, head(tree), fix, findings)


def test_a_fix_that_makes_a_new_finding_appear_is_refused(tree: Path) -> None:
    harmful = FileEdit(
        path=f"{MODELS}/bar.py",
        kind="oops",
        description="drops a declaration",
        steps=(step(drop_base, class_name="BarForCausalLM", base="SupportsEagle3"),),
        confined_to=(ClassHeader("BarForCausalLM"),),
    )
    fix, findings = fix_for(tree, declare_on_base(), harmful)
    with pytest.raises(BotError, match="makes eagle3-interface report BarForCausalLM"):
        apply_fix(tree, head(tree), fix, findings)


def test_a_file_libcst_cannot_reproduce_is_not_edited(tree: Path) -> None:
    edit = dataclasses.replace(
        declare_on_base(), path=f"{MODELS}/odd.py", confined_to=(BetweenTopLevel(),)
    )
    fix, findings = fix_for(tree, edit)
    with pytest.raises(CodemodRefused, match="does not reproduce line 3 exactly"):
        apply_fix(tree, head(tree), fix, findings)


@pytest.mark.parametrize("where", ["absolute", "parent", "missing"])
def test_an_edit_outside_the_tree_or_on_a_missing_file_is_refused(tree: Path, where: str) -> None:
    outside = tree.parent / "outside.py"
    outside.write_text(BASE.lstrip())
    path = {
        "absolute": str(outside),  # pathlib: tree / "/abs" is "/abs"
        "parent": "../outside.py",
        "missing": f"{MODELS}/missing.py",
    }[where]
    fix, findings = fix_for(tree, dataclasses.replace(declare_on_base(), path=path))
    with pytest.raises(CodemodRefused):
        apply_fix(tree, head(tree), fix, findings)
    assert outside.read_text() == BASE.lstrip()


def test_an_edit_that_changes_nothing_is_left_out(tree: Path) -> None:
    unchanged = FileEdit(
        path=f"{MODELS}/bar.py",
        kind="already-there",
        description="the import is already there",
        steps=(step(add_import_name, module=".interfaces", name="SupportsEagle3"),),
        confined_to=(Imports(),),
    )
    fix, findings = fix_for(tree, unchanged, declare_on_base())
    applied = apply_fix(tree, head(tree), fix, findings)
    assert [e.kind for e in applied.edits] == ["declare-interface"]
    assert "bar.py" not in applied.patch


# -- spans -----------------------------------------------------------------------------------

SPANS_SOURCE = dedent(
    """
    import os


    class A:
        x = 1

        def f(self):
            return os


    def g():
        pass
    """
)


def test_spans_name_lines_by_what_they_are() -> None:
    assert resolve((Imports(),), SPANS_SOURCE) == [(1, 1)]
    assert resolve((ClassHeader("A"),), SPANS_SOURCE) == [(4, 4)]
    assert resolve((ClassBody("A"),), SPANS_SOURCE) == [(5, 10)]  # with its trailing blanks
    # gaps after each statement: after the import (lines 2-3), after A (9-10), after g (empty)
    assert resolve((BetweenTopLevel(),), SPANS_SOURCE) == [(2, 3), (9, 10), (13, 12)]
    with pytest.raises(CodemodRefused, match="no module-level class B"):
        resolve((ClassBody("B"),), SPANS_SOURCE)


def test_a_recipe_without_plan_is_reported_not_patched() -> None:
    from bot.recipes import RECIPES, fixer_named, fixes
    from bot.recipes.eagle3_interface.recipe import RECIPE as INTERFACE

    class DetectOnly:
        name = "detect-only"
        description = "reports, never patches"

        def detect(self, ctx: object) -> list:
            return []

    assert fixes(INTERFACE) and not fixes(DetectOnly())
    assert fixer_named("eagle3-interface") is INTERFACE
    assert fixer_named("no-such-recipe") is None
    assert {r.name for r in RECIPES if fixer_named(r.name) is None} == {
        r.name for r in RECIPES if not callable(getattr(r, "plan", None))
    }


def test_a_method_appended_to_a_class_followed_by_another_stays_in_its_body() -> None:
    from bot.codemods.safety import changed_lines_confined

    source = BASE.lstrip() + "\n\nclass Other:\n    pass\n"
    after = add_method_at_end(source, "FooBase", METHOD)
    assert METHOD in after and after.endswith("\n\nclass Other:\n    pass\n")
    changed_lines_confined(source, after, resolve((ClassBody("FooBase"),), source))
    with pytest.raises(CodemodRefused):
        changed_lines_confined(source, after, resolve((ClassBody("Other"),), source))
