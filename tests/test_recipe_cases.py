"""Runs every registered recipe's own cases (bot/recipes/cases.py), Fixit-style.

The cases are found through the recipe registry, never listed here. A valid case goes the
whole way on a small synthetic git tree: detect, plan, apply with propose's do-no-harm checks
(round trip, confinement, the tree's ruff, the re-scan), then every file of the patch through
the recipe's publish rule for its edit kind, the base tree scanned from the unpatched
checkout as publish scans the base commit. An invalid case alters one file of a valid case's
patched result and the rule must refuse it with its reason; a quiet case is a tree the recipe
must report nothing in. A recipe registered without cases fails.
"""

from __future__ import annotations

import ast
import subprocess
from dataclasses import dataclass
from pathlib import Path

import git
import pytest

from bot.base_tree import CheckedOutTree
from bot.codemods.base import CodemodRefused
from bot.drafts import load_catalogue
from bot.propose.proposal import apply_fix
from bot.recipes import RECIPES, Declined, Finding, PlanContext, Recipe, fixes
from bot.recipes.base import PublishedEdit
from bot.recipes.cases import PACKAGE_TEST_TEXT, Invalid, Quiet, SyntheticTree, Valid
from bot.recipes.eagle3_interface import cases as interface_cases
from bot.scan.findings import scan
from bot.subprocess_env import minimal_env
from tests.synthetic import make_tree

RUFF_SETTINGS = "[tool.ruff]\nline-length = 88\n"
IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@invalid",
}


def _each(recipe: Recipe) -> list[tuple[Recipe, Valid | Invalid | Quiet]]:
    cases = recipe.cases
    if cases is None:
        return []
    return [(recipe, case) for case in (*cases.valid, *cases.invalid, *cases.quiet)]


_ALL = [pair for recipe in RECIPES for pair in _each(recipe)]
VALID = [(r, c) for r, c in _ALL if isinstance(c, Valid)]
INVALID = [(r, c) for r, c in _ALL if isinstance(c, Invalid)]
QUIET = [(r, c) for r, c in _ALL if isinstance(c, Quiet)]


def _ids(cases: list[tuple[Recipe, Valid | Invalid | Quiet]]) -> list[str]:
    return [f"{recipe.name}: {case.name}" for recipe, case in cases]


def build(tree: SyntheticTree, root: Path) -> Path:
    """The skeleton (tests/synthetic.py) with the case's files, committed to a git repository."""
    models = {p.removeprefix("vllm/"): t for p, t in tree.files.items() if p.startswith("vllm/")}
    make_tree(root, models, {k: dict(v) for k, v in tree.registry.items()})
    for rel, text in tree.appended.items():
        (root / rel).write_text((root / rel).read_text() + text)
    others = {p: t for p, t in tree.files.items() if not p.startswith("vllm/")}
    for rel, text in {"pyproject.toml": RUFF_SETTINGS, **others}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    repo = git.Repo.init(root, initial_branch="main")
    repo.git.add("--all")
    repo.git.commit("-q", "--no-gpg-sign", "-m", "base", env=IDENTITY)
    repo.close()
    return root


def reported(recipe: Recipe, root: Path, class_name: str) -> list[Finding]:
    return [
        f
        for f in scan(root, use_cache=False).findings
        if f.recipe == recipe.name and f.class_name == class_name
    ]


@dataclass(frozen=True)
class Published:
    """A valid case's patch as publish sees it: each changed file, its kind and texts."""

    finding: Finding
    base: CheckedOutTree
    edits: dict[str, tuple[str, str, str]]  # path -> (kind, before, after)
    patch: str


_APPLIED: dict[tuple[str, str], Published] = {}


