"""`bot propose`: an issue, a class or a group (verified and published unless --dry-run);
`bot demo`."""

from __future__ import annotations

import argparse
from pathlib import Path

from bot.commands.attest import add_attest, attester
from bot.commands.options import add_grouping
from bot.errors import BotError


def cmd_propose(args: argparse.Namespace) -> int:
    from bot import pipeline
    from bot.config import github_settings
    from bot.github.issues import load_issue

    if args.group is not None:
        return _propose_group(args)
    if args.issue is None and args.class_name is None:
        raise BotError("give --issue N, --class NAME or --group NAME")
    upstream = github_settings().upstream
    found = load_issue(args.issue, args.issue_file, upstream) if args.issue is not None else None
    issue = found.issue if found else None
    out = Path(args.out) if args.out else pipeline.default_plan_dir(args.issue, args.class_name)
    plan = pipeline.propose(
        Path(args.repo),
        out,
        issue=issue,
        class_name=args.class_name,
        upstream=upstream,
        record=True,
        dedupe=not args.no_dedupe,
    )
    if found is not None:
        tracked = f" (tracked in {found.tracking})" if found.tracking else ""
        print(f"issue: {upstream}#{found.issue.get('number')}{tracked}")
    print(f"plan: {out} ({plan.status}: {plan.reason})")
    if plan.questions:
        for question in plan.questions:
            print(f"  question: {question}")
    if args.dry_run:
        return 0
    if plan.status == "needs-info":
        result = pipeline.publish(out, reviewer=None)  # the question to the reporter
        print(f"publish: {result.action}: {result.message}")
        return 0
    if plan.status != "ready":
        return 0
    return _submit(out, args)


def _submit(out: Path, args: argparse.Namespace) -> int:
    """Verify, then publish once the submitter has attested the diff and the exact body."""
    from bot import pipeline
    from bot.subprocess_env import credentials_children_can_read

    if credentials_children_can_read():
        print(
            "verify: a credential is in the environment, so only the checks that run nothing "
            "from the tree run now; for the CPU tests and the smoke check, run "
            f"`env -u GITHUB_TOKEN bot verify {out}` and then `bot publish {out}`"
        )
    verification = pipeline.verify_for_submission(out)
    print(f"verify: {verification.message}")
    if not verification.local_passed:
        raise BotError(f"verification failed, nothing published; see {out / 'pr.md'}")
    result = pipeline.publish(out, reviewer=None, attest=attester(args, out))
    url = f" {result.pr_url}" if result.pr_url else ""
    print(f"publish: {result.action}: {result.message}{url}")
    return 0


def add_propose(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("propose", help="plan the fix for an issue or a scan finding")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--issue", type=int, metavar="N", help="upstream issue number")
    target.add_argument("--class", dest="class_name", metavar="NAME", help="class or architecture")
    target.add_argument(
        "--group", metavar="NAME", help="a group `bot scan --groups` lists, e.g. interface-only"
    )
    p.add_argument("--repo", default=".", help="vLLM git checkout (default: .)")
    p.add_argument("--issue-file", help="read the issue from a JSON file (GitHub's REST shape)")
    p.add_argument("--dry-run", action="store_true", help="write the plan; stop there")
    p.add_argument("--out", help="plan directory (default: under BOT_HOME/plans)")
    add_attest(p)
    add_grouping(p)
    p.set_defaults(handler=cmd_propose)


def _propose_group(args: argparse.Namespace) -> int:
    """``bot propose --group NAME``: the group's plan (and, without --dry-run, its one PR)."""
    from bot import pipeline

    repo = Path(args.repo)
    ranked, groups = pipeline.find_groups(
        repo, group_by=args.group_by, max_group_size=args.max_group_size
    )
    out = Path(args.out) if args.out else pipeline.default_group_dir(args.group)
    plan, left_out = pipeline.propose_group(
        repo,
        out,
        args.group,
        ranked=ranked,
        groups=groups,
        dedupe=not args.no_dedupe,
        record=True,
    )
    print(f"plan: {out} ({plan.status}: {plan.reason})")
    for member in plan.members if plan.is_group else []:
        print(f"  member: {member.class_name} ({member.recipe})")
    for line in left_out:
        print(f"  left out: {line}")
    if args.dry_run or plan.status != "ready":
        return 0
    return _submit(out, args)


def cmd_demo(args: argparse.Namespace) -> int:
    from bot import pipeline

    out = Path(args.out)
    plan, patch = pipeline.demo(out, version=args.version)
    print(patch if patch else "(no patch)")
    print(f"plan: {out.resolve()} ({plan.status}): plan.json, patch.diff, pr.md")
    print(f"pull request title: {plan.title}")
    return 0


def add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="offline: the seed issue against vLLM 0.23.0, end to end")
    p.add_argument("--out", default="out/demo", help="plan directory (default: out/demo)")
    p.add_argument("--version", default="0.23.0", help=argparse.SUPPRESS)
    p.set_defaults(handler=cmd_demo)
