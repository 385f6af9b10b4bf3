"""Argument types and options several commands share, and printing JSON."""

from __future__ import annotations

import argparse
import json


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def add_grouping(p: argparse.ArgumentParser) -> None:
    from bot.recipes.grouping import DEFAULT_MAX_GROUP_SIZE, GROUP_BY

    p.add_argument(
        "--group-by",
        choices=GROUP_BY,
        default="shape",
        help="shape: one plan per fix shape (default); none: one plan per class",
    )
    p.add_argument(
        "--max-group-size",
        type=count,
        metavar="N",
        help=f"at most N classes in one plan (default {DEFAULT_MAX_GROUP_SIZE})",
    )
    p.add_argument(
        "--no-dedupe",
        action="store_true",
        help="skip the duplicate search (AGENTS.md) and the bot's own PRs (recorded as not run)",
    )


def print_json(value: object) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))
