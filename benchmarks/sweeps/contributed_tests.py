"""Sweep: ready plans' contributed tests (eagle3-enable's forward test, eagle3-wrapper's
forwarding test) in the release's CPU env.

Not part of ``./dev bench`` (a subdirectory: it imports vLLM three times, tens of minutes on a
loaded machine).
One scratch tree holds all the plans: the tests alone (each must fail), the model edits too
(each must pass), then the capture sabotaged in the plans named by ``--sabotage`` (each must
fail again: the residual dropped from the capture, or the captured index shifted by one; for a
wrapper, the guard's calls dropped, or only the first layer forwarded). With ``--misplace``, the
named plans whose capture follows an ``if`` that calls the layer in both branches (DeciLM) are
restored and run again with the capture moved into the ``if``'s first branch (a fourth run,
``misplaced``: each must fail, a layer taking the other branch is not captured). ``--shift``
names plans whose sabotage is the index shift even where the capture passes a residual (Gemma
4's layers all hand back ``None``: dropping it changes nothing).

    .venv/bin/python benchmarks/sweeps/contributed_tests.py PLAN_DIR... --sabotage A,B,C \
        [--misplace A] [--shift A] --out DIR

Prints one row per test and writes the JUnit files to ``--out``.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import re
import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from bot.plan import read_plan_dir
from bot.tree.worktree import scratch_worktree
from bot.verify import scratch, smoke
from bot.verify.env import vllm_env
from bot.verify.junit import run_pytest

# The capture after each layer (any loop index name): the residual dropped, or the index shifted.
_DROPPED = (
    re.compile(r"(aux_hidden_states, \w+ \+ 1, hidden_states, )residual\n"),
    r"\1None\n",
)
_SHIFTED = (re.compile(r"(aux_hidden_states, \w+) \+ 1(, hidden_states, \w+\n)"), r"\1\2")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("plans", nargs="+", type=Path)
    parser.add_argument("--sabotage", default="")
    parser.add_argument("--misplace", default="")
    parser.add_argument("--shift", default="")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    plans = [read_plan_dir(p) for p in args.plans]
    first = plans[0].plan
    env = vllm_env(str(first.vllm_version))
    args.out.mkdir(parents=True, exist_ok=True)
    forward_tests = [
        node for p in plans for node in p.plan.tests.cpu if "tests/model_executor/" in node
    ]
    with (
        scratch_worktree(Path(str(first.repo_path)), str(first.base_commit)) as tree,
        tempfile.TemporaryDirectory() as tmp,
    ):
        patches = []
        for loaded in plans:
            patch = Path(tmp) / f"{loaded.plan.class_name}.diff"
            patch.write_text(loaded.patch, encoding="utf-8")
            patches.append(patch)
            _apply(tree, patch, "tests/model_executor/*")

        def run(phase: str) -> None:
            junit = Path(tmp) / f"{phase}.xml"
            run_pytest(
                forward_tests,
                tree,
                junit,
                pythonpath=tree,
                timeout=3600,
                python=env.python,
                extra_env=smoke.runtime_env(tree),
                plugins=("bot_vllm_cpu",),
            )
            shutil.copy(junit, args.out / f"{phase}.xml")
            for name, outcome in _outcomes(junit):
                print(f"{phase}\t{name}\t{outcome}", flush=True)

        run("before")
        for patch in patches:
            _apply(tree, patch, "vllm/*")
        run("after")
        patched = {
            loaded.plan.class_name: (tree / loaded.plan.finding.path).read_text(encoding="utf-8")
            for loaded in plans
        }
        for loaded in plans:
            if loaded.plan.class_name in args.sabotage.split(","):
                path = tree / loaded.plan.finding.path
                text = path.read_text(encoding="utf-8")
                if loaded.plan.recipe == "eagle3-wrapper":
                    changed = _sabotage_wrapper(text, loaded.patch)
                else:
                    dropped = _DROPPED[0].search(text)
                    if dropped and loaded.plan.class_name not in args.shift.split(","):
                        changed = _DROPPED[0].sub(_DROPPED[1], text)
                    else:
                        changed = _SHIFTED[0].sub(_SHIFTED[1], text)
                assert changed != text, f"nothing to sabotage in {path}"
                path.write_text(changed, encoding="utf-8")
                print(f"sabotaged {loaded.plan.class_name}", flush=True)
        run("sabotaged")
        misplaced = [p for p in plans if p.plan.class_name in args.misplace.split(",")]
        for loaded in misplaced:
            path = tree / loaded.plan.finding.path
            path.write_text(_into_first_branch(patched[loaded.plan.class_name]), encoding="utf-8")
            print(f"misplaced {loaded.plan.class_name}", flush=True)
        if misplaced:
            run("misplaced")


def _into_first_branch(text: str) -> str:
    """The capture that follows an ``if`` calling the layer in both branches, moved to the end
    of the ``if``'s first branch (indented one level deeper): the other branch's layers are
    then never captured."""
    lines = text.splitlines(keepends=True)
    for loop in (n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.For)):
        for branch, capture in itertools.pairwise(loop.body):
            if (
                isinstance(branch, ast.If)
                and branch.orelse
                and "_maybe_add_hidden_state" in ast.unparse(capture)
            ):
                assert capture.end_lineno is not None and branch.body[-1].end_lineno is not None
                moved = ["    " + line for line in lines[capture.lineno - 1 : capture.end_lineno]]
                del lines[capture.lineno - 1 : capture.end_lineno]
                at = branch.body[-1].end_lineno
                return "".join(lines[:at] + moved + lines[at:])
    raise AssertionError("no capture after an if that calls the layer in both branches")


def _sabotage_wrapper(text: str, patch: str) -> str:
    """A wrapper plan's methods broken: behind a guard, the guard's calls dropped (a text
    model without EAGLE-3 is reached); plain forwarding, only the first layer forwarded."""
    guard = re.search(r"^\+        self\.(\w+)\(\)\n", patch, re.MULTILINE)
    if guard:
        return text.replace(f"        self.{guard[1]}()\n", "")
    forward = re.search(
        r"^\+        (self\.\w+\.set_aux_hidden_state_layers\()layers\)\n", patch, re.M
    )
    assert forward, "no forwarding method in the plan's patch"
    return text.replace(f"{forward[1]}layers)\n", f"{forward[1]}layers[:1])\n")


def _apply(tree: Path, patch: Path, only: str) -> None:
    failure = scratch.apply_patch(tree, patch, only=only)
    if failure:
        raise SystemExit(f"{patch.name}: {failure}")


def _outcomes(junit: Path) -> list[tuple[str, str]]:
    if not junit.is_file():
        return [("(no report)", "error")]
    rows = []
    for case in ET.parse(junit).iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = f"{child.tag}: {(child.get('message') or '').splitlines()[0][:120]}"
        rows.append((str(case.get("name")), outcome))
    return rows


if __name__ == "__main__":
    main()