def applied(recipe: Recipe, case: Valid, tmp: Path) -> Published:
    """Detect, plan and apply ``case`` (once per session: invalid cases reuse it)."""
    key = (recipe.name, case.name)
    if key in _APPLIED:
        return _APPLIED[key]
    root = build(case.tree, tmp / "base")
    result = scan(root, use_cache=False)
    (finding,) = [
        f for f in result.findings if f.recipe == recipe.name and f.class_name == case.class_name
    ]
    assert case.reports in finding.summary
    assert fixes(recipe)
    ctx = PlanContext(
        scan=result.context,
        group=(finding,),
        findings=result.findings,
        arch=next(iter(finding.architectures), ""),
        catalogue=load_catalogue(include_user=False),
        preferred_draft=None,
        upstream="vllm-project/vllm",
        version=None,
        base_commit="0" * 40,
    )
    fix = recipe.plan(finding, ctx)
    assert not isinstance(fix, Declined), fix.reason
    head = git.Repo(root).head.commit.hexsha
    done = apply_fix(root, head, fix, result.findings)
    patched = tmp / "patched"
    git.Repo.clone_from(str(root), str(patched)).close()
    subprocess.run(
        ["git", "apply"], input=done.patch, text=True, cwd=patched, check=True, env=minimal_env()
    )
    edits = {
        e.path: (
            e.kind,
            "" if e.creates else (root / e.path).read_text(),
            (patched / e.path).read_text(),
        )
        for e in done.edits
    }
    _APPLIED[key] = Published(finding, CheckedOutTree(root), edits, done.patch)
    return _APPLIED[key]


def publish_check(recipe: Recipe, published: Published, path: str, after: str) -> None:
    """What ``bot publish`` asks of one changed file: its kind's rule, on the base text."""
    assert fixes(recipe)
    kind, before, _ = published.edits[path]
    finding = published.finding
    edit = PublishedEdit(
        path,
        kind,
        before,
        after,
        finding.class_name,
        finding.to_json(),
        published.base,
        tuple(sorted(published.edits)),
    )
    recipe.publish_rules[kind](edit)


@pytest.mark.parametrize(("recipe", "case"), VALID, ids=_ids(VALID))
def test_valid(recipe: Recipe, case: Valid, tmp_path: Path) -> None:
    if not fixes(recipe):
        (finding,) = reported(recipe, build(case.tree, tmp_path / "base"), case.class_name)
        assert case.reports in finding.summary
        return
    published = applied(recipe, case, tmp_path)
    for path, (_, _, after) in published.edits.items():
        publish_check(recipe, published, path, after)
    kinds = {kind for kind, _, _ in published.edits.values()}
    for required in recipe.required_edit_kinds:  # "a|b": either kind
        assert set(required.split("|")) & kinds, required
    added = {line[1:] for line in published.patch.splitlines() if line.startswith("+")}
    for line in case.adds:
        assert line in added, line
    for text in case.omits:
        assert not any(text in line for line in added), text


@pytest.mark.parametrize(("recipe", "case"), INVALID, ids=_ids(INVALID))
def test_invalid(recipe: Recipe, case: Invalid, tmp_path: Path) -> None:
    published = applied(recipe, case.valid, tmp_path)
    _, _, after = published.edits[case.path]
    old, new = case.replace
    assert after.count(old) == 1, f"the case's text is not once in the patched {case.path}"
    with pytest.raises((CodemodRefused, SyntaxError, ValueError)) as refused:
        publish_check(recipe, published, case.path, after.replace(old, new))
    assert case.refuses in str(refused.value)


@pytest.mark.parametrize(("recipe", "case"), QUIET, ids=_ids(QUIET))
def test_quiet(recipe: Recipe, case: Quiet, tmp_path: Path) -> None:
    assert reported(recipe, build(case.tree, tmp_path / "base"), case.class_name) == []


