"""The commands keep the journal the dashboard reads: scan, propose and publish record into it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot import pipeline
from bot.store import PR_OPEN, PROPOSED, Journal
from bot.tree.fetch import release_tree
from tests.cli import propose_issue, run_bot
from tests.conftest import UPSTREAM
from tests.github_standin import GitHubStandIn

pytestmark = pytest.mark.vllm_tree


def test_scan_and_propose_record_what_the_dashboard_shows(tmp_path: Path) -> None:
    tree = release_tree("0.23.0")
    scanned = run_bot("scan", "--json", str(tree))
    assert scanned.returncode == 0, scanned.stderr
    journal = Journal()
    recorded = {(f.recipe, f.class_name) for f in journal.findings()}
    assert ("eagle3-interface", "Qwen3NextForCausalLM") in recorded
    assert {f.version for f in journal.findings()} == {"0.23.0"}

    proposed = propose_issue(tree, tmp_path / "plan")
    assert proposed.returncode == 0, proposed.stderr
    [proposal] = journal.proposals()
    assert proposal.class_name == "Qwen3NextForCausalLM" and proposal.state == PROPOSED
    assert proposal.issue_number == 33329

    # Proposing again updates the same row instead of adding one.
    assert propose_issue(tree, tmp_path / "plan").returncode == 0
    assert len(journal.proposals()) == 1


def test_publish_records_the_pull_request(seed_plan: Path, upstream_standin: GitHubStandIn) -> None:
    result = pipeline.publish(seed_plan, reviewer="maintainer1")
    assert result.action == "opened"
    [proposal] = Journal().proposals()
    assert proposal.state == PR_OPEN
    assert proposal.pr_number == upstream_standin.pulls(UPSTREAM)[0]["number"]
