"""`bot publish`: open or update the PR of a plan directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from bot.commands.attest import add_attest, attester
from bot.errors import BotError


def cmd_publish(args: argparse.Namespace) -> int:
    from bot import pipeline
    from bot.config import github_settings
    from bot.github.issues import load_issue

    expected = None
    if args.issue is not None:
        upstream = github_settings().upstream
        expected = load_issue(args.issue, args.issue_file, upstream).issue["number"]
    elif args.issue_file is not None:
        raise BotError("--issue-file needs --issue N")
    plan_dir = Path(args.plan_dir)
    result = pipeline.publish(
        plan_dir, reviewer=None, expected_issue=expected, attest=attester(args, plan_dir)
    )
    print(f"{result.action}: {result.message}" + (f" {result.pr_url}" if result.pr_url else ""))
    return 0


def add_publish(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("publish", help="open or update the PR for a plan directory")
    p.add_argument("plan_dir", help="directory written by `bot propose`")
    p.add_argument(
        "--issue",
        type=int,
        metavar="N",
        help="the labelled issue this run is for; a plan for another upstream issue is refused",
    )
    p.add_argument("--issue-file", help="that issue as a JSON file (the event's payload)")
    add_attest(p)
    p.set_defaults(handler=cmd_publish)
