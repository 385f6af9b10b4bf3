"""benchmarks/scan.py runs, without and with ``--history`` (issue 38: it once crashed without).

On two small synthetic trees (``--tree``, history given as a tree), one round each: the rows it
prints are there, each a ratio to the baseline. What it measures on a real release is the
note's business (and ``./dev bench``), not a test's.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.synthetic import READY_DECODER, make_tree

BENCH = Path(__file__).parents[1] / "benchmarks" / "scan.py"
TEXT = "_TEXT_GENERATION_MODELS"
MODEL = """
from torch import nn

from .interfaces import EagleModelMixin, SupportsEagle3, SupportsPP
{decoder}

class {name}ForCausalLM(nn.Module, SupportsPP):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = {name}Model(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
"""
ROW = re.compile(r"^  (?P<label>.+?)\s+\d+\.\d\d s\s+(?P<ratio>\d+\.\d\d)x", re.M)


def _tree(root: Path, name: str) -> Path:
    source = MODEL.format(decoder=READY_DECODER.format(name=f"{name}Model"), name=name)
    registry = {TEXT: {f"{name}ForCausalLM": (name.lower(), f"{name}ForCausalLM")}}
    return make_tree(root, {f"model_executor/models/{name.lower()}.py": source}, registry)


def _bench(*args: str | Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--repeat", "1", "--command-only", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return {m["label"].strip(): float(m["ratio"]) for m in ROW.finditer(done.stdout)}


def test_the_scan_benchmark_runs_without_and_with_history(tmp_path: Path) -> None:
    tree, other = _tree(tmp_path / "a", "Foo"), _tree(tmp_path / "b", "Bar")

    rows = _bench("--tree", tree)
    assert set(rows) == {"baseline ast.parse", "bot scan --no-cache", "bot scan (warm)"}
    assert rows["baseline ast.parse"] == 1.0

    rows = _bench("--tree", tree, "--history", other)
    assert {
        "bot scan (warm), cache of this release alone",
        "bot scan (warm), cache after 1 more",
    } <= set(rows)
