"""Mutation testing of the fix machinery and its do-no-harm checks, with cosmic-ray.

Not part of ``./dev test`` (it runs the mapped tests once per mutant: tens of minutes).
Each group pairs source paths (directories or files) with the test files that exercise them;
only those tests run for that group's mutants, each run bounded by a timeout derived from the
group's baseline (the unmutated run, which must pass). The work happens in a copy of the
checkout under ``--out``, so an interrupted run never leaves a mutated file in the worktree.

The figure is the kill rate: killed (including timeouts) over killed + survived. Survivors are
listed per group in ``<out>/survivors-<group>.txt`` with their diff, to be read by a person:
some are equivalent mutants (no test could tell them apart), the rest are missing tests.

Run: ``./dev mutation`` or ``.venv/bin/python benchmarks/mutation.py [--group NAME ...]``
(needs the ``mutation`` extra: ``pip install -e '.[test,mutation]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "out" / "mutation"


@dataclass(frozen=True)
class Group:
    """Source paths (directories or ``.py`` files, relative to the checkout) and their tests."""

    paths: tuple[str, ...]
    tests: tuple[str, ...]
    marker: str | None = None  # a pytest -m expression, to leave out slow tests


# Directories rather than single functions, so code moving between modules stays covered.
# Every path listed must exist: a missing one stops the run (the mapping needs updating).
GROUPS: dict[str, Group] = {
    "codemods": Group(
        paths=("bot/codemods",),
        tests=(
            "tests/test_codemods_cases.py",
            "tests/test_codemods_safety.py",
            "tests/test_codemods_real_tree.py",
            "tests/test_propose_do_no_harm.py",
        ),
    ),
    "recipes": Group(
        paths=("bot/recipes",),
        tests=(
            "tests/test_scan_synthetic.py",
            "tests/test_propose_do_no_harm.py",
            "tests/test_recipe_cases.py",
        ),
    ),
    "propose": Group(
        paths=("bot/propose/proposal.py",),
        tests=("tests/test_propose_do_no_harm.py",),
    ),
    "verify-checks": Group(
        paths=("bot/verify/checks.py", "bot/verify/scratch.py"),
        tests=("tests/test_verify_do_no_harm.py", "tests/test_verify_local.py"),
        marker="not vllm_tree",  # the seed-tree tests take a minute a run
    ),
    "publish": Group(
        paths=("bot/publish/pr.py", "bot/github/git.py"),
        tests=("tests/test_publish_do_no_harm.py", "tests/test_publish_seed.py"),
    ),
    # What the privileged half re-checks before it pushes: generic confinement and each
    # recipe's publish rules (they live beside the recipes, but only publish runs them).
    "publish-checks": Group(
        paths=(
            "bot/publish/checks.py",
            "bot/recipes/publish_rules.py",
            "bot/recipes/eagle3_interface/publish.py",
            "bot/recipes/eagle3_wrapper/publish.py",
            "bot/recipes/eagle3_enable/publish.py",
        ),
        tests=(
            "tests/test_publish_trust.py",
            "tests/test_publish_wrapper.py",
            "tests/test_recipe_cases.py",
        ),
    ),
}

# cosmic-ray's core operators, minus the cross product of arithmetic/bitwise replacements
# (ten mutants per ``+``, on code that does almost no arithmetic): one swap per operator.
KEPT_BINARY = {"Add_Sub", "Sub_Add", "Mul_Add", "Div_Mul", "FloorDiv_Mul", "Mod_Mul"}
KEPT_COMPARISON = {
    "Eq_NotEq",
    "NotEq_Eq",
    "Lt_GtE",
    "LtE_Gt",
    "Gt_LtE",
    "GtE_Lt",
    "Is_IsNot",
    "IsNot_Is",
}
KEPT_UNARY = {"Delete_Not", "USub_UAdd"}
DROPPED = {"core/VariableInserter", "core/VariableReplacer"}  # mostly NameErrors, not semantics


def kept_operator(name: str) -> bool:
    for family, kept in (
        ("core/ReplaceBinaryOperator_", KEPT_BINARY),
        ("core/ReplaceComparisonOperator_", KEPT_COMPARISON),
        ("core/ReplaceUnaryOperator_", KEPT_UNARY),
    ):
        if name.startswith(family):
            return name[len(family) :] in kept
    return name not in DROPPED


def die(message: str) -> None:
    print(f"mutation: {message}", file=sys.stderr)
    raise SystemExit(2)


def source_files(group_name: str, group: Group) -> list[str]:
    files: list[str] = []
    for rel in (*group.paths, *group.tests):
        if not (ROOT / rel).exists():
            die(f"group {group_name!r} lists {rel}, which does not exist: update GROUPS")
    for rel in group.paths:
        path = ROOT / rel
        found = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        files += [str(p.relative_to(ROOT)) for p in found if p.stat().st_size > 0]
    if not files:
        die(f"group {group_name!r} has no Python source to mutate")
    return files


def copy_checkout(dest: Path) -> None:
    """The checkout as it is now (tracked and new files, not ignored ones) into ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    if dest.exists():
        shutil.rmtree(dest)
    for rel in filter(None, listed.split("\0")):
        source = ROOT / rel
        if source.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / rel)


