"""A rerun with nothing changed sends nothing: no edit, no comment, no push.

`bot propose` plans, verifies and publishes once the submitter attested what it shows
(`--read-every-line --body-sha SHA` of the body it printed). Run again on the same tree it
re-plans and re-verifies; before, every rerun edited the PR (the body's verification time
changed), and the first one also turned the body's passed CPU tests into "not run": beside
the submitter's token the checks that run the tree's code are skipped, and the new record
replaced the one of the same patch.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from bot.content_hash import patch_hash
from bot.plan import read_plan_dir, update_plan
from bot.verify.check import Check
from tests.publish_world import ISSUES, World

CPU_TESTS = Check(
    "cpu-tests",
    True,
    "1 passed (the regression test failed before the patch: 1 failed)",
)


def _propose_yes(world: World, out: Path):
    """`bot propose` as the submitter runs it: once to read the diff and the body it would
    post (it publishes nothing), then again attesting exactly that body."""
    number = str(ISSUES["Bar"])
    argv = ["propose", "--issue", number, "--repo", str(world.checkout), "--out", str(out)]
    shown = world.run(*argv)
    assert shown.returncode == 0 and "not published:" in shown.stdout, shown
    found = re.search(r"--body-sha ([0-9a-f]{64})", shown.stdout)
    assert found, shown.stdout
    return world.run(*argv, "--read-every-line", "--body-sha", found[1])


def _as_verified_without_a_token(plan_dir: Path) -> None:
    """The record `env -u GITHUB_TOKEN bot verify` leaves where the release's environment ran
    the contributed CPU test: passed, for this very patch."""
    planned = read_plan_dir(plan_dir)
    recorded = planned.plan.verification
    assert recorded is not None and recorded.patch_hash == patch_hash(planned.patch)
    checks = tuple(CPU_TESTS if c.name == "cpu-tests" else c for c in recorded.checks)
    plan = dataclasses.replace(
        planned.plan, verification=dataclasses.replace(recorded, checks=checks)
    )
    update_plan(plan_dir, plan)


def test_propose_yes_twice_publishes_once_and_then_sends_nothing(world: World) -> None:
    out = world.root / "plans" / "bar"
    first = _propose_yes(world, out)
    assert first.returncode == 0, first.stderr
    assert "publish: opened:" in first.stdout
    (pull,) = world.pulls()
    writes = len(world.writes())
    recorded = (out / "pr.md").read_bytes(), _verification_json(out)

    for _ in range(2):
        again = _propose_yes(world, out)
        assert again.returncode == 0, again.stderr
        assert "publish: unchanged:" in again.stdout, again.stdout
    assert len(world.writes()) == writes
    assert world.pulls() == [pull]
    assert len(world.comments("Bar")) == 1
    # The record of this patch, kept byte for byte (the verification's time included).
    assert ((out / "pr.md").read_bytes(), _verification_json(out)) == recorded


def _verification_json(plan_dir: Path) -> str:
    return json.dumps(json.loads((plan_dir / "plan.json").read_text())["verification"])


def test_a_rerun_beside_the_token_keeps_the_cpu_tests_recorded_for_the_same_patch(
    world: World,
) -> None:
    out = world.plan("Bar")
    _as_verified_without_a_token(out)
    opened = world.run("publish", str(out))
    assert opened.returncode == 0 and opened.stdout.startswith("opened:"), opened
    (pull,) = world.pulls()
    assert re.search(
        r"^\| `pytest -v [^|]*`, without the fix, then with it \| passed \|", pull["body"], re.M
    )
    writes = len(world.writes())

    again = _propose_yes(world, out)

    assert again.returncode == 0, again.stderr
    assert "publish: unchanged:" in again.stdout, again.stdout
    assert len(world.writes()) == writes
    (now,) = world.pulls()
    assert now["body"] == pull["body"]
    kept = read_plan_dir(out).plan.verification
    assert kept is not None and kept.check("cpu-tests") == CPU_TESTS


def test_a_new_patch_is_verified_afresh(world: World) -> None:
    """What the rerun keeps is the record of the same patch on the same base, nothing else:
    once the upstream moved, the plan is verified again and the PR refreshed."""
    out = world.plan("Bar")
    _as_verified_without_a_token(out)
    assert world.run("publish", str(out)).returncode == 0
    world.move_upstream()

    again = _propose_yes(world, out)

    assert again.returncode == 0, again.stderr
    assert "publish: updated:" in again.stdout, again.stdout
    kept = read_plan_dir(out).plan.verification
    assert kept is not None and kept.check("cpu-tests") != CPU_TESTS
    assert len(world.pulls()) == 1 and len(world.comments("Bar")) == 1


def _with_cpu_tests(plan_dir: Path, check: Check) -> Path:
    planned = read_plan_dir(plan_dir)
    recorded = planned.plan.verification
    assert recorded is not None
    checks = tuple(check if c.name == check.name else c for c in recorded.checks)
    verification = dataclasses.replace(recorded, checks=checks)
    update_plan(plan_dir, dataclasses.replace(planned.plan, verification=verification))
    return plan_dir


def test_an_action_rerun_verified_afresh_edits_nothing_unless_an_outcome_changed(
    world: World,
) -> None:
    """The Action plans and verifies in a fresh directory each run: the same outcomes with
    other figures (a duration, the time) leave the PR alone; another outcome edits it."""
    slow = Check("cpu-tests", True, "1 passed in 4.02s (failed before the patch: 1 failed)")
    quick = Check("cpu-tests", True, "1 passed in 3.21s (failed before the patch: 1 failed)")
    first = _with_cpu_tests(world.plan("Bar", world.root / "run-1"), slow)
    assert world.run("publish", str(first)).stdout.startswith("opened:")
    (pull,) = world.pulls()
    writes = len(world.writes())

    rerun = _with_cpu_tests(world.plan("Bar", world.root / "run-2"), quick)
    assert read_plan_dir(rerun).plan.verification != read_plan_dir(first).plan.verification
    again = world.run("publish", str(rerun))

    assert again.stdout.startswith("unchanged:"), again.stdout
    assert len(world.writes()) == writes and world.pulls() == [pull]

    failed = _with_cpu_tests(
        world.plan("Bar", world.root / "run-3"), Check("cpu-tests", None, "not checked: no env")
    )
    changed = world.run("publish", str(failed))
    assert changed.stdout.startswith("updated:") and "updated title/body" in changed.stdout
    assert len(world.pulls()) == 1 and len(world.comments("Bar")) == 1
