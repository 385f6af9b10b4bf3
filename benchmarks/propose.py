"""`bot propose --dry-run` on the seed case, as a ratio to a plain ast.parse of the same tree.

Both are measured in the same run (machines here are noisy). Goal: <= 1.5x of parsing the tree
(every .py file of the vLLM checkout). The ratio to parsing only the model packages (what the
scan indexes, a much smaller baseline) is printed too. The propose run is the whole command in a
fresh process (scan, triage, scratch worktree, libcst edits, ruff checks, re-scan, write-up),
once with empty caches and once warm.

Run: ``./dev bench`` or ``.venv/bin/python benchmarks/propose.py [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.scan import parse_baseline, parse_files  # noqa: E402
from bot.tree.fetch import release_tree  # noqa: E402

ISSUE = ROOT / "bot" / "data" / "example_issue.json"


def timed_propose(tree: Path, out: Path, env: dict[str, str]) -> float:
    command = [sys.executable, "-m", "bot", "propose", "--issue", "33329"]
    command += ["--issue-file", str(ISSUE), "--repo", str(tree), "--dry-run", "--out", str(out)]
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, capture_output=True, cwd=ROOT)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tree = release_tree("0.23.0")
    every_file = sorted(p for p in tree.rglob("*.py") if ".git" not in p.parts)
    baseline, models, cold, warm = [], [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as scratch:
            env = {**os.environ, "BOT_CACHE_DIR": scratch}
            baseline.append(parse_files(every_file))
            models.append(parse_baseline(tree))
            cold.append(timed_propose(tree, Path(scratch) / "cold", env))
            warm.append(timed_propose(tree, Path(scratch) / "warm", env))
    base, model_base = statistics.median(baseline), statistics.median(models)
    print(f"propose benchmark: seed issue on vLLM 0.23.0, {args.repeat} rounds")
    print(f"  baseline ast.parse, whole tree ({len(every_file)} files)  {base:6.2f} s   1.00x")
    print(f"  ast.parse, model packages only        {model_base:6.2f} s")
    for label, runs in (("propose, cold caches", cold), ("propose, warm caches", warm)):
        median = statistics.median(runs)
        print(
            f"  {label:<38} {median:6.2f} s   {median / base:.2f}x  (goal <= 1.5x); "
            f"{median / model_base:.2f}x of the model packages"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
