"""A single-class plan's claimed outcome is stated only as far as ``bot verify``'s records show it.

The plans are the bot's own (``bot propose --class`` on a clone of vLLM 0.34.0): an
eagle3-interface plan, a delegating eagle3-wrapper plan and a runtime one. Their claims block
(``<!-- bot:claims -->``) is rendered from the records by the renderer a group uses
(:func:`bot.publish.contribution.render_blocks`); the records here are ``bot verify``'s own
verdicts (:func:`bot.verify.checks.cpu_test_check` on JUnit reports as pytest writes them, and
engine-tests checks as ``bot verify`` records them).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import git
import pytest

from bot.duplicate_search import DuplicateSearch
from bot.plan import Plan, read_plan_dir
from bot.publish.contrib_rules import rules_of_tree
from bot.publish.contribution import CLAIMS, Facts, preview, refresh, render_blocks
from bot.tree.fetch import release_tree
from bot.verification import Check, Verification
from bot.verify.checks import cpu_test_check
from bot.verify.junit import parse_junit
from tests.conftest import UPSTREAM
from tests.test_contribution import _junit

pytestmark = pytest.mark.vllm_tree

VERSION = "0.34.0"
INTERFACE = "Glm4ForCausalLM"
DELEGATE = "KimiVLForConditionalGeneration"
RUNTIME = "LlavaNextForConditionalGeneration"
TARGET_CHECK = (
    "passes vLLM's EAGLE-3 target check (`supports_eagle3()`) instead of being refused by it "
    "at load time"
)
# Each shape claims what the registry test asserts; the runtime guard is described, not claimed.
CLAIMED = {INTERFACE: TARGET_CHECK, DELEGATE: TARGET_CHECK, RUNTIME: TARGET_CHECK}
ENABLE = "Qwen2MoeForCausalLM"
SERVES = "can serve as an EAGLE-3 target with pipeline parallelism 1"


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three plans as ``bot propose`` writes them (not verified: the records are set here)."""
    from bot import pipeline

    root = tmp_path_factory.mktemp("single-claims")
    checkout = root / "checkout"
    git.Repo.clone_from(str(release_tree(VERSION)), str(checkout), shared=True).close()
    out = {}
    for name in (*CLAIMED, ENABLE):
        pipeline.propose(checkout, root / name, class_name=name, upstream=UPSTREAM)
        out[name] = root / name
    return out


def _facts(plan: Plan, *checks: Check) -> Facts:
    verification = Verification(passed=False, local_passed=True, message="", checks=checks)
    return Facts(
        plan=dataclasses.replace(plan, verification=verification if checks else None),
        patch="",
        rules=rules_of_tree(release_tree(VERSION)),
        search=DuplicateSearch(ran=True, upstream=UPSTREAM),
    )


def _claims(facts: Facts) -> str:
    return render_blocks(facts)[CLAIMS]


def _cpu(plan: Plan, after: str, **blocked: str) -> Check:
    nodes = list(plan.tests.cpu)
    before = parse_junit(_junit({n: "failed" for n in nodes}))
    return cpu_test_check(before, parse_junit(_junit({n: after for n in nodes})), **blocked)


def _asserted(cls: str, claim: str) -> str:
    return f"- `{cls}` {claim}"


@pytest.mark.parametrize("name", list(CLAIMED))
def test_a_single_class_claim_says_what_the_records_show(plans, name):
    planned = read_plan_dir(plans[name])
    plan, claim = planned.plan, CLAIMED[name]
    test = f"`{plan.tests.cpu[0].partition('[')[0]}`"

    # Before any verification: the claim is said to be not checked, never asserted.
    assert CLAIMS[0] in planned.pr_body  # propose leaves the block for verify and publish
    assert f"- Not checked yet: that `{name}` {claim}." in planned.pr_body
    assert _asserted(name, claim) not in planned.pr_body

    # The CPU tests fail without the patch and pass with it: the claim stands, with its record.
    passed = _cpu(plan, "passed")
    assert passed.passed is True
    text = _claims(_facts(plan, passed))
    assert (
        f"{_asserted(name, claim)}: the CPU tests under Validation ({test}) fail without the "
        "patch and pass with it." in text
    )
    # verify's preview and publish render the block in pr.md from the same records.
    assert _asserted(name, claim) in refresh(planned.pr_body, _facts(plan, passed))
    assert "Not checked yet" not in refresh(planned.pr_body, _facts(plan, passed))
    recorded = _facts(plan, passed).plan
    assert _asserted(name, claim) in preview(planned.pr_markdown, recorded, "", None)

    # The module does not import in the CPU environment: not checked, and said why.
    why = f"{plan.finding.module} does not import here (no module named 'torchaudio')"
    blocked = _cpu(plan, "failed", blocked=why)
    assert blocked.passed is None
    text = _claims(_facts(plan, blocked))
    assert f"- Not checked here: that `{name}` {claim}. The CPU tests ({test}): its test" in text
    assert "torchaudio" in text and _asserted(name, claim) not in text
    assert _asserted(name, claim) not in refresh(planned.pr_body, _facts(plan, blocked))

    # A skipped test is not a pass.
    skipped = _cpu(plan, "skipped")
    assert skipped.passed is None
    text = _claims(_facts(plan, skipped))
    assert f"- Not checked here: that `{name}` {claim}" in text
    assert _asserted(name, claim) not in text

    # The test fails after the patch: the claim is not shown, and the body says so.
    failed = _cpu(plan, "failed")
    assert failed.passed is False
    text = _claims(_facts(plan, failed))
    assert f"- Not shown by the tests here: that `{name}` {claim}. The CPU tests ({test}): " in text
    assert "its test fails after the patch" in text and _asserted(name, claim) not in text


