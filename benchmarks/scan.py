"""Scan speed on the newest vLLM release, as ratios to a plain ast.parse of the same files.

Machines here are noisy, so every figure is a ratio to a baseline measured in the same run
(each round measures the baseline next to the runs it is compared with; medians are shown):
- baseline: a single-process ``ast.parse`` of every file the index covers;
- command cold: ``bot scan --no-cache --json TREE`` as a whole process (interpreter start,
  imports, index, every recipe, priorities, the journal write), with an empty cache;
- command warm: ``bot scan --json TREE`` again, with the cache the cold run left;
- library cold / warm: ``bot.pipeline.scan`` called in this process (index + recipes).
- with ``--history``: warm ``bot scan`` with a cache of this release alone, and again after
  the cache has also seen other releases (issue 24: the second must cost what the first does).
Goals (issue 12): command cold <= 1.0x, command warm <= 0.15x, on wall-clock time. CPU seconds
(the command's pool workers included) are shown next to them as ratios to the baseline's: on a
machine shared with other work, wall-clock time is what the scheduler left us, CPU is what we
spent. Peak memory is reported too.

The commands run with Python's bytecode cache, as an installed bot does (pip compiles it; a
checkout writes it on its first run): bot/ is compiled once, into a cache directory of this
run, before anything is timed. Without it, a shell with ``PYTHONDONTWRITEBYTECODE`` set would
compile every module of bot/ on every command (~0.1 s, a third of a warm scan).

Run: ``./dev bench`` or ``.venv/bin/python benchmarks/scan.py [--version 0.34.0] [--repeat 3]``
(``--tree DIR`` times a checkout instead of a release; ``--history`` takes releases or trees).
tests/test_bench_scan.py runs it, both ways, on two small synthetic trees.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.pipeline import scan  # noqa: E402
from bot.tree.fetch import release_tree  # noqa: E402
from bot.tree.index import model_files  # noqa: E402


def parse_files(files: list[Path], cpu: list[float] | None = None) -> float:
    """Seconds for a plain, single-process ``ast.parse`` of ``files`` (CPU seconds appended
    to ``cpu``)."""
    start, start_cpu = time.perf_counter(), time.process_time()
    for path in files:
        with contextlib.suppress(SyntaxError, ValueError):
            ast.parse(path.read_bytes())
    if cpu is not None:
        cpu.append(time.process_time() - start_cpu)
    return time.perf_counter() - start


def parse_baseline(root: Path, cpu: list[float] | None = None) -> float:
    """The files the class index covers."""
    return parse_files(model_files(root), cpu)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_scan(root: Path, use_cache: bool) -> float:
    start = time.perf_counter()
    scan(root, use_cache=use_cache)
    return time.perf_counter() - start


def compile_bot(pycache: str) -> None:
    """Compile bot/ into ``pycache``, the bytecode cache every command of this run reads."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = pycache  # the checkout stays as it is
    package = Path(__file__).resolve().parents[1] / "bot"
    command = [sys.executable, "-m", "compileall", "-q", str(package)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def timed_command(root: Path, *flags: str, cpu: list[float] | None = None) -> float:
    """Seconds for ``bot scan [flags] --json TREE`` as its own process, output discarded (its
    CPU seconds, pool workers included, appended to ``cpu``)."""
    command = [sys.executable, "-m", "bot", "scan", *flags, "--json", str(root)]
    start, start_cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bot scan failed: {done.stderr.strip()}")
    if cpu is not None:
        cpu.append(_children_cpu() - start_cpu)
    return elapsed


def cached_releases(but: str) -> list[str]:
    """The releases whose trees are in the user cache (``bot fetch``), ``but`` excepted."""
    from bot.config import cache_dir

    trees = cache_dir() / "vllm-trees"
    found = [p.name for p in trees.iterdir() if (p / "vllm").is_dir()] if trees.is_dir() else []
    return sorted(v for v in found if v != but)


def _tree(version_or_path: str) -> Path:
    path = Path(version_or_path)
    return path.resolve() if path.is_dir() else release_tree(version_or_path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.34.0")
    parser.add_argument("--tree", type=Path, help="time this vLLM tree instead of --version")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--command-only", action="store_true", help="skip the library figures")
    parser.add_argument(
        "--history",
        nargs="*",
        metavar="VERSION",
        help="also time warm scans with a cache of this release alone and after scanning these "
        "releases (or tree directories) too (no VERSION: every other release in the cache)",
    )
    parser.add_argument("--history-only", action="store_true", help="only the --history figures")
    args = parser.parse_args()
    if args.history is not None and not args.history:
        args.history = cached_releases(args.version)
    root = args.tree.resolve() if args.tree else release_tree(args.version)
    history = [_tree(v) for v in args.history or ()]  # before BOT_CACHE_DIR moves
    files = model_files(root)
    pycache = tempfile.TemporaryDirectory()
    compile_bot(pycache.name)
    keys = ("base", "cmd-cold", "cmd-warm", "cold", "warm", "warm-alone", "warm-history")
    runs: dict[str, list[float]] = {k: [] for k in keys}
    cpu: dict[str, list[float]] = {k: [] for k in keys}
    for _ in range(0 if args.history_only else args.repeat):
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as home:
            os.environ["BOT_CACHE_DIR"] = cache  # the subprocesses inherit both
            os.environ["BOT_HOME"] = home  # the command's journal write stays here
            runs["base"].append(parse_baseline(root, cpu["base"]))
            runs["cmd-cold"].append(timed_command(root, "--no-cache", cpu=cpu["cmd-cold"]))
            runs["cmd-warm"].append(timed_command(root, cpu=cpu["cmd-warm"]))
        if args.command_only:
            continue
        with tempfile.TemporaryDirectory() as cache:
            os.environ["BOT_CACHE_DIR"] = cache
            runs["cold"].append(timed_scan(root, use_cache=True))
            runs["warm"].append(timed_scan(root, use_cache=True))
    if args.history:
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as home:
                os.environ["BOT_CACHE_DIR"], os.environ["BOT_HOME"] = cache, home
                runs["base"].append(parse_baseline(root, cpu["base"]))
                timed_command(root)  # a cache of this release alone
                runs["warm-alone"].append(timed_command(root, cpu=cpu["warm-alone"]))
                for other in history:  # then the cache sees the other releases
                    timed_command(other)
                timed_command(root)
                runs["warm-history"].append(timed_command(root, cpu=cpu["warm-history"]))
    base = statistics.median(runs["base"])
    base_cpu = statistics.median(cpu["base"])
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    name = str(root) if args.tree else f"vLLM {args.version}"
    print(f"scan benchmark: {name}, {len(files)} files, {args.repeat} rounds")
    print(f"  baseline ast.parse       {base:6.2f} s   1.00x   (CPU {base_cpu:.2f} s)")
    rows = (
        ("bot scan --no-cache", "cmd-cold", "1.0x"),
        ("bot scan (warm)", "cmd-warm", "0.15x"),
        ("library scan, cold", "cold", ""),
        ("library scan, warm", "warm", ""),
        ("bot scan (warm), cache of this release alone", "warm-alone", ""),
        (f"bot scan (warm), cache after {len(args.history or ())} more", "warm-history", ""),
    )
    for label, key, goal in rows:
        if not runs[key]:
            continue
        median = statistics.median(runs[key])
        target = f"  (goal <= {goal})" if goal else ""
        spent = (
            f"   (CPU {statistics.median(cpu[key]) / base_cpu:.2f}x)"
            if cpu[key] and base_cpu > 0  # a tiny tree's parse can take no measurable CPU
            else ""
        )
        print(f"  {label:<24} {median:6.2f} s   {median / base:.2f}x{spent}{target}")
    print(f"  peak RSS: this process {peak_mib:.0f} MiB, largest command {child_mib:.0f} MiB")
    pycache.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
