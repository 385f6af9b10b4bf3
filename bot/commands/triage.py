"""`bot triage`: issue files offline, or the open upstream issues on GitHub."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bot.commands.options import print_json


def cmd_triage(args: argparse.Namespace) -> int:
    if args.paths:
        return _triage_files(args)
    from bot.pipeline import record_demand
    from bot.tree.index import require_vllm_tree
    from bot.triage.search import find_issues, record_candidates

    tree = Path(args.tree)
    require_vllm_tree(tree, "give --tree DIR")
    found = find_issues(tree)
    candidates = [candidate for candidate, _ in found]
    path = record_candidates(candidates)
    triaged = {t.number: t.architecture for t in record_demand(found, tree)}
    if args.json:
        print_json(
            [
                {
                    "number": c.number,
                    "title": c.title,
                    "url": c.html_url,
                    "architecture": triaged.get(c.number),
                }
                for c in candidates
            ]
        )
    else:
        for c in candidates:
            print(f"#{c.number}\t{triaged.get(c.number) or '-'}\t{c.html_url}")
        named = sum(1 for arch in triaged.values() if arch)
        print(
            f"{len(candidates)} candidate(s) recorded in {path}; {named} name a class "
            "(demand for `bot scan`)",
            file=sys.stderr,
        )
    return 0


def _triage_files(args: argparse.Namespace) -> int:
    from bot.tree.index import require_vllm_tree
    from bot.triage.files import table, triage_files

    tree = Path(args.tree)
    require_vllm_tree(tree, "give --tree DIR")
    results, skipped = triage_files([Path(p) for p in args.paths], tree)
    for path in skipped:
        print(f"bot: skipped {path}: not an issue object", file=sys.stderr)
    if args.json:
        print_json([r.to_dict() for r in results])
    else:
        print(table(results))
    return 0


def add_triage(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "triage",
        help="triage issue files (FILE or DIR, offline), or find open upstream issues on GitHub",
    )
    p.add_argument(
        "paths", nargs="*", metavar="FILE|DIR", help="issue JSON files or directories of them"
    )
    p.add_argument("--tree", default=".", help="vLLM checkout to read (default: .)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(handler=cmd_triage)
