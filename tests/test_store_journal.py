"""The journal: plan content kept, a validated state machine, atomic claims, findings."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from bot.errors import BotError
from bot.journal.store import (
    APPROVABLE,
    APPROVED,
    FAILED,
    FOUND,
    PR_OPEN,
    PROPOSED,
    REJECTED,
    VERIFIED,
    FindingFilter,
    Journal,
)
from bot.plan import read_plan_dir
from bot.tree.fetch import release_tree
from tests.dashboard_seed import SEED_CLASS, hostile_plan_dir, sample_findings, seed_plan_dir

pytestmark = pytest.mark.vllm_tree


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "journal.sqlite3")


@pytest.fixture
def tree() -> Path:
    return release_tree("0.23.0")


def test_default_path_is_under_bot_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_HOME", str(tmp_path / "home"))
    journal = Journal()
    assert journal.path == tmp_path / "home" / "journal.sqlite3"
    with sqlite3.connect(journal.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_record_proposal_is_idempotent_and_keeps_content(
    journal: Journal, tmp_path: Path, tree: Path
) -> None:
    plan_dir = seed_plan_dir(tmp_path, tree)
    first = journal.record_proposal(plan_dir)
    assert journal.record_proposal(plan_dir) == first
    assert len(journal.proposals()) == 1
    stored = journal.proposal(first)
    assert stored.state == VERIFIED  # the plan carried a passing verification
    assert stored.class_name == SEED_CLASS
    assert "+    SupportsEagle3,\n" in stored.patch
    assert stored.pr_title == "[Model] Qwen3-Next: support EAGLE-3"
    assert [e.action for e in journal.events(first)] == ["recorded"]

    # The dashboard must not depend on the plan directory surviving.
    shutil.rmtree(plan_dir)
    copy = read_plan_dir(journal.materialise(first))
    assert copy.patch == stored.patch
    assert copy.plan.fingerprint == stored.fingerprint
    assert copy.pr_markdown == stored.pr_markdown


def test_materialise_prefers_the_original_directory(
    journal: Journal, tmp_path: Path, tree: Path
) -> None:
    plan_dir = seed_plan_dir(tmp_path, tree)
    proposal_id = journal.record_proposal(plan_dir)
    assert journal.materialise(proposal_id) == plan_dir.resolve()


def test_reproposing_a_changed_patch_resets_to_proposed(
    journal: Journal, tmp_path: Path, tree: Path
) -> None:
    # A re-propose that replaces the patch must not keep the old patch's `verified`.
    plan_dir = seed_plan_dir(tmp_path, tree)
    proposal_id = journal.record_proposal(plan_dir)
    assert journal.proposal(proposal_id).state == VERIFIED
    journal.record_proposal(plan_dir)  # the same bytes again: still verified
    assert journal.proposal(proposal_id).state == VERIFIED

    (plan_dir / "patch.diff").write_text(
        read_plan_dir(plan_dir).patch + _EXTRA_HUNK, encoding="utf-8"
    )
    assert journal.record_proposal(plan_dir) == proposal_id
    stored = journal.proposal(proposal_id)
    assert stored.state == PROPOSED
    assert stored.patch.endswith(_EXTRA_HUNK)
    last = journal.events(proposal_id)[-1]
    assert (last.action, last.from_state, last.to_state) == ("reproposed", VERIFIED, PROPOSED)

    journal.claim(proposal_id, (PROPOSED,), REJECTED, "alice", "no")
    (plan_dir / "patch.diff").write_text(read_plan_dir(plan_dir).patch + "\n", encoding="utf-8")
    journal.record_proposal(plan_dir)
    assert journal.proposal(proposal_id).state == PROPOSED


_EXTRA_HUNK = """diff --git a/vllm/extra.py b/vllm/extra.py
new file mode 100644
--- /dev/null
+++ b/vllm/extra.py
@@ -0,0 +1 @@
+print("never shown")
"""


def test_state_machine_refuses_illegal_moves(journal: Journal, tmp_path: Path, tree: Path) -> None:
    proposal_id = journal.record_proposal(seed_plan_dir(tmp_path, tree))
    with pytest.raises(BotError, match="verified; it cannot become merged"):
        journal.transition(proposal_id, "merged", "alice")
    with pytest.raises(BotError, match="unknown proposal state"):
        journal.transition(proposal_id, "shipped", "alice")
    assert journal.transition(proposal_id, REJECTED, "alice", "not now") == VERIFIED
    assert journal.proposal(proposal_id).state == REJECTED
    last = journal.events(proposal_id)[-1]
    assert (last.actor, last.from_state, last.to_state, last.note) == (
        "alice",
        VERIFIED,
        REJECTED,
        "not now",
    )
    with pytest.raises(BotError, match="no proposal 999"):
        journal.transition(999, REJECTED, "alice")


def test_verification_moves_a_proposal(journal: Journal, tmp_path: Path, tree: Path) -> None:
    proposal_id = journal.record_proposal(seed_plan_dir(tmp_path, tree))
    journal.transition(proposal_id, PROPOSED, "alice", "re-verify")
    assert journal.record_verification(proposal_id, {"passed": False, "checks": []}) == FAILED
    assert journal.record_verification(proposal_id, {"passed": True, "checks": []}) == VERIFIED
    runs = journal.verifications(proposal_id)
    assert [run.passed for run in runs] == [True, False, True]
    assert journal.proposal(proposal_id).plan["verification"] == {"passed": True, "checks": []}


def test_only_one_of_many_racing_claims_wins(journal: Journal, tmp_path: Path, tree: Path) -> None:
    proposal_id = journal.record_proposal(seed_plan_dir(tmp_path, tree))
    results: list[str | None] = []
    barrier = threading.Barrier(8)

    def claim(n: int) -> None:
        barrier.wait()
        results.append(journal.claim(proposal_id, APPROVABLE, APPROVED, f"m{n}", "approve"))

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results, key=str) == [None] * 7 + [VERIFIED]
    assert [e.to_state for e in journal.events(proposal_id)].count(APPROVED) == 1


def test_record_pr_follows_github(journal: Journal, tmp_path: Path, tree: Path) -> None:
    proposal_id = journal.record_proposal(seed_plan_dir(tmp_path, tree))
    journal.claim(proposal_id, APPROVABLE, APPROVED, "alice", "")
    url = "https://github.com/vllm-project/vllm/pull/45319"
    assert journal.record_pr(proposal_id, 45319, url, "open") == PR_OPEN
    assert journal.record_pr(proposal_id, 45319, url, "merged") == "merged"
    stored = journal.proposal(proposal_id)
    assert (stored.pr_number, stored.pr_url, stored.state) == (45319, url, "merged")
    with pytest.raises(BotError, match="unknown PR state"):
        journal.record_pr(proposal_id, 1, url, "draft")


def test_triage_only_plan_starts_found(journal: Journal, tmp_path: Path) -> None:
    proposal_id = journal.record_proposal(hostile_plan_dir(tmp_path))
    assert journal.proposal(proposal_id).state == FOUND


def test_findings_replace_per_tree_and_filter(journal: Journal, tmp_path: Path, tree: Path) -> None:
    findings = sample_findings()
    assert journal.record_findings(findings, tree, "1e84f5b", "0.23.0") == 4
    journal.record_findings(findings[:2], tree, "abc", "0.34.0")
    journal.record_findings(findings[:1], tree, "abc", "0.34.0")  # a re-scan supersedes
    assert len(journal.findings()) == 5
    assert len(journal.findings(FindingFilter(version="0.34.0"))) == 1
    assert [f.class_name for f in journal.findings(FindingFilter(text="qwen3"))] == [SEED_CLASS]
    proposal_id = journal.record_proposal(seed_plan_dir(tmp_path, tree))
    seed_row = journal.findings(FindingFilter(text=SEED_CLASS))[0]
    assert (seed_row.proposal_id, seed_row.proposal_state) == (proposal_id, VERIFIED)
    summary = journal.summary()
    assert summary.findings_by_version == {"0.23.0": 4, "0.34.0": 1}
    assert summary.states[VERIFIED] == 1
    assert summary.recipes == {"eagle3-interface": {VERIFIED: 1}}
    with pytest.raises(BotError, match="lacks the field 'class'"):
        journal.record_findings([{"recipe": "x"}], tree, "abc", "0.34.0")
