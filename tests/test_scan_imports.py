"""`bot scan` stays fast from the first line: its path imports neither libcst nor GitPython.

Both cost more at startup than a warm scan's whole index load (benchmarks/scan.py measures the
command); codemods are imported where a plan is made, and HEAD is read with one `git rev-parse`.
A recipe that imports a codemod at module level fails here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.synthetic import READY_DECODER, make_tree

PROBE = """
import sys
from bot.cli import main
code = main(["scan", "--json", sys.argv[1]])
print(sorted(m for m in ("libcst", "git", "jinja2", "github") if m in sys.modules))
raise SystemExit(code)
"""


def test_scan_imports_no_codemod_or_git_library(tmp_path: Path) -> None:
    source = (
        "from torch import nn\nfrom .interfaces import EagleModelMixin, SupportsPP\n"
        + READY_DECODER.format(name="FooModel")
        + "\nclass FooForCausalLM(nn.Module, SupportsPP):\n"
        + "    def __init__(self):\n        self.model = FooModel()\n\n"
        + "    def forward(self, x):\n        return self.model(x)\n"
    )
    tree = make_tree(
        tmp_path / "tree",
        {"model_executor/models/foo.py": source},
        {"_TEXT_GENERATION_MODELS": {"FooForCausalLM": ("foo", "FooForCausalLM")}},
    )
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tree)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert '"FooForCausalLM"' in done.stdout  # the scan did run its recipes
    assert done.stdout.strip().splitlines()[-1] == "[]"
