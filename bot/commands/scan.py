"""`bot scan`: a vLLM tree's findings (table, JSON, matrix or groups); plans for the top ones."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bot.commands.options import add_grouping, count
from bot.errors import BotError


def cmd_scan(args: argparse.Namespace) -> int:
    from bot import pipeline
    from bot.scan.report import findings_json, findings_table

    if args.propose_top is not None and args.plans is None:
        raise BotError("--propose-top needs --plans DIR (where the plans are written)")
    from bot.scan.findings import freeze_after_scans

    freeze_after_scans()  # this process ends after the scan (and its plans)
    result = pipeline.scan(Path(args.path), use_cache=not args.no_cache, record=True)
    for problem in result.problems:
        print(f"bot: skipped {problem}", file=sys.stderr)
    ranked = pipeline.prioritise(result.findings)
    shown = ranked[: args.top] if args.top is not None else ranked
    if args.matrix:
        from bot.verify.matrix import matrix_from_findings

        fixable = [r.finding.to_json() for r in ranked if r.fixable]  # a report has no plan
        print(json.dumps(matrix_from_findings(fixable[: args.top] if args.top else fixable)))
    elif args.groups:
        _print_groups(ranked, args)
    elif args.json:
        print(findings_json(shown))
    else:
        print(findings_table(shown))
    if args.propose_top:
        for item, out, outcome in pipeline.propose_top(
            Path(args.path),
            ranked,
            args.propose_top,
            Path(args.plans),
            group_by=args.group_by,
            max_group_size=args.max_group_size,
            dedupe=not args.no_dedupe,
        ):
            print(
                f"plan #{item.rank} {item.finding.class_name} ({item.demand.explain()}): "
                f"{out} ({outcome})",
                file=sys.stderr,
            )
    return 0


def _print_groups(ranked: list[Any], args: argparse.Namespace) -> None:
    from bot.recipes.grouping import group_findings
    from bot.scan.priority import top_fixable

    chosen = [item.finding for item in top_fixable(ranked, len(ranked))]
    demand = {item.finding.class_name: item.demand for item in ranked}
    size = {"max_size": args.max_group_size} if args.max_group_size is not None else {}
    groups = group_findings(chosen, by=args.group_by, **size)
    # What bot publish asks before it opens a PR: a triaged issue or a public draft (or,
    # later, a maintainer's request on the dashboard issue).
    wanted = {
        group.name: [
            d.explain()
            for f in group.findings
            if (d := demand.get(f.class_name)) and (d.issues or d.drafts)
        ]
        for group in groups
    }
    # A core fix has the demand of the groups that build on it (bot/publish/demand.py).
    inherited: dict[str, list[str]] = {}
    for group in groups:
        for core in group.builds_on if wanted[group.name] else ():
            named = ", ".join(f.class_name for f in group.findings)
            for line in dict.fromkeys(wanted[group.name]):
                inherited.setdefault(core, []).append(f"{named} builds on it: {line}")
    asked = 0
    for group in groups:
        provides = [f"{f.recipe}:{f.class_name}" for f in group.findings]
        through = [line for key in provides for line in inherited.get(key, [])]
        asked += bool(wanted[group.name] or through)
        names, count = [], 0
        for finding in group.findings:
            # A set of targets sharing a decoder is one plan fixing each of them: count them all.
            shared = finding.evidence.fixed_with()
            others = [t for t in shared.targets if t != finding.class_name] if shared else []
            names.append(finding.class_name + (f" (with {', '.join(others)})" if others else ""))
            count += 1 + len(others)
        after = f" [builds on {', '.join(group.builds_on)}]" if group.builds_on else ""
        lines = [*dict.fromkeys(wanted[group.name]), *through]
        why = f"demand: {'; '.join(lines)}" if lines else "no demand yet"
        print(f"{group.name} ({count}): {', '.join(names)}{after} -- {why}")
    print(
        f"{len(groups)} groups: {asked} with demand (a triaged issue or a public draft) would "
        f"open a PR; {len(groups) - asked} wait on the dashboard issue for a maintainer's request"
    )


def add_scan(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scan", help="find EAGLE-3 interface gaps in a vLLM tree")
    p.add_argument("path", nargs="?", default=".", help="vLLM checkout (default: .)")
    p.add_argument("--json", action="store_true", help="print findings as a JSON array")
    p.add_argument("--no-cache", action="store_true", help="ignore the per-file index cache")
    p.add_argument("--matrix", action="store_true", help="print a GitHub Actions matrix (JSON)")
    p.add_argument("--top", type=count, metavar="N", help="show only the first N by priority")
    p.add_argument(
        "--propose-top",
        type=count,
        metavar="N",
        help="also write plans (no PRs) for the first N fixable findings, into --plans DIR",
    )
    p.add_argument("--plans", metavar="DIR", help="where --propose-top writes plan directories")
    p.add_argument(
        "--groups", action="store_true", help="list the fixable findings by group (one PR each)"
    )
    add_grouping(p)
    p.set_defaults(handler=cmd_scan)
