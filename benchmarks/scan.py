"""Scan speed on the newest vLLM release, as ratios to a plain ast.parse of the same files.

Machines here are noisy, so every figure is a ratio to a baseline measured in the same run:
- baseline: a single-process ``ast.parse`` of every file the index covers;
- cold: ``bot scan`` work (index + recipes) with an empty cache;
- warm: the same with the cache from the cold run.
Goals: cold <= 1.0x, warm <= 0.15x. Peak memory (RSS high-water mark) is reported too.

Run: ``./dev bench`` or ``.venv/bin/python benchmarks/scan.py [--version 0.34.0] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.pipeline import scan  # noqa: E402
from bot.tree.fetch import release_tree  # noqa: E402
from bot.tree.index import model_files  # noqa: E402


def parse_files(files: list[Path]) -> float:
    """Seconds for a plain, single-process ``ast.parse`` of ``files``."""
    start = time.perf_counter()
    for path in files:
        with contextlib.suppress(SyntaxError, ValueError):
            ast.parse(path.read_bytes())
    return time.perf_counter() - start


def parse_baseline(root: Path) -> float:
    """The files the class index covers."""
    return parse_files(model_files(root))


def timed_scan(root: Path, use_cache: bool) -> float:
    start = time.perf_counter()
    scan(root, use_cache=use_cache)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.34.0")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    root = release_tree(args.version)
    files = model_files(root)
    baseline, cold, warm = [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["BOT_CACHE_DIR"] = cache
            baseline.append(parse_baseline(root))
            cold.append(timed_scan(root, use_cache=True))
            warm.append(timed_scan(root, use_cache=True))
    base = statistics.median(baseline)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"scan benchmark: vLLM {args.version}, {len(files)} files, {args.repeat} rounds")
    print(f"  baseline ast.parse   {base:6.2f} s   1.00x")
    for label, runs, goal in (("cold scan", cold, "1.0x"), ("warm scan", warm, "0.15x")):
        median = statistics.median(runs)
        print(f"  {label:<20} {median:6.2f} s   {median / base:.2f}x  (goal <= {goal})")
    print(f"  peak RSS (this process) {peak_mib:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
