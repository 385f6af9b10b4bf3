"""The results section of the PR body, the JUnit summary and the scan matrix."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import cache_dir
from bot.markdown import inline
from bot.plan import READY, Plan
from bot.publish.contribution import validation_block
from bot.publish.render import END, START, code_block, replace_results_section
from bot.recipes.base import FixTests
from bot.verification import Verification
from bot.verify import matrix_from_findings, parse_junit

NOT_PASSED = {"passed": False, "local_passed": False, "message": ""}


def render_results(verification: Verification, verified: bool | None = None) -> str:
    """The body's results block for a plan whose only record is ``verification``."""
    plan = Plan(status=READY, reason="r", tests=FixTests(gpu=("tests/t.py::g",)))
    plan.verification = verification
    return validation_block(plan, verified)


def test_section_is_replaced_between_markers_or_appended() -> None:
    body = f"Title\n\nBefore.\n\n{START}\nold\n{END}\n\nAfter.\n"
    replaced = replace_results_section(body, "new")
    assert replaced == f"Title\n\nBefore.\n\n{START}\nnew\n{END}\n\nAfter.\n"
    assert replace_results_section(replaced, "newer").count(START) == 1
    appended = replace_results_section("Title\n\nBody.", "new")
    assert appended == f"Title\n\nBody.\n\n{START}\nnew\n{END}\n"


def test_untrusted_text_is_escaped() -> None:
    assert inline("[x](javascript:alert(1)) <img> | *b*") == (
        "\\[x\\](javascript:alert(1)) &lt;img&gt; \\| \\*b\\*"
    )
    block = code_block(f"a ``` b ````` c {END}")
    fence = block.splitlines()[0]
    assert fence == "``````text" and block.endswith("\n``````")
    assert END not in block


def test_render_shows_checks_gpu_and_only_safe_links() -> None:
    verification = {
        "passed": False,
        "local_passed": True,
        "message": "GPU test failure",
        "checks": [{"name": "ruff", "passed": None, "detail": "skipped: x"}],
        "gpu": {
            "mode": "dispatch",
            "conclusion": "failure",
            "run_url": "javascript:alert(1)",
            "log_excerpt": "E   assert False",
            "before": {"conclusion": "failure", "run_url": "https://github.com/o/r/actions/runs/1"},
        },
    }
    text = render_results(Verification.from_json(verification), verified=False)
    assert "| failure | dispatch run; before the patch: failure |" in text
    assert "| not run | ruff: skipped: x |" in text
    assert "javascript:" not in text.replace("\\", "")
    assert "```text\nE   assert False\n```" in text
    # A run the record calls passed is stated only once GitHub confirms it for this commit.
    passed = {**verification, "gpu": {**verification["gpu"], "conclusion": "success"}}
    preview = render_results(Verification.from_json(passed))
    assert "| not confirmed yet | the record says passed;" in preview
    assert "| passed |" not in render_results(Verification.from_json(passed), verified=False)
    confirmed = render_results(Verification.from_json(passed), verified=True)
    assert "| passed | run confirmed on GitHub: a passed gpu-verify run of this commit" in confirmed


def test_log_excerpts_and_details_name_local_places_instead_of_spelling_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "cache"))
    tree_file = f"{cache_dir()}/vllm-trees/0.34.0/vllm/model_executor/models/glm4.py"
    env_file = f"{Path.home()}/venvs/x/site-packages/torch/nn/modules/module.py"
    check = {
        "name": "cpu-tests",
        "passed": False,
        "detail": f"not checked: {tree_file} could not import",
        "log_excerpt": f'File "{tree_file}", line 3\nFile "{env_file}", line 9',
    }
    text = render_results(Verification.from_json({**NOT_PASSED, "checks": [check]}))
    assert str(cache_dir()) not in text and str(Path.home()) not in text
    assert 'File "<bot cache>/vllm-trees/0.34.0/vllm/model_executor/models/glm4.py"' in text
    assert 'File "~/venvs/x/site-packages/torch/nn/modules/module.py", line 9' in text
    assert "not checked: &lt;bot cache&gt;/vllm-trees/0.34.0/vllm/model\\_executor" in text


def test_parse_junit_counts_and_excerpts_failures() -> None:
    xml = (
        b'<testsuites><testsuite><testcase classname="t" name="a"/>'
        b'<testcase classname="t" name="b"><failure message="boom">trace</failure></testcase>'
        b'<testcase classname="t" name="c"><skipped/></testcase></testsuite></testsuites>'
    )
    run = parse_junit(xml)
    assert (run.conclusion, run.tests, run.failures, run.skipped) == ("failure", 3, 1, 1)
    assert "FAILURE t::b: boom\ntrace" in run.log_excerpt
    # Each case's outcome, for the claims a group's body makes per member.
    assert run.cases == {"t::a": "passed", "t::b": "failed", "t::c": "skipped"}
    assert "cases" not in run.to_json()
    assert parse_junit(b"<not xml").conclusion == "error"


def test_matrix_from_findings_dedupes_and_sanitises() -> None:
    findings = [
        {"recipe": "eagle3-interface", "class": "B", "path": "vllm/b.py", "line": 3},
        {"recipe": "eagle3-interface", "class": "A$(rm -rf)", "path": "vllm/a.py", "line": 1},
        {"recipe": "eagle3-interface", "class": "B", "path": "vllm/b.py", "line": 3},
    ]
    matrix = matrix_from_findings(findings)
    assert matrix == {
        "include": [
            {
                "id": "eagle3-interface:Arm-rf",
                "recipe": "eagle3-interface",
                "class": "Arm-rf",
                "path": "vllm/a.py",
                "line": 1,
            },
            {
                "id": "eagle3-interface:B",
                "recipe": "eagle3-interface",
                "class": "B",
                "path": "vllm/b.py",
                "line": 3,
            },
        ]
    }
    assert matrix_from_findings([]) == {"include": []}
