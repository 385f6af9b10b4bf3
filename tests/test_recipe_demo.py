"""A new fix class is its own package plus its one registration line in ``bot/recipes/__init__.py``.

A copy of the package gains a small demonstration recipe (never shipped: it lives only in the
copy), in the form every fix class has (``bot/recipes/<fix class>/`` with its ``recipe``
module), and nothing else; run from the copy, `bot scan` reports its findings with its own
evidence line, and the generic evidence gate and grouping read its protocol members.

A second, fixing, demonstration recipe (``demo-flag``) carries what a fixing class carries, all
in its folder: its ``recipe`` (detect and plan), its codemod with its cases (``codemods.py``:
found by walking, no list names them), its publish rule, its recipe cases and its write-up
templates (``templates/``). From the copy, `bot propose` plans and patches a small synthetic
tree with it through the real propose path, and its codemod and recipe cases run as the suite
runs every recipe's. Each copy differs from ``bot/`` in exactly the new package and one line of
the registry.
"""

from __future__ import annotations

import difflib
import filecmp
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from textwrap import dedent

import git

from tests.synthetic import make_tree

BOT = Path(__file__).parents[1] / "bot"
TEXT = "_TEXT_GENERATION_MODELS"

DEMO = '''
"""Demonstration: a model file that carries a ``DEMO-MARKER`` comment (report only)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.recipes.base import Finding, Recipe, ScanContext
from bot.recipes.evidence import Evidence, Located

NAME = "demo-marker"


@dataclass(frozen=True)
class MarkerEvidence(Evidence):
    marker_line: int


class DemoMarker(Recipe):
    name = NAME
    description = "a model file that carries a DEMO-MARKER comment"
    required_checks = ("smoke",)
    engine_gated = True
    evidence_type = MarkerEvidence

    def detect(self, ctx: ScanContext) -> list[Finding]:
        found = []
        for path in sorted((ctx.root / "vllm/model_executor/models").glob("*.py")):
            lines = path.read_text(encoding="utf-8").splitlines()
            for number, line in enumerate(lines, 1):
                if "DEMO-MARKER" in line:
                    rel = str(path.relative_to(ctx.root))
                    module = rel.removesuffix(".py").replace("/", ".")
                    where = Located(path.stem, rel, 1)
                    evidence = MarkerEvidence(where, marker_line=number)
                    found.append(
                        Finding(NAME, path.stem, module, rel, number, (), evidence, "a marker")
                    )
        return found

    def evidence_line(self, finding: Finding) -> str:
        return f"marker on line {finding.evidence_as(MarkerEvidence).marker_line}"

    def group_key(self, finding: Finding) -> str:
        return "demo-markers"


RECIPE = DemoMarker()
'''

DEMO_PACKAGE = '''"""Fix class ``demo-marker``: a demonstration, never shipped."""
'''

