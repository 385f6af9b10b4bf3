"""Verify speed over a release's ready plans, with the engine check, as a ratio to one plan.

- baseline: ``bot verify PLAN --gpu skip`` on the first plan alone (a whole process: the local
  checks, the smoke check and the engine check with its own engine import);
- batch: ``bot verify PLAN... --gpu skip`` on every plan at once (one engine process for all).
The batch's wall time is reported, and its ratio to the baseline (N plans verified one at a
time would be about N x). ``--engine-only`` times ``bot engine`` instead (only the engine
check), which is what the table in docs/engine-evidence.md was made with; ``--table FILE``
writes that table (every plan's EAGLE-3 and DFlash outcome, or why it was not checked).

``--engine-cost`` also times ``bot verify PLAN --gpu skip --no-engine`` on the first plan, so
the engine's cost for one plan is the difference to the baseline, in the same run; every
plan's share in the batch (the import once, then its case) comes from the records.

Plans come from ``--plans DIR`` (plan directories from ``bot propose``; only ready ones are
used). Not part of ``./dev bench``'s default: a release's ready plans take hours on 2 cores
(about 2 minutes each for the engine check alone on this machine).

Run: ``.venv/bin/python benchmarks/verify.py --plans plans/ [--engine-only] [--engine-cost]
[--limit N]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BOT = [sys.executable, "-m", "bot"]


def ready_plans(directory: Path, limit: int | None) -> list[Path]:
    found = []
    for plan_json in sorted(directory.glob("*/plan.json")):
        plan = json.loads(plan_json.read_text(encoding="utf-8"))
        if plan.get("status") == "ready":
            found.append(plan_json.parent)
    return found[:limit] if limit else found


def timed(command: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(command, cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def engine_of(plan_dir: Path) -> dict[str, Any]:
    plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
    checks = (plan.get("verification") or {}).get("checks") or []
    found = next((c for c in checks if c.get("name") == "engine"), None)
    return {"plan": plan, "check": found or {"passed": None, "detail": "not run"}}


def method_cell(record: dict[str, Any], method: str) -> str:
    runs = {(r.get("tree"), r.get("method")): r for r in record.get("runs") or []}
    before, after = runs.get(("before", method)), runs.get(("after", method))
    if not before or not after:
        return "-"
    refused = "refused" if before.get("outcome") == "load_error" else str(before.get("outcome"))
    if after.get("outcome") != "ok":
        return f"before {refused}; after {after.get('outcome')}"
    same = "identical" if after.get("identical_to_no_speculation") else "DIFFERENT"
    return (
        f"before {refused}; after {same}, {after.get('accepted')}/{after.get('proposed')} "
        f"accepted, {after.get('seconds')} s"
    )


def table(plan_dirs: list[Path]) -> list[str]:
    lines = [
        "| class | recipe | engine | EAGLE-3 | DFlash | case wall time | detail |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for plan_dir in plan_dirs:
        found = engine_of(plan_dir)
        plan, check = found["plan"], found["check"]
        record = check.get("record") or {}
        state = {True: "passed", False: "failed"}.get(check.get("passed"), "not checked")
        detail = str(check.get("detail") or "").replace("|", "\\|")
        if check.get("passed") is True:
            detail = str(record.get("config_note") or "-").replace("|", "\\|")
        seconds = f"{record.get('seconds')} s" if record.get("seconds") is not None else "-"
        name, recipe = f"`{plan.get('class_name')}`", plan.get("recipe")
        if plan.get("group"):
            members = plan.get("members") or []
            name = f"group `{plan['group']}` ({len(members)} classes)"
            recipe = ", ".join(sorted({str(m.get("recipe")) for m in members}))
        lines.append(
            f"| {name} | {recipe} | {state} | "
            f"{method_cell(record, 'eagle3')} | {method_cell(record, 'dflash')} | "
            f"{seconds} | {detail[:300]} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plans", type=Path, required=True)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--engine-only", action="store_true")
    parser.add_argument("--no-baseline", action="store_true", help="only the batch")
    parser.add_argument("--table", type=Path, help="write the markdown table here")
    parser.add_argument(
        "--engine-cost", action="store_true", help="also one plan without the engine check"
    )
    args = parser.parse_args()
    plan_dirs = ready_plans(args.plans, args.limit)
    if not plan_dirs:
        print("benchmarks/verify.py: no ready plans", file=sys.stderr)
        return 2
    command = [*BOT, "engine"] if args.engine_only else [*BOT, "verify", "--gpu", "skip"]
    without = None
    if args.engine_cost and not args.engine_only:
        without = timed([*command, "--no-engine", str(plan_dirs[0])])
    single = None if args.no_baseline else timed([*command, str(plan_dirs[0])])
    batch = timed([*command, *map(str, plan_dirs)])
    records = [engine_of(d)["check"].get("record") or {} for d in plan_dirs]
    imports = [r.get("import_seconds") for r in records if r.get("import_seconds")]
    print(f"{len(plan_dirs)} plans, {'engine check only' if args.engine_only else 'bot verify'}")
    if single is not None:
        print(f"one plan: {single:.0f} s")
    if without is not None and single is not None:
        print(
            f"one plan without the engine check: {without:.0f} s; the engine check costs "
            f"{single - without:.0f} s ({single / without:.2f}x the plan's verify without it)"
        )
    ratio = f" = {batch / single:.1f}x one plan" if single else ""
    print(f"all plans in one batch: {batch:.0f} s{ratio}; {batch / len(plan_dirs):.0f} s a plan")
    if imports:
        print(f"engine import (once per batch): {imports[0]} s")
    cases = [r["seconds"] for r in records if isinstance(r.get("seconds"), (int, float))]
    if cases:
        print(
            f"engine case per plan (five engine starts): {min(cases):.0f}-{max(cases):.0f} s, "
            f"{sum(cases) / len(cases):.0f} s on average"
        )
    passed = sum(1 for d in plan_dirs if engine_of(d)["check"].get("passed") is True)
    print(f"engine check passed: {passed} of {len(plan_dirs)}")
    rows = table(plan_dirs)
    if args.table:
        args.table.write_text("\n".join(rows) + "\n", encoding="utf-8")
    else:
        print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