def test_the_test_through_llm_backs_an_interface_claim_the_cpu_env_cannot(plans):
    """The CPU environment cannot import the module, the engine's test through ``LLM`` judged
    it: the claim stands on that record; an engine that judged nothing backs nothing."""
    plan = read_plan_dir(plans[INTERFACE]).plan
    blocked = _cpu(plan, "failed", blocked=f"{plan.finding.module} does not import here")
    llm = Check("engine-tests", True, "before the patch: failure; after the patch: success")
    text = _claims(_facts(plan, blocked, llm))
    assert (
        f"{_asserted(INTERFACE, TARGET_CHECK)}: the test through `LLM` fails without the "
        "patch and passes with it." in text
    )
    unjudged = Check(
        "engine-tests",
        None,
        f"not checked: every member is unjudged: {INTERFACE} unjudged: its case was skipped",
    )
    text = _claims(_facts(plan, blocked, unjudged))
    assert f"- Not checked here: that `{INTERFACE}` {TARGET_CHECK}" in text
    assert f"The test through `LLM`: {INTERFACE} unjudged: its case was skipped." in text
    assert _asserted(INTERFACE, TARGET_CHECK) not in text
    # A red engine run outweighs a green CPU test.
    red = Check("engine-tests", False, "after the patch: failure")
    text = _claims(_facts(plan, _cpu(plan, "passed"), red))
    assert f"- Not shown by the tests here: that `{INTERFACE}` {TARGET_CHECK}" in text
    assert _asserted(INTERFACE, TARGET_CHECK) not in text


def test_an_enablement_claims_serving_only_where_the_engine_or_the_llm_test_shows_it(plans):
    """eagle3-enable claims more than the declaration: that the class serves as a target. The
    registry test shows the declaration only; the engine (the methods refused before, run
    after) or the test through ``LLM`` must show serving. The records are those `bot verify
    --gpu skip` made for this plan (tests/data/verify)."""
    import json

    from tests.test_contribution import DATA

    plan = read_plan_dir(plans[ENABLE]).plan
    record = json.loads((DATA / "verify" / "qwen2_moe_0_34_0.json").read_text(encoding="utf-8"))
    recorded = {c.name: c for c in Verification.from_json(record).checks}
    engine, llm, cpu = recorded["engine"], recorded["engine-tests"], recorded["cpu-tests"]
    asserted = _asserted(ENABLE, SERVES)

    text = _claims(_facts(plan, cpu, llm, engine))
    assert (
        f"{asserted}: EAGLE-3, DFlash run in the engine on CPU with it, refused without it; "
        "the test through `LLM` fails without the patch and passes with it." in text
    )
    # The registry test alone shows the declaration, not serving.
    assert asserted not in _claims(_facts(plan, cpu))
    assert f"- Not checked yet: that `{ENABLE}` {SERVES}." in _claims(_facts(plan, cpu))
    why = "not checked: the model does not build from the tiny stand-in config here"
    unrun = dataclasses.replace(engine, passed=None, detail=why, record=None)
    text = _claims(_facts(plan, cpu, unrun))
    assert f"- Not checked here: that `{ENABLE}` {SERVES}. The engine on CPU: the model" in text
    assert asserted not in text
    # Either record that ran is enough, unless one of them failed.
    assert f"{asserted}: the test through `LLM` fails" in _claims(_facts(plan, cpu, llm, unrun))
    failed = dataclasses.replace(engine, passed=False, detail="EAGLE-3 after the patch: boom")
    text = _claims(_facts(plan, cpu, llm, failed))
    assert f"- Not shown by the tests here: that `{ENABLE}` {SERVES}." in text
    assert "The engine on CPU: EAGLE-3 after the patch: boom" in text and asserted not in text
    # A plan for a set of targets sharing one decoder claims it of each of them.
    shared = dataclasses.replace(
        plan, resolves=[*plan.resolves, dataclasses.replace(plan.resolves[0], class_name="Other")]
    )
    assert f"- `{ENABLE}`, `Other` {SERVES}: " in _claims(_facts(shared, cpu, llm, engine))