# The fixing demonstration's folder, file by file: all it needs, nothing outside it.
DEMO_FLAG: dict[str, str] = {
    "__init__.py": r'''
"""Fix class ``demo-flag``: a demonstration that fixes, never shipped."""
''',
    "recipe.py": r'''
"""Demonstration: a registered model class that sets ``demo_broken = True``, cleared."""

from __future__ import annotations

from dataclasses import dataclass

from bot.recipes.base import (
    FileEdit,
    Finding,
    FixPlan,
    FixTests,
    PlanContext,
    Recipe,
    RegistryDecision,
    ScanContext,
    WriteUp,
    own_templates,
    step,
)
from bot.recipes.evidence import Evidence, Located
from bot.tree.index import ClassRef

NAME = "demo-flag"
EDIT = "demo-flag"
FLAG = "demo_broken"
TEMPLATES = own_templates(__name__)


@dataclass(frozen=True)
class FlagEvidence(Evidence):
    flag: str


class DemoFlag(Recipe):
    name = NAME
    description = f"a registered model class that sets {FLAG} = True"
    evidence_type = FlagEvidence
    required_edit_kinds = (EDIT,)

    def detect(self, ctx: ScanContext) -> list[Finding]:
        found: dict[ClassRef, Finding] = {}
        for entry in ctx.registry.entries:
            for ref in ctx.index.resolve(entry.module, entry.class_name):
                facts = ctx.index.class_facts(ref) if isinstance(ref, ClassRef) else None
                if ref in found or not facts:
                    continue
                if facts["class_attrs"].get(FLAG) == {"const": True}:
                    path = ctx.index.path_of(ref)
                    evidence = FlagEvidence(Located(ref.name, path, facts["line"]), FLAG)
                    summary = f"{ref.name} sets {FLAG} = True"
                    found[ref] = Finding(
                        NAME,
                        ref.name,
                        ref.module,
                        path,
                        facts["line"],
                        (entry.arch,),
                        evidence,
                        summary,
                    )
        return list(found.values())

    def evidence_line(self, finding: Finding) -> str:
        return f"sets {finding.evidence_as(FlagEvidence).flag}"

    def group_key(self, finding: Finding) -> str:
        return NAME

    def plan(self, finding: Finding, ctx: PlanContext) -> FixPlan:
        from bot.codemods.spans import ClassBody
        from bot.recipes.demo_flag.codemods import clear_flag

        edit = FileEdit(
            finding.path,
            EDIT,
            f"{finding.class_name} no longer sets {FLAG}",
            (step(clear_flag, class_name=finding.class_name),),
            (ClassBody(finding.class_name),),
        )
        return FixPlan(
            recipe=NAME,
            finding=finding,
            resolves=(finding,),
            variant=None,
            edits=(edit,),
            tests=FixTests(),
            registry=RegistryDecision(None, "a demonstration: no registry entry"),
            writeup=WriteUp.from_folder(TEMPLATES, {"flag": FLAG}),
            commit_title=f"[Demo] {finding.class_name}: clear {FLAG}",
            issue_comment=f"`{finding.class_name}` no longer sets `{FLAG}`.",
        )


RECIPE = DemoFlag()
''',
    "codemods.py": r'''
"""The codemod of fix class ``demo-flag``, with its cases (found by walking, never listed)."""

from __future__ import annotations

from functools import partial

import libcst as cst

from bot.codemods.base import Case, CodemodRefused, parse

FLAG = "demo_broken"


def clear_flag(source: str, class_name: str) -> str:
    """``<FLAG> = True`` in the body of class ``class_name`` becomes ``<FLAG> = False``."""
    module = parse(source)
    body: list[cst.BaseStatement] = []
    found = False
    for statement in module.body:
        if isinstance(statement, cst.ClassDef) and statement.name.value == class_name:
            found = True
            lines = [_cleared(line) for line in statement.body.body]
            statement = statement.with_changes(body=statement.body.with_changes(body=lines))
        body.append(statement)
    if not found:
        raise CodemodRefused(f"no class {class_name} at the top of the file")
    return module.with_changes(body=body).code


def _cleared(line: cst.BaseStatement) -> cst.BaseStatement:
    if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
        return line
    assign = line.body[0]
    if (
        isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
        and assign.targets[0].target.value == FLAG
        and isinstance(assign.value, cst.Name)
        and assign.value.value == "True"
    ):
        return line.with_changes(body=[assign.with_changes(value=cst.Name("False"))])
    return line


_FOO = partial(clear_flag, class_name="Foo")
CASES: list[Case] = [
    Case(
        "a set flag is cleared",
        _FOO,
        "class Foo:\n    demo_broken = True\n",
        "class Foo:\n    demo_broken = False\n",
    ),
    Case("a cleared flag: no change", _FOO, "class Foo:\n    demo_broken = False\n"),
    Case("no such class is refused", _FOO, "class Bar:\n    pass\n", refuses="no class Foo"),
]
''',
    "publish.py": r'''
"""What ``bot publish`` re-checks for the edit of fix class ``demo-flag``: the codemod
re-applied to the base text gives the patched file."""

from __future__ import annotations

from bot.recipes.base import PublishedEdit, PublishRule
from bot.recipes.demo_flag.codemods import clear_flag
from bot.recipes.demo_flag.recipe import EDIT
from bot.recipes.publish_rules import require_recipe_edit


def flag_cleared(edit: PublishedEdit) -> None:
    require_recipe_edit(edit.after, clear_flag(edit.before, edit.class_name))


PUBLISH_RULES: dict[str, PublishRule] = {EDIT: flag_cleared}
''',
    "cases.py": r'''
"""The cases of recipe ``demo-flag`` and its publish rule (bot/recipes/cases.py)."""

from __future__ import annotations

from bot.recipes.cases import Invalid, Quiet, RecipeCases, SyntheticTree, Valid

MODEL = "vllm/model_executor/models/flag.py"


def _tree(value: str) -> SyntheticTree:
    source = f"class FlagForCausalLM:\n    demo_broken = {value}\n"
    registry = {"_TEXT_GENERATION_MODELS": {"FlagForCausalLM": ("flag", "FlagForCausalLM")}}
    return SyntheticTree({MODEL: source}, registry)


CLEARED = Valid(
    "a set flag is cleared",
    _tree("True"),
    "FlagForCausalLM",
    reports="sets demo_broken = True",
    adds=("    demo_broken = False",),
)
CASES = RecipeCases(
    valid=(CLEARED,),
    invalid=(
        Invalid(
            "the flag set to something else",
            CLEARED,
            MODEL,
            ("demo_broken = False", "demo_broken = None"),
            refuses="not the edit the recipe makes",
        ),
    ),
    quiet=(Quiet("a cleared flag: nothing to report", _tree("False"), "FlagForCausalLM"),),
)
''',
    "templates/summary.j2": r"""
Demonstration: `{{ flag }}` is no longer set.
""",
    "templates/claims.j2": r"""
- The class no longer sets `{{ flag }}` (demonstration claim).
""",
    "templates/root_cause.j2": r"""
**Root cause.** The class set `{{ flag }}` (demonstration).
""",
}

