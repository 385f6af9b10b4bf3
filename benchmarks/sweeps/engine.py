"""Sweep: the engine check of every ready plan of a release, as a table in the engine note.

Not part of ``./dev bench`` (one engine import per batch and five engine starts per plan: about
two minutes a plan on 2 cores). The plans run through ``bot engine`` in batches of ``--batch``
(one engine process at a time, one vLLM import per batch); each plan's check is recorded in its
plan.json as ``bot engine`` records it. After every batch the table (class, recipe, the
engine's verdict, the EAGLE-3 and DFlash outcome or why they were not checked, the case's wall
time) is written between the sweep markers of ``--doc``, with the batches' wall times, so a
sweep cut short still leaves what it found.

    nice -n 10 .venv/bin/python -m benchmarks.sweeps.engine --plans DIR \\
        [--batch 3] [--resume] [--doc docs/engine-evidence.md]

``--resume`` skips plans that already carry a passed or failed engine check for their patch
(a "not checked" one runs again); ``--again A,B`` runs those classes again anyway.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.verify import BOT, ROOT, engine_of, ready_plans, table
from bot.content_hash import patch_hash

BEGIN = "<!-- engine-sweep:begin -->"
END = "<!-- engine-sweep:end -->"


def already_checked(plan_dir: Path) -> bool:
    plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
    recorded = plan.get("verification") or {}
    patch = (plan_dir / "patch.diff").read_text(encoding="utf-8")
    checks = recorded.get("checks") or []
    same_patch = recorded.get("patch_hash") == patch_hash(patch)
    return same_patch and any(
        c.get("name") == "engine" and c.get("passed") in (True, False) for c in checks
    )


def run_batch(plan_dirs: list[Path], log: Path) -> float:
    """``bot engine`` on the batch; its wall time in seconds (its output goes to ``log``)."""
    started = time.monotonic()
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n$ bot engine {' '.join(d.name for d in plan_dirs)}\n")
        out.flush()
        subprocess.run(
            [*BOT, "engine", *map(str, plan_dirs)],
            cwd=ROOT,
            check=False,
            env={**os.environ, "BOT_DEBUG": "1"},  # an internal error's traceback, in the log
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return time.monotonic() - started


def summary(plan_dirs: list[Path], batches: list[str]) -> list[str]:
    verdicts = [engine_of(d)["check"].get("passed") for d in plan_dirs]
    recipes = [engine_of(d)["plan"].get("recipe") for d in plan_dirs]
    enable_passed = sum(
        1
        for verdict, recipe in zip(verdicts, recipes, strict=True)
        if verdict is True and recipe == "eagle3-enable"
    )
    return [
        f"{len(plan_dirs)} ready plans: {verdicts.count(True)} passed "
        f"({enable_passed} of {recipes.count('eagle3-enable')} `eagle3-enable`), "
        f"{verdicts.count(False)} failed, {verdicts.count(None)} not checked.",
        "",
        "Batches (`bot engine` processes, one at a time): " + "; ".join(batches) + ".",
    ]


def write_doc(doc: Path, lines: list[str]) -> None:
    text = doc.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc} has no {BEGIN} ... {END} section for the table")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(head + BEGIN + "\n" + "\n".join(lines) + "\n" + END + tail, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plans", type=Path, required=True, help="plan directories' parent")
    parser.add_argument("--batch", type=int, default=3, help="plans per engine process")
    parser.add_argument("--resume", action="store_true", help="skip plans already judged")
    parser.add_argument("--again", default="", help="classes to run again (comma-separated)")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "engine-evidence.md")
    parser.add_argument("--log", type=Path, help="bot engine's output (default: beside the plans)")
    args = parser.parse_args()
    plan_dirs = ready_plans(args.plans, None)
    if not plan_dirs:
        print("benchmarks/sweeps/engine.py: no ready plans", file=sys.stderr)
        return 2
    log = args.log or args.plans / "engine-sweep.log"
    # The plans the engine check gates come first: a sweep cut short has checked them.
    plan_dirs.sort(key=lambda d: engine_of(d)["plan"].get("recipe") != "eagle3-enable")
    again = set(filter(None, args.again.split(",")))
    todo = [
        d
        for d in plan_dirs
        if engine_of(d)["plan"].get("class_name") in again
        or not (args.resume and already_checked(d))
    ]
    batches: list[str] = []
    for start in range(0, len(todo), args.batch):
        chunk = todo[start : start + args.batch]
        seconds = run_batch(chunk, log)
        imports = [engine_of(d)["check"].get("record", {}).get("import_seconds") for d in chunk]
        imported = next((f"import {s} s" for s in imports if s), "no import")
        batches.append(f"{len(chunk)} plans in {seconds:.0f} s ({imported})")
        print(f"batch {len(batches)}: {batches[-1]}", flush=True)
        write_doc(args.doc, [*summary(plan_dirs, batches), "", *table(plan_dirs)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
