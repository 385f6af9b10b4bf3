"""The commands keep the journal the dashboard reads: scan, propose and publish record into it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot import pipeline
from bot.content_hash import review_hash
from bot.dashboard.actions import approve
from bot.journal.store import MERGED, PR_OPEN, PROPOSED, VERIFIED, Journal
from bot.publish.pr import publish_plan
from bot.tree.fetch import release_tree
from tests.attest import READS
from tests.cli import propose_issue, run_bot
from tests.conftest import UPSTREAM
from tests.github_standin import GitHubStandIn

pytestmark = pytest.mark.vllm_tree
# The name and address maintainer1 confirms on the approve form.
MAINTAINER1_SIGNOFF = ("Maintainer One", "maintainer1@users.noreply.github.com", ())


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
    result = pipeline.publish(seed_plan, reviewer="maintainer1", attest=READS)
    assert result.action == "opened"
    [proposal] = Journal().proposals()
    assert proposal.state == PR_OPEN
    assert proposal.pr_number == upstream_standin.pulls(UPSTREAM)[0]["number"]


def test_a_merged_pr_approved_from_the_dashboard_is_shown_as_merged(
    seed_plan: Path, upstream_standin: GitHubStandIn
) -> None:
    # Published earlier (another deployment, or a journal rebuilt since) and merged upstream.
    first = publish_plan(seed_plan, reviewer=None, attest=READS)
    upstream_standin.close_pull(UPSTREAM, first.pr_number or 0, merged=True)
    journal = Journal()
    proposal_id = journal.record_proposal(seed_plan)
    assert journal.record_verification(proposal_id, {"passed": True, "checks": []}) == VERIFIED

    outcome = approve(
        journal,
        proposal_id,
        "maintainer1",
        approved_hash=_shown(journal, proposal_id),
        read_every_line=True,
        signoff=MAINTAINER1_SIGNOFF,
    )

    assert outcome.done, outcome.message
    proposal = journal.proposal(proposal_id)
    assert proposal.state == MERGED
    assert proposal.pr_number == first.pr_number
    assert len(upstream_standin.pulls(UPSTREAM)) == 1


def test_a_publish_that_reaches_no_pr_hands_the_approval_back(
    seed_plan: Path, upstream_standin: GitHubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_MAX_PRS_PER_HOUR", "0")
    journal = Journal()
    proposal_id = journal.record_proposal(seed_plan)
    journal.record_verification(proposal_id, {"passed": True, "checks": []})

    outcome = approve(
        journal,
        proposal_id,
        "maintainer1",
        approved_hash=_shown(journal, proposal_id),
        read_every_line=True,
        signoff=MAINTAINER1_SIGNOFF,
    )

    assert not outcome.done and "not opening a PR now" in outcome.message
    assert journal.proposal(proposal_id).state == VERIFIED
    assert upstream_standin.pulls(UPSTREAM) == []


def _shown(journal: Journal, proposal_id: int) -> str:
    """The review hash of what the dashboard shows the maintainer."""
    proposal = journal.as_published(proposal_id)
    return review_hash(proposal.patch, proposal.pr_markdown, proposal.plan)