PROBE = """
import json, sys
import bot
from bot.recipes.grouping import group_key
from bot.recipes import recipe_named
from bot.recipes.base import Finding
from bot.scan.findings import scan
from bot.publish.evidence import engine_gated, missing_evidence
from pathlib import Path

result = scan(Path(sys.argv[1]), use_cache=False)
(finding,) = [f for f in result.findings if f.recipe == "demo-marker"]
read_back = Finding.from_json(json.loads(json.dumps(finding.to_json())))
print(json.dumps({
    "read_back": [type(read_back.evidence).__name__, read_back == finding],
    "bot": bot.__file__,
    "group": group_key(finding),
    "engine_gated": engine_gated("demo-marker"),
    "missing": missing_evidence("demo-marker", []),
}))
"""


def _with_recipe(dest: Path, package: str, files: dict[str, str]) -> Path:
    """A copy of ``bot/`` at ``dest/bot`` with the fix class ``package`` (``files`` by path
    inside its folder) and its one line in the registry."""
    copy = dest / "bot"
    shutil.copytree(BOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    folder = copy / "recipes" / package
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(dedent(text).lstrip(), encoding="utf-8")
    registry = copy / "recipes" / "__init__.py"
    text = registry.read_text(encoding="utf-8")
    marker = "PACKAGES: tuple[str, ...] = (\n"
    assert text.count(marker) == 1
    registry.write_text(text.replace(marker, f'{marker}    "{package}",\n'), encoding="utf-8")
    return copy


def _with_demo(dest: Path) -> Path:
    return _with_recipe(dest, "demo_marker", {"__init__.py": DEMO_PACKAGE, "recipe.py": DEMO})


def _registry_change(copy: Path) -> list[str]:
    """The lines the copy's registry adds or removes."""
    before = (BOT / "recipes" / "__init__.py").read_text(encoding="utf-8").splitlines()
    after = (copy / "recipes" / "__init__.py").read_text(encoding="utf-8").splitlines()
    diff = difflib.unified_diff(before, after, lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def _runner(package: Path, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Runs Python with the copy ``package`` first on the path, its own cache, in ``tmp_path``."""
    env = {
        **os.environ,
        "PYTHONPATH": str(package.parent),
        "BOT_CACHE_DIR": str(tmp_path / "cache"),
    }

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    return run


def _differences(left: Path, right: Path) -> list[str]:
    """Paths (relative to ``left``/``right``) that differ or exist on one side only."""
    compared = filecmp.dircmp(left, right, ignore=["__pycache__"])
    found = [*compared.left_only, *compared.right_only, *compared.diff_files]
    for name in compared.subdirs:
        found += [f"{name}/{path}" for path in _differences(left / name, right / name)]
    return sorted(found)


def test_a_demonstration_recipe_needs_only_its_module_and_its_registration(
    tmp_path: Path,
) -> None:
    package = _with_demo(tmp_path / "copy")
    assert _differences(BOT, package) == ["recipes/__init__.py", "recipes/demo_marker"]
    assert _registry_change(package) == ['+    "demo_marker",']
    assert sorted(p.name for p in (package / "recipes" / "demo_marker").iterdir()) == [
        "__init__.py",
        "recipe.py",
    ]
    tree = make_tree(
        tmp_path / "tree",
        {"model_executor/models/demo.py": "class DemoForCausalLM:  # DEMO-MARKER\n    pass\n"},
        {TEXT: {"DemoForCausalLM": ("demo", "DemoForCausalLM")}},
    )
    run = _runner(package, tmp_path)
    table = run("-m", "bot", "scan", "--no-cache", str(tree))
    assert table.returncode == 0, table.stderr
    (row,) = [line for line in table.stdout.splitlines() if " demo-marker " in line]
    assert row.rstrip().endswith("marker on line 1")
    probe = run("-c", PROBE, str(tree))
    assert probe.returncode == 0, probe.stderr
    said = json.loads(probe.stdout)
    assert said["bot"].startswith(str(package))  # the copy ran, not the checkout
    assert said["group"] == "demo-markers"
    assert said["read_back"] == ["MarkerEvidence", True]  # its own evidence record, via JSON
    assert said["engine_gated"] is True
    assert "requires a passed smoke check" in said["missing"]


FLAGGED = "class FlagForCausalLM:\n    demo_broken = True\n"
IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@invalid",
}
# Run from the copy: its codemod's cases, found by walking as tests/test_codemods_cases.py
# walks, and its recipe cases, run as tests/test_recipe_cases.py runs every registered recipe's.
CASES_PROBE = """
import json, sys, tempfile
from pathlib import Path
import bot  # the copy, first on the path
sys.path.append(sys.argv[1])  # the checkout's tests/, after the copy
from tests import test_codemods_cases as codemods, test_recipe_cases as recipes

walked = codemods.codemod_cases()
for case in walked.get("bot.recipes.demo_flag.codemods", []):
    codemods.test_case(case)
stepped = codemods.stepped_codemods(Path(bot.__file__).parent)
ran = []
with tempfile.TemporaryDirectory() as tmp:
    for test, cases in (
        (recipes.test_valid, recipes.VALID),
        (recipes.test_invalid, recipes.INVALID),
        (recipes.test_quiet, recipes.QUIET),
    ):
        for recipe, case in cases:
            if recipe.name == "demo-flag":
                test(recipe, case, Path(tmp) / f"{len(ran)}")
                ran.append(type(case).__name__)
recipes.test_every_recipe_carries_its_cases()
print(json.dumps({
    "bot": bot.__file__,
    "codemod_cases": len(walked.get("bot.recipes.demo_flag.codemods", [])),
    "stepped": sorted(stepped.get("bot.recipes.demo_flag.codemods", [])),
    "unwalked": sorted(set(stepped) - set(walked)),
    "recipe_cases": ran,
}))
"""


def test_a_fixing_recipe_needs_only_its_folder_and_one_registration_line(tmp_path: Path) -> None:
    package = _with_recipe(tmp_path / "copy", "demo_flag", DEMO_FLAG)
    assert _differences(BOT, package) == ["recipes/__init__.py", "recipes/demo_flag"]
    assert _registry_change(package) == ['+    "demo_flag",']
    tree = make_tree(
        tmp_path / "tree",
        {"model_executor/models/flag.py": FLAGGED},
        {TEXT: {"FlagForCausalLM": ("flag", "FlagForCausalLM")}},
    )
    (tree / "pyproject.toml").write_text("[tool.ruff]\nline-length = 88\n")
    repo = git.Repo.init(tree, initial_branch="main")
    repo.git.add("--all")
    repo.git.commit("-q", "--no-gpg-sign", "-m", "base", env=IDENTITY)
    repo.close()
    run = _runner(package, tmp_path)
    out = tmp_path / "plan"
    propose = ("-m", "bot", "propose", "--class", "FlagForCausalLM", "--repo", str(tree))
    done = run(*propose, "--dry-run", "--no-dedupe", "--out", str(out))
    assert done.returncode == 0, done.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert (plan["status"], plan["recipe"]) == ("ready", "demo-flag")
    assert [e["kind"] for e in plan["edits"]] == ["demo-flag"]
    patch = (out / "patch.diff").read_text().splitlines()
    assert [line for line in patch if line[:1] in "+-" and line[:3] not in ("+++", "---")] == [
        "-    demo_broken = True",
        "+    demo_broken = False",
    ]
    pr = (out / "pr.md").read_text()
    assert pr.startswith("[Demo] FlagForCausalLM: clear demo_broken\n")
    assert "Demonstration: `demo_broken` is no longer set." in pr  # its own template
    probe = run("-c", CASES_PROBE, str(BOT.parent))
    assert probe.returncode == 0, probe.stderr
    said = json.loads(probe.stdout)
    assert said["bot"].startswith(str(package))  # the copy ran, not the checkout
    assert said["codemod_cases"] == 3 and said["stepped"] == ["clear_flag"]
    assert said["unwalked"] == []
    assert said["recipe_cases"] == ["Valid", "Invalid", "Quiet"]
