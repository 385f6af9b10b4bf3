"""A new fix class is its own package plus its registration in ``bot/recipes/__init__.py``.

A copy of the package gains a small demonstration recipe (never shipped: it lives only in the
copy), in the form every fix class has (``bot/recipes/<fix class>/`` with its ``recipe``
module), and nothing else; run from the copy, `bot scan` reports its findings with its own
evidence line, and the generic evidence gate and grouping read its protocol members. The copy
differs from ``bot/`` in exactly the new package and the registry module.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

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


def _with_demo(dest: Path) -> Path:
    package = dest / "bot"
    shutil.copytree(BOT, package, ignore=shutil.ignore_patterns("__pycache__"))
    demo = package / "recipes" / "demo_marker"
    demo.mkdir()
    (demo / "__init__.py").write_text(DEMO_PACKAGE, encoding="utf-8")
    (demo / "recipe.py").write_text(dedent(DEMO).lstrip(), encoding="utf-8")
    registry = package / "recipes" / "__init__.py"
    text = registry.read_text(encoding="utf-8")
    marker = "RECIPES: tuple[Recipe, ...] = (\n"
    assert text.count(marker) == 1
    registry.write_text(
        text.replace(
            marker,
            "from bot.recipes.demo_marker import recipe as demo_marker  # noqa: E402\n\n" + marker,
        ).replace(marker, marker + "    demo_marker.RECIPE,\n"),
        encoding="utf-8",
    )
    return package


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
    assert sorted(p.name for p in (package / "recipes" / "demo_marker").iterdir()) == [
        "__init__.py",
        "recipe.py",
    ]
    tree = make_tree(
        tmp_path / "tree",
        {"model_executor/models/demo.py": "class DemoForCausalLM:  # DEMO-MARKER\n    pass\n"},
        {TEXT: {"DemoForCausalLM": ("demo", "DemoForCausalLM")}},
    )
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
            timeout=120,
        )

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
