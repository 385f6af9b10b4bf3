"""A refused eagle3-enable finding shows "needs a human: <reason>" in the dashboard."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from bot.dashboard.app import DashboardSettings, create_app
from bot.journal.store import Journal
from bot.scan.findings import scan
from tests.test_enable_shapes import FUSED_NORM, ISLICE, LAYER_PAIR, PAIR_CALL, _tree, decoder


def test_the_overview_shows_why_a_human_is_needed(tmp_path: Path) -> None:
    looped = decoder(ISLICE + PAIR_CALL + ISLICE + PAIR_CALL, FUSED_NORM)
    tree = _tree(tmp_path / "tree", LAYER_PAIR, looped)
    findings = [f.to_json() for f in scan(tree, use_cache=False).findings]
    (enable,) = [f for f in findings if f["recipe"] == "eagle3-enable"]
    journal = Journal(tmp_path / "journal.sqlite3")
    journal.record_findings(findings, tree, "", None)
    settings = DashboardSettings(
        maintainers=frozenset({"alice"}),
        api_url="http://127.0.0.1:9/unused",
        secret_key="test-secret",
    )
    client = TestClient(create_app(journal, settings), base_url="http://127.0.0.1:8765")
    page = client.get("/").text
    assert "DemoForCausalLM" in page
    assert "needs a human: DemoModel.forward loops over layers 2 times" in page
    assert enable["evidence"]["refused"].startswith("needs a human: ")
