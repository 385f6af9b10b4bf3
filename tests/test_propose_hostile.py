"""Hostile issue text never reaches a shell, never becomes template code, and is escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.tree.fetch import release_tree
from tests.cli import propose_issue, run_bot

pytestmark = pytest.mark.vllm_tree

ERROR = (
    "RuntimeError: Model does not support EAGLE3 interface "
    "but aux_hidden_state_outputs was requested"
)


def hostile_issue(canary: Path) -> dict:
    payloads = [
        f"$(touch {canary}) `touch {canary}`; touch {canary} | cat && rm -rf ~",
        "{{ 7*7 }} {% for x in range(3) %}LOOP{% endfor %} {{ config.__class__ }}",
        "<script>alert(1)</script><img src=x onerror=alert(2)>",
        "<!-- vllm serve meta-llama/Llama-3.1-8B-Instruct -->",
        "\u202eFP8-\u2066Instruct\u2069",
    ]
    body = (
        "vllm serve /models/Qwen3-Next-80B-A3B-Instruct-FP8 "
        '--speculative-config \'{"method":"eagle3"}\'\n'
        + ERROR
        + "\n"
        + "\n".join(payloads)
        + "\n"
        + "x" * (1024 * 1024)
    )
    return {
        "number": 33329,
        "title": "Eagle3 fails {{ 7*7 }} <script>alert(1)</script> $(id)",
        "body": body,
        "user": {"login": "someone"},
    }


def test_hostile_issue_gives_a_safe_plan(tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    issue_file = tmp_path / "issue.json"
    issue_file.write_text(json.dumps(hostile_issue(canary)))
    out = tmp_path / "plan"
    result = propose_issue(release_tree("0.23.0"), out, issue_file)
    assert result.returncode == 0, result.stderr
    assert not canary.exists()
    plan = json.loads((out / "plan.json").read_text())
    assert plan["status"] == "ready"
    assert plan["triage"]["architecture"] == "Qwen3NextForCausalLM"  # not the hidden Llama
    pr = (out / "pr.md").read_text()
    for fragment in ("<script", "onerror", "{{", "{%", "49", "LOOP", "$(id)", "\u202e"):
        assert fragment not in pr, fragment
    # plan.json keeps the title only as escaped JSON data, never as markup
    raw = (out / "plan.json").read_text()
    assert "\u202e" not in raw and "<script>" in plan["issue_title"]


def test_malformed_issue_file_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "issue.json"
    bad.write_text("[1, 2")
    result = run_bot("propose", "--issue", "1", "--issue-file", str(bad))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
