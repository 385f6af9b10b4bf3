"""Sweep: the smoke check's value proof on ready eagle3-enable plans of a release, each with
its capture sabotaged (the residual counted twice), so the check is shown able to fail.

Not part of ``./dev bench`` (two or three vLLM imports per class, about two minutes a class on
2 cores). The suite keeps one case per kind of capture (Gemma2's residual stream, one
full-stream-pair decoder); the other shapes' evidence lives here.

    nice -n 10 .venv/bin/python -m benchmarks.sweeps.smoke_values [--release 0.34.0] CLASS...

Prints one row per class: the patched run's verdict and the sabotaged run's.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

import git

from bot.cli import main as bot_main
from bot.plan import read_plan_dir
from bot.tree.fetch import release_tree
from bot.tree.worktree import scratch_worktree
from bot.verify import scratch, smoke
from bot.verify.checks import Check
from bot.verify.env import vllm_env

# The capture of a decoder whose layers hand on the whole stream, and the same with the
# residual counted twice (ruff may wrap the call; the arguments stay on one line).
_CAPTURE = re.compile(r"idx \+ 1, hidden_states, None")
_DOUBLED = "idx + 1, hidden_states, residual"


def sweep_class(release: str, cls: str, work: Path) -> tuple[str, str]:
    tree_repo = release_tree(release)
    plan_dir = work / "plan"
    argv = ["propose", "--class", cls, "--repo", str(tree_repo), "--no-dedupe", "--dry-run"]
    if bot_main([*argv, "--out", str(plan_dir)]) != 0:
        return "no plan", "-"
    finding = read_plan_dir(plan_dir).plan.finding
    assert finding is not None
    module, path = finding.module, finding.path
    target = smoke.SmokeTarget(module, cls)
    env = vllm_env(release)
    head = git.Repo(tree_repo).head.commit.hexsha
    with scratch_worktree(tree_repo, head) as tree:
        reference = smoke.run_harness(env.python, tree, target, work / "ref", reference=None)
        if reference.status != "passed":
            return f"no reference: {reference.detail}", "-"
        assert scratch.apply_patch(tree, plan_dir / "patch.diff") is None
        good = smoke.smoke_check(
            smoke.run_harness(env.python, tree, target, work / "good", reference=reference)
        )
        source = (tree / path).read_text()
        if len(_CAPTURE.findall(source)) != 1:
            return _verdict(good), "not sabotaged (no full-stream capture)"
        (tree / path).write_text(_CAPTURE.sub(_DOUBLED, source))
        bad = smoke.smoke_check(
            smoke.run_harness(env.python, tree, target, work / "bad", reference=reference)
        )
    return _verdict(good), _verdict(bad)


def _verdict(check: Check) -> str:
    state = {True: "passed", False: "failed", None: "not checked"}[check.passed]
    return f"{state}: {check.detail[:120]}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("classes", nargs="+")
    parser.add_argument("--release", default="0.34.0")
    args = parser.parse_args()
    print("| class | patched | residual counted twice |\n| --- | --- | --- |")
    for cls in args.classes:
        with tempfile.TemporaryDirectory() as tmp:
            good, bad = sweep_class(args.release, cls, Path(tmp))
        print(f"| `{cls}` | {good} | {bad} |", flush=True)


if __name__ == "__main__":
    main()
