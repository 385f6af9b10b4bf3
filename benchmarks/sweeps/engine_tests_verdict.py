"""One plan's tests through LLM in the CPU engine and ``bot verify``'s verdict on them, alone.

Not part of ``./dev bench`` or the suite (two engine runs: minutes each). ``bot verify`` runs
the same (:mod:`bot.verify.engine_tests`) beside every other check; this runs only the
``engine-tests`` check on a plan directory, on a scratch worktree of its base:

1. **before**: the patch's ``tests/`` part applied (each case must fail with the tree's error);
2. **after**: the whole patch (each must pass).

With ``--drop-entry ARCH`` the contributed file loses ``ARCH``'s ``TARGETS`` entry after the
patch is applied, the node ids staying the plan's (the sabotage "a group test missing a
member's entry"): its case never runs, and the verdict must be red and name it. With
``--undeclare ARCH`` ARCH's model file is put back as the base has it after the patch (a
member's declaration missing): its case must stay red with the load error, the verdict red. With
``--only ARCH,...`` only those members' cases run (a group in batches).

    BOT_ENGINE_TESTS=in-process /work/coord/heavy .venv/bin/python -m \
        benchmarks.sweeps.engine_tests_verdict PLAN_DIR [--drop-entry Glm4ForCausalLM]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
from pathlib import Path

from bot.codemods.llm_target_test import LLM_TEST_PATH
from bot.plan import read_plan_dir
from bot.tree.worktree import scratch_worktree
from bot.verify import engine_tests, scratch
from bot.verify.engine_env import engine_for


def _drop_entry(tree: Path, arch: str) -> None:
    path = tree / LLM_TEST_PATH
    text = path.read_text(encoding="utf-8")
    changed = re.sub(rf'\n    "{re.escape(arch)}": [^\n]*,\n', "\n", text, count=1)
    if changed == text:
        raise SystemExit(f"no TARGETS entry of {arch} in {LLM_TEST_PATH}")
    path.write_text(changed, encoding="utf-8")


def _undeclare(tree: Path, tests: engine_tests.EngineTests, arch: str) -> None:
    if arch not in tests.archs:
        raise SystemExit(f"{arch} is not a runnable member of the plan")
    path = tests.archs[arch][0].replace(".", "/") + ".py"
    subprocess.run(["git", "-C", str(tree), "checkout", "HEAD", "--", path], check=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("plan", type=Path)
    parser.add_argument("--drop-entry", default="", help="sabotage: remove ARCH's TARGETS entry")
    parser.add_argument(
        "--undeclare",
        default="",
        help="sabotage: after the patch, ARCH's model file as it was before it (no declaration)",
    )
    parser.add_argument(
        "--only", default="", help="ARCH,ARCH,...: run these members' cases alone (a batch)"
    )
    args = parser.parse_args()
    loaded = read_plan_dir(args.plan)
    plan = loaded.plan
    node_ids = list(plan.tests.engine)
    if args.only:
        wanted = set(args.only.split(","))
        node_ids = [n for n in node_ids if n.rpartition("[")[2].rstrip("]") in wanted]
    if not node_ids:
        raise SystemExit("the plan lists no tests through LLM")
    engine = engine_for(str(plan.vllm_version))
    with (
        scratch_worktree(Path(str(plan.repo_path)), str(plan.base_commit)) as tree,
        tempfile.TemporaryDirectory(prefix="bot-engine-verdict-") as tmp,
    ):
        work = Path(tmp)
        patch = work / "patch.diff"
        patch.write_text(loaded.patch, encoding="utf-8")
        touched = scratch.touched_files(tree, patch)
        tests = engine_tests.plan_engine_tests(tree, node_ids, touched)
        if isinstance(tests, str):
            raise SystemExit(f"not checked: {tests}")
        for when, only in (("before", "tests/*"), ("after", "vllm/*")):
            failure = scratch.apply_patch(tree, patch, only=only)
            if failure:
                raise SystemExit(f"the patch does not apply: {failure}")
            if args.drop_entry and when == "before":
                _drop_entry(tree, args.drop_entry)
            if args.undeclare and when == "after":
                _undeclare(tree, tests, args.undeclare)
            engine_tests.run(engine, tests, tree, work, when)
    verdict = engine_tests.check(tests, engine)
    record = verdict.record or {}
    print(
        json.dumps(
            {
                "passed": verdict.passed,
                "detail": verdict.detail,
                "unjudged": record.get("unjudged"),
                "runs": [
                    {k: r.get(k) for k in ("when", "conclusion", "cases", "seconds", "error")}
                    for r in record.get("runs") or []
                ],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
