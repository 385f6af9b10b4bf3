"""The dashboard in Debian's chromium: overview -> seed proposal -> approve -> state changes.

Populated like a real run: the seed proposal on vLLM 0.23.0 and the real findings of
``bot.pipeline.scan`` on 0.23.0 and 0.34.0. ``BOT_UPDATE_SCREENSHOTS=1`` writes the
screenshots to docs/screenshots/ (else to a temporary directory).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bot.dashboard.app import DashboardSettings, create_app
from bot.journal.store import PR_OPEN, Journal
from bot.pipeline import scan
from bot.tree.fetch import release_tree
from tests.conftest import UPSTREAM
from tests.dashboard_seed import (
    ALICE_SIGNOFF,
    HOSTILE_TITLE,
    SEED_CLASS,
    hostile_plan_dir,
    seed_plan_dir,
    serve_in_thread,
)
from tests.github_standin import GitHubStandIn

ALICE_TOKEN = "ghp_aliceTOKEN0123456789abcdefghijklmn"

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
    # DNS rebinding, simulated: an attacker's name that resolves to the dashboard's address.
    "--host-resolver-rules=MAP evil.example 127.0.0.1",
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
    # Approving publishes for real (bot.publish.pr.publish_plan) to the GitHub stand-in.
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

    # The form will not submit until the maintainer ticks that they read every changed line.
    page.click("#approve")
    assert page.locator(".title-row .state").inner_text() == "verified"
    assert len(upstream_standin.pulls(UPSTREAM)) == 0
    page.check("#read-every-line")
    page.click("#approve")  # nor without the name and e-mail the maintainer signs off with
    assert page.locator(".title-row .state").inner_text() == "verified"
    for tab in (page, second_tab):
        tab.fill("#signoff-name", ALICE_SIGNOFF["signoff_name"])
        tab.fill("#signoff-email", ALICE_SIGNOFF["signoff_email"])
    page.click("#approve")
    assert page.locator(".title-row .state").inner_text() == "pr open"
    assert "Approved and published" in page.locator(".flash").inner_text()
    assert page.locator("#approve").count() == 0
    assert journal.proposals()[-1].state == PR_OPEN
    assert len(upstream_standin.pulls(UPSTREAM)) == 1
    writes = len(upstream_standin.writes())

    # The second tab still shows the button; its approve is refused and publishes nothing.
    second_tab.check("#read-every-line")
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


@pytest.fixture
def attacker() -> Iterator[Callable[[str], str]]:
    """Another site (http://localhost:PORT, cross-site to 127.0.0.1): serve(html) -> its URL."""
    pages: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = pages.get(self.path, b"not here")
            self.send_response(200 if self.path in pages else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def serve(html: str) -> str:
        path = f"/page{len(pages)}.html"
        pages[path] = html.encode()
        return f"http://localhost:{server.server_address[1]}{path}"

    try:
        yield serve
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_rebinding_host_name_gets_400(page, base_url: str, journal: Journal) -> None:
    port = base_url.rsplit(":", 1)[1]
    response = page.goto(f"http://evil.example:{port}/proposals/1")
    assert response.status == 400
    assert page.locator("#approve").count() == 0
    assert page.goto(base_url + "/proposals/1").status == 200


def test_the_dashboard_cannot_be_framed(browser, base_url: str, attacker) -> None:
    # Click-jacking: the approve button under an invisible frame on another site.
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(attacker(f'<iframe id="f" src="{base_url}/proposals/1"></iframe>'))
        page.wait_for_load_state("load")
        framed = [f for f in page.frames if f != page.main_frame]
        assert len(framed) == 1
        assert framed[0].locator("#approve").count() == 0  # the browser refused to show it
        assert page.goto(base_url + "/proposals/1").status == 200  # unframed, it is there
        assert page.locator("#approve").count() == 1
    finally:
        context.close()


def test_a_cross_site_link_or_form_does_not_sign_the_maintainer_out(
    browser, journal: Journal, upstream_standin: GitHubStandIn, attacker
) -> None:
    upstream_standin.add_token(ALICE_TOKEN, "alice")
    settings = DashboardSettings(
        maintainers=frozenset({"alice"}),
        api_url=upstream_standin.api_url,
        secret_key="browser-test",
    )
    with serve_in_thread(create_app(journal, settings)) as base:
        context = browser.new_context(java_script_enabled=False)
        try:
            page = context.new_page()
            page.goto(base + "/login")
            page.fill("#token", ALICE_TOKEN)
            page.click("form[action='/login'] button")
            assert "Sign out" in page.locator(".who").inner_text()

            evil = attacker(
                f'<a id="home" href="{base}/">dashboard</a>'
                f'<a id="get" href="{base}/logout">log out</a>'
                f'<form method="post" action="{base}/logout"><button id="post">x</button></form>'
            )
            for control in ("#home", "#get", "#post"):
                page.goto(evil)
                page.click(control)
                page.wait_for_load_state("load")
                page.goto(base + "/")
                who = page.locator(".who").inner_text()
                assert "alice" in who and "Sign out" in who, control
            page.click(".who button")  # the real sign-out: a POST from our own page
            assert "Sign in" in page.locator(".who").inner_text()
        finally:
            context.close()


def test_pages_load_nothing_from_elsewhere_and_break_no_policy(
    browser, base_url: str, journal: Journal
) -> None:
    context = browser.new_context()  # JavaScript on: a script would run, a request would leave
    try:
        page = context.new_page()
        requests: list[str] = []
        console: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        page.on("console", lambda message: console.append(message.text))
        for path in ("/", "/proposals/1", "/api/docs", "/login"):
            assert page.goto(base_url + path).status == 200, path
        assert requests and all(url.startswith(base_url + "/") for url in requests), requests
        assert not [m for m in console if "Content Security Policy" in m], console
    finally:
        context.close()