def test_every_recipe_carries_its_cases() -> None:
    """A fixing recipe: a valid case and an invalid one for its publish rules; a recipe that
    only reports: a valid case and a quiet one."""
    for recipe in RECIPES:
        cases = recipe.cases
        assert cases is not None, f"{recipe.name} is registered without cases"
        assert cases.valid, f"{recipe.name} has no valid case"
        other = cases.invalid if fixes(recipe) else cases.quiet
        assert other, f"{recipe.name} has no {'invalid' if fixes(recipe) else 'quiet'} case"
        for case in cases.invalid:
            assert case.valid in cases.valid, f"{case.name}: not one of {recipe.name}'s valid cases"


# A platform package (vllm/models/k/{nvidia,amd}/model.py, chosen at import time): only the amd
# class lacks the interface, so its regression test imports that variant. The model package's
# test file has three top-level statements, so the gap after each one is its own.
_PLATFORM_INIT = """
from vllm.platforms import current_platform

if current_platform.is_rocm():
    from .amd.model import KForCausalLM
else:
    from .nvidia.model import KForCausalLM
"""
_K_IMPORTS = (
    "from torch import nn\n\n"
    "from vllm.model_executor.models.interfaces import EagleModelMixin, SupportsPP\n"
)
_K_MODEL = _K_IMPORTS + interface_cases.READY_DECODER.replace("Foo", "K")
_K_TARGET = interface_cases.TARGET.replace("Foo", "K")
_K_TEST = "tests/models/k/test_eagle3.py"
_K_TEST_MIDDLE = "    assert supports_eagle3 is not None\n"  # the body of the middle statement
AMD_VARIANT = Valid(
    "the amd variant of a platform package lacks the declaration",
    SyntheticTree(
        files={
            "vllm/models/__init__.py": "",
            "vllm/models/k/__init__.py": _PLATFORM_INIT,
            "vllm/models/k/nvidia/__init__.py": "",
            "vllm/models/k/nvidia/model.py": _K_MODEL.replace(
                "EagleModelMixin, SupportsPP", "EagleModelMixin, SupportsEagle3, SupportsPP"
            )
            + _K_TARGET.replace("SupportsPP):", "SupportsPP, SupportsEagle3):"),
            "vllm/models/k/amd/__init__.py": "",
            "vllm/models/k/amd/model.py": _K_MODEL + _K_TARGET,
            "tests/models/__init__.py": "",
            _K_TEST: PACKAGE_TEST_TEXT
            + "\n\ndef test_helper_is_callable():\n    assert callable(supports_eagle3)\n",
        },
        registry={interface_cases.TEXT: {"KForCausalLM": ("vllm.models.k", "KForCausalLM")}},
    ),
    "KForCausalLM",
)


def _interface_recipe() -> Recipe:
    (recipe,) = [r for r in RECIPES if r.name == "eagle3-interface"]
    return recipe


def test_a_platform_variants_own_regression_test_passes_the_publish_rule(tmp_path: Path) -> None:
    recipe = _interface_recipe()
    published = applied(recipe, AMD_VARIANT, tmp_path)
    assert published.finding.path == "vllm/models/k/amd/model.py"
    assert "+def test_k_for_causal_lm_amd_advertises_eagle3_support():" in published.patch
    for path, (_, _, after) in published.edits.items():
        publish_check(recipe, published, path, after)


def test_a_comment_planted_in_a_middle_statement_of_the_test_file_is_refused(
    tmp_path: Path,
) -> None:
    # The AST cannot see a comment: only the line ranges (the gap after each statement of the
    # base file, where the new test may go) refuse it.
    recipe = _interface_recipe()
    published = applied(recipe, AMD_VARIANT, tmp_path)
    _, before, after = published.edits[_K_TEST]
    assert len(ast.parse(before).body) == 3 and before.count(_K_TEST_MIDDLE) == 1
    planted = after.replace(_K_TEST_MIDDLE, _K_TEST_MIDDLE.rstrip("\n") + "  # planted\n")
    with pytest.raises(CodemodRefused, match="outside the intended lines"):
        publish_check(recipe, published, _K_TEST, planted)
