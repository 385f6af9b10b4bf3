"""The dashboard in Debian's chromium: overview -> seed proposal -> approve -> state changes.

Populated like a real run: the seed proposal on vLLM 0.23.0 and the real findings of
``bot.pipeline.scan`` on 0.23.0 and 0.34.0. ``BOT_UPDATE_SCREENSHOTS=1`` writes the
screenshots to docs/screenshots/ (else to a temporary directory).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.dashboard.app import DashboardSettings, create_app
from bot.pipeline import scan
from bot.store import PR_OPEN, Journal
from bot.tree.fetch import release_tree
from tests.conftest import UPSTREAM
from tests.dashboard_seed import (
    HOSTILE_TITLE,
    SEED_CLASS,
    hostile_plan_dir,
    seed_plan_dir,
    serve_in_thread,
)
from tests.github_standin import GitHubStandIn

pytestmark = [pytest.mark.browser, pytest.mark.vllm_tree]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    journal = Journal(tmp_path / "journal.sqlite3")
    for version in ("0.23.0", "0.34.0"):
        tree = release_tree(version)
        findings = [f.to_json() for f in scan(tree).findings]
        journal.record_findings(findings, tree, version, version)
    journal.record_proposal(seed_plan_dir(tmp_path, release_tree("0.23.0")))
    journal.record_proposal(hostile_plan_dir(tmp_path))
    return journal


@pytest.fixture
def base_url(journal: Journal, upstream_standin: GitHubStandIn) -> Iterator[str]:
    # Approving publishes for real (bot.publish.publish_plan) to the GitHub stand-in.
    settings = DashboardSettings(
        as_login="alice", maintainers=frozenset({"alice"}), secret_key="browser-test"
    )
    with serve_in_thread(create_app(journal, settings)) as url:
        yield url


@pytest.fixture
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        missing = "Debian's chromium is not installed (./dev setup installs it)"
        # CI installs it, so there a missing browser is a failure, not a quiet skip.
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser) -> Iterator[object]:
    # JavaScript off: every page and action must work without it.
    context = browser.new_context(
        viewport={"width": 1440, "height": 1000}, java_script_enabled=False
    )
    try:
        yield context.new_page()
    finally:
        context.close()


def _shots() -> Path:
    if os.environ.get("BOT_UPDATE_SCREENSHOTS"):
        target = REPO_ROOT / "docs" / "screenshots"
    else:
        target = Path(os.environ.get("PYTEST_TMP", "/tmp")) / "bot-dashboard-screenshots"
    target.mkdir(parents=True, exist_ok=True)
    return target


def test_review_and_approve_the_seed_proposal(
    page, base_url: str, journal: Journal, upstream_standin: GitHubStandIn
) -> None:
    page.goto(base_url + "/")
    assert page.locator("h1").first.inner_text() == "Overview"
    table = page.locator("#findings table")
    assert table.locator("tr", has_text="DomynEdgeForCausalLM").count() == 1  # 0.34.0's gaps
    assert table.locator("tr", has_text=SEED_CLASS).count() == 1  # the seed, on 0.23.0
    page.screenshot(path=str(_shots() / "overview.png"))

    page.click("text=[Model] Qwen3-Next: support EAGLE-3")
    assert page.locator("#proposal-title").inner_text() == "[Model] Qwen3-Next: support EAGLE-3"
    assert page.locator(".title-row .state").inner_text() == "verified"
    assert page.locator(".diff .highlight").inner_text().count("SupportsEagle3") == 2
    page.screenshot(path=str(_shots() / "proposal.png"), full_page=True)
    second_tab = page.context.new_page()
    second_tab.goto(page.url)

    page.click("#approve")
    assert page.locator(".title-row .state").inner_text() == "pr open"
    assert "Approved and published" in page.locator(".flash").inner_text()
    assert page.locator("#approve").count() == 0
    assert journal.proposals()[-1].state == PR_OPEN
    assert len(upstream_standin.pulls(UPSTREAM)) == 1
    writes = len(upstream_standin.writes())

    # The second tab still shows the button; its approve is refused and publishes nothing.
    second_tab.click("#approve")
    assert "already pr_open" in second_tab.locator(".flash").inner_text()
    assert len(upstream_standin.writes()) == writes


def test_a_hostile_issue_title_stays_text(browser, base_url: str) -> None:
    # JavaScript on here, so that an injected script would run and set window.pwned.
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(base_url + "/")
        row = page.locator("#proposals tr", has_text="EvilForCausalLM")
        assert HOSTILE_TITLE in row.inner_text()
        row.locator("a[href^='/proposals/']").click()
        assert page.locator("#proposal-title").inner_text() == HOSTILE_TITLE
        assert page.locator(".issue-title").inner_text() == HOSTILE_TITLE
        assert page.evaluate("window.pwned === undefined")
        assert page.locator("main script, main img").count() == 0
    finally:
        context.close()
