"""`bot scan` stays fast from the first line: it imports only what a scan uses.

Not libcst, GitPython, Jinja2 or PyGithub (each costs more at startup than a warm scan's whole
index load; benchmarks/scan.py measures the command), nor the stages after a scan (propose,
publish, verify, triage, the dashboard, the codemods), nor the process pool a scan starts only
to parse many files: codemods are imported where a plan is made, HEAD is read with one
`git rev-parse`. A recipe or scan module that imports one of them at module level fails here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from bot import pipeline
from bot.journal.store import Journal
from tests.synthetic import READY_DECODER, make_tree

# What a scan must not import (a name and everything below it).
NOT_ON_THE_SCAN_PATH = (
    "libcst",
    "git",
    "jinja2",
    "github",
    "bot.codemods",
    "bot.dashboard",
    "bot.github",
    "bot.propose",
    "bot.publish",
    "bot.sandbox",
    "bot.triage",
    "bot.verify",
    "concurrent.futures.process",  # the pool parses many files; a warm scan parses none
)

PROBE = """
import sys
from bot.cli import main
code = main(["scan", "--json", sys.argv[1]])
banned = sys.argv[2].split(",")
print(sorted(m for m in sys.modules if any(m == b or m.startswith(b + ".") for b in banned)))
raise SystemExit(code)
"""


def _ready_tree(tmp_path: Path) -> Path:
    source = (
        "from torch import nn\nfrom .interfaces import EagleModelMixin, SupportsPP\n"
        + READY_DECODER.format(name="FooModel")
        + "\nclass FooForCausalLM(nn.Module, SupportsPP):\n"
        + "    def __init__(self):\n        self.model = FooModel()\n\n"
        + "    def forward(self, x):\n        return self.model(x)\n"
    )
    return make_tree(
        tmp_path / "tree",
        {"model_executor/models/foo.py": source},
        {"_TEXT_GENERATION_MODELS": {"FooForCausalLM": ("foo", "FooForCausalLM")}},
    )


def test_scan_imports_only_what_a_scan_uses(tmp_path: Path) -> None:
    tree = _ready_tree(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tree), ",".join(NOT_ON_THE_SCAN_PATH)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert '"FooForCausalLM"' in done.stdout  # the scan did run its recipes
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_journal_keeps_a_checkouts_head_and_nothing_for_a_plain_tree(tmp_path: Path) -> None:
    """The scan asks git for HEAD only where the tree has a .git of its own: a checkout's
    findings carry its commit, a copy without .git and a folder inside another checkout carry
    none."""
    tree = _ready_tree(tmp_path)
    plain = tmp_path / "plain"
    shutil.copytree(tree, plain)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    subprocess.run([*git, "add", "-A"], cwd=tree, check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], cwd=tree, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True, check=True
    ).stdout.strip()
    inner = tree / "inner"
    shutil.copytree(plain, inner)  # a tree inside the checkout: git would answer for its parent
    for root, commit in ((tree, head), (plain, ""), (inner, "")):
        pipeline.scan(root, record=True)
        rows = [r for r in Journal().findings() if Path(r.tree_root) == root.resolve()]
        assert rows and {row.base_commit for row in rows} == {commit}, root.name
