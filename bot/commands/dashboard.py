"""`bot dashboard` (the review web app) and `bot sync` (the journal and the dashboard issue)."""

from __future__ import annotations

import argparse
import sys


def cmd_dashboard(args: argparse.Namespace) -> int:
    from bot.dashboard.app import serve

    print(f"bot: dashboard on http://{args.host}:{args.port}/", file=sys.stderr)
    serve(args.host, args.port, as_login=args.as_login)
    return 0


def add_dashboard(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboard", help="serve the maintainer review dashboard")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default: 8765)")
    p.add_argument(
        "--as",
        dest="as_login",
        metavar="LOGIN",
        help="local single-user mode: act as this maintainer (localhost only)",
    )
    p.set_defaults(handler=cmd_dashboard)


def cmd_sync(args: argparse.Namespace) -> int:
    from bot.dashboard.sync import sync

    report = sync(render_only=args.render_only)
    for line in report.lines():
        print(line)
    return 0


def add_sync(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sync", help="rebuild the journal from GitHub and refresh the dashboard issue"
    )
    p.add_argument(
        "--render-only",
        action="store_true",
        help="render the dashboard issue and follow labelled PRs; act on no ticked box",
    )
    p.set_defaults(handler=cmd_sync)
