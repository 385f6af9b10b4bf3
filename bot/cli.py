"""Commands only: parse, call one pipeline function, print. No logic lives here.

This module is the dispatch (the parser and the last line of defence against tracebacks); each
command lives in bot/commands/.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

from bot.commands import actions, checks, dashboard, drafts, propose, publish, scan, trees, triage
from bot.errors import BotError
from bot.redact import install_log_redaction, redact

# Each entry adds one subcommand, in the order `bot --help` lists them. A new command: its
# module in bot/commands/ with `cmd_x` + `add_x`, and `add_x` listed here.
_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    scan.add_scan,
    trees.add_fetch,
    trees.add_env,
    checks.add_smoke,
    propose.add_propose,
    propose.add_demo,
    drafts.add_drafts,
    dashboard.add_dashboard,
    dashboard.add_sync,
    checks.add_verify,
    checks.add_engine,
    actions.add_gpu_test,
    actions.add_gpu_guard,
    actions.add_init_workflows,
    publish.add_publish,
    triage.add_triage,
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
    install_log_redaction(verbose=args.verbose)
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
        from bot.github.client import NETWORK_ERRORS, network_detail

        if isinstance(exc, NETWORK_ERRORS):  # any library's, should one slip past the edge
            print(f"bot: network error: {network_detail(exc)}", file=sys.stderr)
            return 2
        if os.environ.get("BOT_DEBUG"):
            raise
        detail = redact(f"{exc.__class__.__name__}: {exc}").splitlines()[0][:300]
        print(f"bot: internal error: {detail} (set BOT_DEBUG=1 for details)", file=sys.stderr)
        return 1