def pytest_command(group: Group) -> list[str]:
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    if group.marker:
        command += ["-m", group.marker]
    return [*command, *group.tests]


def copy_env(work: Path) -> dict[str, str]:
    # The copy's `bot` comes first on the path; the editable install's finder comes last.
    return {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1"}


def cosmic(*args: str, work: Path, env: dict[str, str], log: Path) -> None:
    command = [str(Path(sys.executable).with_name("cosmic-ray")), *args]
    with log.open("a") as handle:
        result = subprocess.run(command, cwd=work, env=env, stdout=handle, stderr=handle)
    if result.returncode != 0:
        die(f"cosmic-ray {args[0]} failed (exit {result.returncode}); see {log}")


@dataclass
class GroupResult:
    name: str
    baseline_s: float
    timeout_s: float
    counts: dict[str, Counter[str]] = field(default_factory=dict)
    survivors: list[str] = field(default_factory=list)

    def total(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for per_file in self.counts.values():
            total.update(per_file)
        return total


def kill_rate(counts: Counter[str]) -> float | None:
    caught = counts["killed"] + counts["timeout"]
    judged = caught + counts["survived"]
    return caught / judged if judged else None


def run_group(name: str, group: Group, args: argparse.Namespace) -> GroupResult:
    files = source_files(name, group)
    out: Path = args.out
    work = out / f"work-{name}"
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(out / "snapshot", work)
    env = copy_env(work)
    log = out / f"{name}.log"
    log.write_text("")

    start = time.perf_counter()
    baseline = subprocess.run(
        pytest_command(group), cwd=work, env=env, capture_output=True, text=True
    )
    baseline_s = time.perf_counter() - start
    if baseline.returncode != 0:
        tail = "\n".join(baseline.stdout.splitlines()[-15:])
        die(f"group {name!r}: the tests fail without any mutation:\n{tail}")
    timeout = args.timeout or max(30.0, 3 * baseline_s)

    config = work / "cosmic-ray.toml"
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(files)}\n"
        f"timeout = {timeout:.0f}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(shlex.join(pytest_command(group)))}\n"
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )
    session = work / "session.sqlite"
    cosmic("init", str(config), str(session), work=work, env=env, log=log)
    skipped = skip_unwanted(session, args)
    print(
        f"[{name}] {skipped['mutants']} mutants, baseline {baseline_s:.1f} s, "
        f"timeout {timeout:.0f} s per mutant",
        flush=True,
    )
    cosmic("exec", str(config), str(session), work=work, env=env, log=log)
    result = GroupResult(name, baseline_s, timeout)
    collect(session, work, result)
    return result


