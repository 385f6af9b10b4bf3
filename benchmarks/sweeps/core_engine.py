"""Sweep: a core plan's engine evidence, every affected target before and after the core fix.

Not part of ``./dev bench`` (two engine runs per plan, about two minutes each on 2 cores). The
ready plans under ``--plans`` run through ``bot engine`` twice, each time on copies of the plan
directories (the recorded checks of one run never mix with the other's):

- ``without``: the engine as installed (today's core);
- ``with``: ``bot engine --with-core CORE`` (the core plan ``--core``, made on the engine's own
  release, applied to a copy of the engine's package: bot/verify/core_overlay.py).

A plan that builds on the core must fail without it (the model patch alone turns the clear
refusal into a crash inside the core) and pass with it; a plan that builds on nothing must give
the same verdict in both (every target that passed before still passes). The table goes
between the sweep markers of ``--doc`` after every batch, so a sweep cut short still leaves what
it found.

    nice -n 10 .venv/bin/python -m benchmarks.sweeps.core_engine --plans DIR --core CORE_PLAN \\
        --work WORK [--batch 3] [--only A,B] [--doc docs/core-evidence.md] [--section loader]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.verify import BOT, ROOT, engine_of, method_cell, ready_plans

MODES = ("without", "with")


def builds_on(plan_dir: Path) -> str:
    plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
    findings = [m.get("finding") or {} for m in plan.get("members") or []] or [plan["finding"]]
    cores = {
        f"{core['recipe']}:{core['name']}"
        for f in findings
        if isinstance(core := (f.get("evidence") or {}).get("builds_on"), dict)
    }
    return ", ".join(sorted(cores))


def copies(plan_dirs: list[Path], work: Path, mode: str) -> list[Path]:
    """Each plan directory copied under ``work/mode`` (kept when it is there already)."""
    out: list[Path] = []
    for plan_dir in plan_dirs:
        dest = work / mode / plan_dir.name
        if not dest.exists():
            shutil.copytree(plan_dir, dest)
        out.append(dest)
    return out


def run_batch(plan_dirs: list[Path], core: Path | None, log: Path) -> float:
    started = time.monotonic()
    extra = ["--with-core", str(core)] if core is not None else []
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n$ bot engine {' '.join(extra)} {' '.join(d.name for d in plan_dirs)}\n")
        out.flush()
        subprocess.run(
            [*BOT, "engine", *extra, *map(str, plan_dirs)],
            cwd=ROOT,
            check=False,
            env={**os.environ, "BOT_DEBUG": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return time.monotonic() - started


def verdict(plan_dir: Path) -> tuple[str, str]:
    if not plan_dir.exists():
        return "not run", "not run"
    found = engine_of(plan_dir)
    check = found["check"]
    if check.get("detail") == "not run" and "record" not in check:
        return "not run", "not run"
    state = {True: "passed", False: "failed"}.get(check.get("passed"), "not checked")
    record = check.get("record") or {}
    cells = f"EAGLE-3: {method_cell(record, 'eagle3')}; DFlash: {method_cell(record, 'dflash')}"
    if check.get("passed") is not True:
        cells = str(check.get("detail") or "not run")
    return state, cells.replace("|", "\\|")[:400]


def table(plan_dirs: list[Path], work: Path) -> list[str]:
    lines = [
        "| class | builds on | without the core fix | with the core fix | detail (with) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for plan_dir in plan_dirs:
        without = verdict(work / "without" / plan_dir.name)
        with_core = verdict(work / "with" / plan_dir.name)
        plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
        name = plan.get("class_name") or plan.get("group")
        detail = with_core[1]
        if without[0] != "passed":
            detail += f" -- without: {without[1]}"
        lines.append(
            f"| `{name}` | {builds_on(plan_dir) or '-'} | {without[0]} | {with_core[0]} | "
            f"{detail[:700]} |"
        )
    return lines


def summary(plan_dirs: list[Path], work: Path) -> list[str]:
    """How many plans of each kind ended in each state, per mode; a plan a cut-short sweep
    never ran is counted as not run, never as a failure or a pass."""
    dependents = [d for d in plan_dirs if builds_on(d)]
    others = [d for d in plan_dirs if not builds_on(d)]

    def counts(dirs: list[Path], mode: str) -> str:
        states = [verdict(work / mode / d.name)[0] for d in dirs]
        order = ("passed", "failed", "not checked", "not run")
        return ", ".join(f"{states.count(s)} {s}" for s in order if states.count(s))

    passed_before = [d for d in others if verdict(work / "without" / d.name)[0] == "passed"]
    after = [verdict(work / "with" / d.name)[0] for d in passed_before]
    return [
        f"Plans building on the core: {len(dependents)}; without the core fix (the model patch "
        f"alone): {counts(dependents, 'without')}; with it: {counts(dependents, 'with')}.",
        f"Plans building on nothing: {len(others)}; without the core fix: "
        f"{counts(others, 'without')}; with it: {counts(others, 'with')}. Of the "
        f"{len(passed_before)} that passed without it, with it: {after.count('passed')} passed, "
        f"{after.count('failed')} failed, {after.count('not checked')} not checked, "
        f"{after.count('not run')} not run.",
    ]


def write_doc(doc: Path, section: str, lines: list[str]) -> None:
    begin, end = f"<!-- core-sweep:{section}:begin -->", f"<!-- core-sweep:{section}:end -->"
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    if begin not in text or end not in text:
        raise SystemExit(f"{doc} has no {begin} ... {end} section for the table")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(head + begin + "\n" + "\n".join(lines) + "\n" + end + tail, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plans", type=Path, required=True, help="plan directories' parent")
    parser.add_argument("--core", type=Path, required=True, help="the core plan (engine release)")
    parser.add_argument("--work", type=Path, required=True, help="where the copies run")
    parser.add_argument("--batch", type=int, default=3)
    parser.add_argument("--only", default="", help="classes to run (comma-separated)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "core-evidence.md")
    parser.add_argument("--section", default="loader")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    plan_dirs = [
        d
        for d in ready_plans(args.plans, None)
        if not only or engine_of(d)["plan"].get("class_name") in only
    ]
    if not plan_dirs:
        print("benchmarks/sweeps/core_engine.py: no ready plans", file=sys.stderr)
        return 2
    plan_dirs.sort(key=lambda d: (not builds_on(d), d.name))  # the dependents first
    args.work.mkdir(parents=True, exist_ok=True)
    log = args.work / "core-sweep.log"
    for mode in [m for m in MODES if m in args.modes.split(",")]:
        todo = copies(plan_dirs, args.work, mode)
        core = args.core if mode == "with" else None
        for start in range(0, len(todo), args.batch):
            chunk = todo[start : start + args.batch]
            seconds = run_batch(chunk, core, log)
            print(f"{mode}: {len(chunk)} plans in {seconds:.0f} s", flush=True)
            copies(plan_dirs, args.work, "with" if mode == "without" else "without")
            write_doc(
                args.doc,
                args.section,
                [*summary(plan_dirs, args.work), "", *table(plan_dirs, args.work)],
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
