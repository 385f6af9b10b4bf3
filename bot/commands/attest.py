"""Who attests a PR before it opens: the flags `bot propose` and `bot publish` share."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.errors import BotError


def attester(args: argparse.Namespace, out: Path) -> Any:
    """Who attests, from the flags: ``--read-every-line --body-sha`` (after ``--preview``), the
    submitter at a terminal, or (elsewhere) nobody: the diff and the body are shown with the
    command that posts exactly that body. In GitHub Actions without flags, None: the
    approval of the run's ``publish`` environment attests (bot/publish/attestation.py)."""
    from bot.publish import attestation

    if getattr(args, "preview", False):
        return attestation.previewing(_show_and_say_how(out))
    if args.read_every_line or args.body_sha:
        if not (args.read_every_line and args.body_sha):
            raise BotError("--read-every-line and --body-sha go together (see --preview)")
        return attestation.with_flags(True, args.body_sha)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        return None
    if sys.stdin.isatty():
        return attestation.at_terminal(print, _yes)
    return attestation.previewing(_show_and_say_how(out))


def _show_and_say_how(out: Path) -> Callable[[str, str], None]:
    def show(text: str, sha: str) -> None:
        print(text)
        print(
            "not published: after reading the diff and the body above, publish exactly them "
            f"with `bot publish {out} --read-every-line --body-sha {sha}`"
        )

    return show


def _yes(question: str) -> bool:
    return input(question).strip().lower() in ("y", "yes")


def add_attest(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--preview",
        action="store_true",
        help="print the diff and the exact PR body with its hash; publish nothing",
    )
    p.add_argument(
        "--read-every-line",
        action="store_true",
        help="you, the submitter, read every changed line and the body --preview printed",
    )
    p.add_argument(
        "--body-sha", metavar="SHA", help="the body hash --preview printed (what you read)"
    )
