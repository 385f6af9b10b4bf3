"""The GitHub Actions side: `bot init-workflows` writes the workflows; `bot gpu-test` and
`bot gpu-guard` are what the GPU runner's steps run."""

from __future__ import annotations

import argparse
from pathlib import Path


def cmd_gpu_test(args: argparse.Namespace) -> int:
    from bot.verify import run_pytest, split_node_ids

    run = run_pytest(split_node_ids(args.tests), Path(args.cwd), Path(args.junit), gpu=True)
    print(
        f"gpu-test: {run.conclusion}: {run.tests} tests, {run.failures} failures, "
        f"{run.errors} errors, {run.skipped} skipped"
    )
    return 0 if run.conclusion == "success" else 1


def add_gpu_test(sub: argparse._SubParsersAction) -> None:
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


def add_gpu_guard(sub: argparse._SubParsersAction) -> None:
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


def add_init_workflows(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init-workflows", help="write the GitHub Actions workflows into DIR")
    p.add_argument("dir", help="target directory, usually .github/workflows")
    p.add_argument("--force", action="store_true", help="overwrite files that differ")
    p.set_defaults(handler=cmd_init_workflows)
