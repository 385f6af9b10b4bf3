"""Commands only: parse, call one pipeline function, print. No logic lives here."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from bot.errors import BotError
from bot.redact import install_log_redaction, redact

Handler = Callable[[argparse.Namespace], int]


def cmd_scan(args: argparse.Namespace) -> int:
    from bot import pipeline
    from bot.report import findings_json, findings_table

    result = pipeline.scan(Path(args.path), use_cache=not args.no_cache)
    for problem in result.problems:
        print(f"bot: skipped {problem}", file=sys.stderr)
    if args.json:
        print(findings_json(result.findings))
    else:
        print(findings_table(result.findings))
    return 0


def _add_scan(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scan", help="find EAGLE-3 interface gaps in a vLLM tree")
    p.add_argument("path", nargs="?", default=".", help="vLLM checkout (default: .)")
    p.add_argument("--json", action="store_true", help="print findings as a JSON array")
    p.add_argument("--no-cache", action="store_true", help="ignore the per-file index cache")
    p.set_defaults(handler=cmd_scan)


def cmd_fetch(args: argparse.Namespace) -> int:
    from bot.tree.fetch import release_tree

    print(release_tree(args.version))
    return 0


def _add_fetch(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fetch", help="download (once) and print the path of a vLLM release tree")
    p.add_argument("version", help="vLLM release, e.g. 0.23.0")
    p.set_defaults(handler=cmd_fetch)


# Each entry adds one subcommand. New commands: write `cmd_x` + `_add_x` and list `_add_x` here.
_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_scan,
    _add_fetch,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bot", description="Find and fix EAGLE-3 interface gaps in vLLM."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _COMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="bot: %(message)s",
        stream=sys.stderr,
    )
    install_log_redaction()
    try:
        return args.handler(args)
    except BotError as exc:
        print(f"bot: {redact(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("bot: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        if os.environ.get("BOT_DEBUG"):
            raise
        detail = redact(f"{exc.__class__.__name__}: {exc}").splitlines()[0][:300]
        print(f"bot: internal error: {detail} (set BOT_DEBUG=1 for details)", file=sys.stderr)
        return 1


def print_json(value: object) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))
