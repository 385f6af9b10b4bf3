"""`bot propose --issue` keeps the three triage outcomes apart in the plan it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.tree.fetch import release_tree
from tests.cli import propose_issue

pytestmark = pytest.mark.vllm_tree

ERROR = "RuntimeError: Model does not support EAGLE3 interface"


def _propose(tmp_path: Path, body: str) -> dict:
    issue = {"number": 5, "title": "[Bug]: x", "body": body, "state": "open"}
    issue_file = tmp_path / "issue.json"
    issue_file.write_text(json.dumps(issue), encoding="utf-8")
    result = propose_issue(release_tree("0.34.0"), tmp_path / "plan", issue_file, number=5)
    assert result.returncode == 0, result.stderr
    return json.loads((tmp_path / "plan" / "plan.json").read_text())


def test_an_unrelated_issue_gets_a_record_and_no_question(tmp_path: Path) -> None:
    plan = _propose(tmp_path, "vllm serve Qwen/Qwen3-8B runs out of memory at TP=2")
    assert plan["status"] == "nothing-to-fix" and not plan.get("questions")
    assert plan["triage"]["outcome"] == "silent"
    assert "not the bot's to act on" in plan["reason"]


def test_an_ambiguous_issue_of_ours_gets_exactly_one_question(tmp_path: Path) -> None:
    plan = _propose(tmp_path, f"vllm serve /data/inhouse-ckpt\n{ERROR}")
    assert plan["status"] == "needs-info"
    assert len(plan["questions"]) == 1 and "/data/inhouse-ckpt" in plan["questions"][0]