def skip_unwanted(session: Path, args: argparse.Namespace) -> dict[str, int]:
    """Mark mutants of dropped operators (and, with --max-mutants, all but a sample) skipped."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as db:
        pending = sorted(db.pending_work_items, key=_mutation_order)
        dropped = [w for w in pending if not kept_operator(w.mutations[0].operator_name)]
        kept = [w for w in pending if kept_operator(w.mutations[0].operator_name)]
        if args.max_mutants and len(kept) > args.max_mutants:
            sample = set(random.Random(args.seed).sample(range(len(kept)), args.max_mutants))
            dropped += [w for i, w in enumerate(kept) if i not in sample]
            kept = [w for i, w in enumerate(kept) if i in sample]
        skip = WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="not run")
        if dropped:
            db.set_multiple_results([w.job_id for w in dropped], skip)
    return {"mutants": len(kept)}


def _mutation_order(item: object) -> tuple[str, tuple[int, int], tuple[int, int], str, int]:
    """A total order, so that a seeded sample picks the same mutants of the same code."""
    m = item.mutations[0]  # type: ignore[attr-defined]
    return (str(m.module_path), tuple(m.start_pos), tuple(m.end_pos), m.operator_name, m.occurrence)


def collect(session: Path, work: Path, result: GroupResult) -> None:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, outcome in db.completed_work_items:
            if outcome.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            mutation = item.mutations[0]
            path = str(mutation.module_path)
            if outcome.test_outcome == TestOutcome.SURVIVED:
                kind = "survived"
            elif outcome.test_outcome == TestOutcome.KILLED:
                kind = "timeout" if outcome.output == "timeout" else "killed"
            else:
                kind = "incompetent"
            result.counts.setdefault(path, Counter())[kind] += 1
            if kind == "survived":
                where = f"{path}:{mutation.start_pos[0]} {mutation.operator_name}"
                result.survivors.append(f"{where} (in {mutation.definition_name})\n{outcome.diff}")
    result.survivors.sort()


def format_counts(label: str, counts: Counter[str]) -> str:
    rate = kill_rate(counts)
    shown = f"{rate:6.1%}" if rate is not None else "     -"
    return (
        f"  {label:<40} killed {counts['killed']:4}  survived {counts['survived']:4}  "
        f"timeout {counts['timeout']:3}  incompetent {counts['incompetent']:3}  "
        f"kill rate {shown}"
    )


def report(results: list[GroupResult], out: Path) -> str:
    lines = ["mutation testing (cosmic-ray): kill rate = (killed + timeout) / judged"]
    overall: Counter[str] = Counter()
    for result in results:
        lines.append(
            f"{result.name}: baseline {result.baseline_s:.1f} s, "
            f"timeout {result.timeout_s:.0f} s per mutant"
        )
        for path, counts in sorted(result.counts.items()):
            lines.append(format_counts(path, counts))
        lines.append(format_counts(f"= {result.name}", result.total()))
        overall.update(result.total())
        (out / f"survivors-{result.name}.txt").write_text("\n".join(result.survivors) + "\n")
    lines.append(format_counts("= all groups", overall))
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", action="append", choices=sorted(GROUPS), help="repeatable")
    parser.add_argument("--timeout", type=float, help="seconds per mutant (default: 3x baseline)")
    parser.add_argument("--max-mutants", type=int, help="per group, a seeded random sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="groups run side by side")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    try:
        import cosmic_ray  # noqa: F401
    except ImportError:
        die("cosmic-ray is not installed: pip install -e '.[mutation]'")
    names = args.group or list(GROUPS)
    for name in names:
        source_files(name, GROUPS[name])  # every listed path exists, before anything runs
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    # One snapshot up front: edits made in the worktree while the run goes on are not mixed in.
    copy_checkout(args.out / "snapshot")
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda n: run_group(n, GROUPS[n], args), names))
    text = report(results, args.out)
    (args.out / "summary.txt").write_text(text)
    print(text, end="")
    print(f"written: {args.out / 'summary.txt'} and survivors-<group>.txt beside it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
