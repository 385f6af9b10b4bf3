"""The verification record is one frozen value: what verify writes, plan.json carries and the
write-up, the evidence gate and publish read back, refusing a malformed record at the read."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bot.errors import BotError
from bot.plan import READY, Plan, read_plan_dir, write_plan_dir
from bot.verification import Check, GpuRun, Verification

RECORD = {
    "passed": False,
    "local_passed": True,
    "message": "local checks passed; GPU test not run, so the PR stays a draft",
    "checks": [
        {"name": "apply", "passed": True, "detail": "patch applies", "log_excerpt": ""},
        {
            "name": "smoke",
            "passed": True,
            "detail": "2 aux hidden states",
            "log_excerpt": "",
            "record": {"values_proven": True},
        },
        {"name": "engine", "passed": None, "detail": "not checked: no engine", "log_excerpt": ""},
    ],
    "gpu": {"mode": "skip", "conclusion": "skipped", "log_excerpt": ""},
    "finished_at": "2026-12-04T12:00:00+00:00",
    "patch_hash": "sha256:" + "0" * 64,
}


def test_a_record_reads_back_as_the_value_and_writes_the_same_json(tmp_path: Path) -> None:
    value = Verification.from_json(RECORD)
    assert value.check("smoke") == Check(
        "smoke", True, "2 aux hidden states", "", {"values_proven": True}
    )
    assert value.check_passed("apply") and not value.check_passed("engine")
    assert value.gpu == GpuRun(mode="skip", conclusion="skipped")
    assert value.to_json() == RECORD
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.passed = True  # type: ignore[misc]

    plan = Plan(status=READY, reason="r", verification=value)
    write_plan_dir(tmp_path / "plan", plan, "", "Title\n\nBody\n")
    assert json.loads((tmp_path / "plan" / "plan.json").read_text())["verification"] == RECORD
    assert read_plan_dir(tmp_path / "plan").plan.verification == value


def test_a_dispatched_gpu_run_keeps_what_publish_confirms_it_by() -> None:
    gpu = {
        "mode": "dispatch",
        "conclusion": "success",
        "log_excerpt": "1 passed",
        "run_url": "https://github.com/o/bot/actions/runs/7",
        "run_id": 7,
        "request_id": "req-1",
        "repository": "o/vllm",
        "sha": "a" * 40,
        "tests": {"tests": 1, "failures": 0, "errors": 0, "skipped": 0},
        "after": {"conclusion": "success", "run_url": None, "run_id": 7},
        "before": {"conclusion": "failure", "run_url": None, "run_id": 6},
    }
    value = Verification.from_json({**RECORD, "gpu": gpu})
    assert value.gpu is not None and value.gpu.request_id == "req-1" and value.gpu.run_id == 7
    assert value.to_json()["gpu"] == gpu


MALFORMED = {
    "not-an-object": ("passed", "`verification` must be an object"),
    "no-verdict": ({k: v for k, v in RECORD.items() if k != "passed"}, "has no `passed`"),
    "verdict-a-string": ({**RECORD, "passed": "true"}, "`passed` must be bool"),
    "checks-not-a-list": ({**RECORD, "checks": {"apply": True}}, "`checks` must be a list"),
    "check-passed-a-string": (
        {**RECORD, "checks": [{"name": "smoke", "passed": "yes", "detail": "claimed"}]},
        "`passed` must be bool",
    ),
    "check-without-detail": (
        {**RECORD, "checks": [{"name": "smoke", "passed": True}]},
        "must have `detail`",
    ),
    "check-with-an-unknown-field": (
        {**RECORD, "checks": [{"name": "smoke", "passed": True, "detail": "", "proven": True}]},
        "unknown fields: proven",
    ),
    "gpu-without-mode": ({**RECORD, "gpu": {"conclusion": "success"}}, "its mode and conclusion"),
    "gpu-run-id-a-string": (
        {**RECORD, "gpu": {"mode": "dispatch", "conclusion": "success", "run_id": "7"}},
        "`run_id` must be int",
    ),
    "unknown-field": ({**RECORD, "approved": True}, "unknown fields: approved"),
}


@pytest.mark.parametrize("record, words", MALFORMED.values(), ids=MALFORMED)
def test_a_malformed_record_is_refused_in_one_line(record: object, words: str) -> None:
    with pytest.raises(BotError, match=r"^plan\.json: `verification`") as raised:
        Verification.from_json(record)
    message = str(raised.value)
    assert words in message and "\n" not in message, message


@pytest.mark.vllm_tree
def test_an_engine_only_run_keeps_the_record_of_its_own_patch_only(seed_plan: Path) -> None:
    """`bot engine PLAN` adds the engine check to the verification recorded for the same
    patch (its other checks and GPU run kept, as values); for any other patch it records the
    engine check alone, not passed, and says the rest must run again."""
    from bot.verify.engine_only import record_engine_check

    data = json.loads((seed_plan / "plan.json").read_text())
    data["verification"]["gpu"] = {"mode": "dispatch", "conclusion": "success", "run_id": 7}
    (seed_plan / "plan.json").write_text(json.dumps(data))
    before = read_plan_dir(seed_plan).plan.verification
    assert before is not None and before.gpu is not None
    engine = Check("engine", True, "EAGLE-3: lossless; DFlash: lossless")
    record_engine_check(read_plan_dir(seed_plan), engine)
    kept = read_plan_dir(seed_plan).plan.verification
    assert kept is not None
    assert kept.checks == (*(c for c in before.checks if c.name != "engine"), engine)
    assert (kept.gpu, kept.passed, kept.patch_hash) == (before.gpu, True, before.patch_hash)

    patch = seed_plan / "patch.diff"
    patch.write_text(patch.read_text() + "\n")
    record_engine_check(read_plan_dir(seed_plan), engine)
    alone = read_plan_dir(seed_plan).plan.verification
    assert alone is not None and alone.checks == (engine,)
    assert (alone.passed, alone.gpu) == (False, GpuRun("skip", "not_run"))
    assert "only the engine check ran" in alone.message
