"""The dashboard over HTTP: read-only for anonymous viewers, CSRF-checked maintainer actions,
escaped issue text, a GitHub-token login against the stand-in, and approve-publishes-once."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from bot.dashboard.app import DashboardSettings, create_app
from bot.store import APPROVED, PR_OPEN, PROPOSED, REJECTED, VERIFIED, Journal
from bot.tree.fetch import release_tree
from tests.conftest import UPSTREAM
from tests.dashboard_seed import csrf_from, populate, serve_in_thread
from tests.github_standin import STANDIN_BOT_LOGIN, STANDIN_TOKEN, GitHubStandIn

pytestmark = pytest.mark.vllm_tree


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "journal.sqlite3")


@pytest.fixture
def ids(journal: Journal, tmp_path: Path) -> dict[str, int]:
    return populate(journal, tmp_path, release_tree("0.23.0"))


def _settings(**overrides: object) -> DashboardSettings:
    base: dict[str, object] = {
        "maintainers": frozenset({"alice"}),
        "api_url": "http://127.0.0.1:9/unused",
        "secret_key": "test-secret",
    }
    base.update(overrides)
    return DashboardSettings(**base)  # type: ignore[arg-type]


def test_overview_lists_counts_proposals_and_findings(
    journal: Journal, ids: dict[str, int]
) -> None:
    client = TestClient(create_app(journal, _settings()))
    page = client.get("/")
    assert page.status_code == 200
    assert "[Model] Qwen3-Next: support EAGLE-3" in page.text
    assert "Model2ForCausalLM" in page.text
    filtered = client.get("/", params={"q": "Model1"}).text
    assert "Model1ForCausalLM" in filtered and "Model2ForCausalLM" not in filtered
    assert 'class="state state-verified"' in page.text


def test_proposal_page_renders_diff_markdown_and_verification(
    journal: Journal, ids: dict[str, int]
) -> None:
    client = TestClient(create_app(journal, _settings()))
    page = client.get(f"/proposals/{ids['seed']}").text
    assert '<div class="highlight">' in page and "SupportsEagle3" in page
    assert "<table>" in page  # the write-up's markdown table, rendered
    assert "bot:fingerprint" not in page  # hidden markers stay hidden, as on GitHub
    assert "https://github.com/vllm-project/vllm/issues/33329" in page
    assert "https://github.com/example/bot/actions/runs/42" in page
    assert "1 passed" in page
    assert "inner model inherits EagleModelMixin" in page
    assert client.get("/proposals/424242").status_code == 404


def test_hostile_issue_text_stays_text(journal: Journal, ids: dict[str, int]) -> None:
    client = TestClient(create_app(journal, _settings()))
    for url in ("/", f"/proposals/{ids['hostile']}"):
        page = client.get(url).text
        assert "<script>window.pwned" not in page
        assert "<img src=x" not in page
        assert 'href="javascript:' not in page
    assert (
        "&lt;script&gt;window.pwned=1&lt;/script&gt;"
        in client.get(f"/proposals/{ids['hostile']}").text
    )


def test_anonymous_viewers_are_read_only(journal: Journal, ids: dict[str, int]) -> None:
    client = TestClient(create_app(journal, _settings()))
    page = client.get(f"/proposals/{ids['seed']}").text
    assert 'id="approve"' not in page and "Sign in" in page
    token = csrf_from(client.get("/login").text)  # a valid token does not make a maintainer
    refused = client.post(f"/proposals/{ids['seed']}/reject", data={"csrf": token})
    assert refused.status_code == 403
    assert journal.proposal(ids["seed"]).state == VERIFIED


def test_actions_need_the_session_csrf_token(journal: Journal, ids: dict[str, int]) -> None:
    client = TestClient(create_app(journal, _settings(as_login="alice")))
    page = client.get(f"/proposals/{ids['seed']}").text
    assert client.post(f"/proposals/{ids['seed']}/reject").status_code == 403
    forged = client.post(f"/proposals/{ids['seed']}/reject", data={"csrf": "forged"})
    assert forged.status_code == 403
    other_tab = TestClient(create_app(journal, _settings(as_login="alice", secret_key="other")))
    assert (
        other_tab.post(
            f"/proposals/{ids['seed']}/reject", data={"csrf": csrf_from(page)}
        ).status_code
        == 403
    )  # a token without its session is worthless
    assert journal.proposal(ids["seed"]).state == VERIFIED

    done = client.post(
        f"/proposals/{ids['seed']}/reverify", data={"csrf": csrf_from(page)}, follow_redirects=True
    )
    assert "Queued for re-verification." in done.text
    assert journal.proposal(ids["seed"]).state == PROPOSED
    done = client.post(
        f"/proposals/{ids['seed']}/reject",
        data={"csrf": csrf_from(done.text), "note": "<b>nope</b>"},
        follow_redirects=True,
    )
    assert journal.proposal(ids["seed"]).state == REJECTED
    assert "&lt;b&gt;nope&lt;/b&gt;" in done.text
    assert journal.events(ids["seed"])[-1].actor == "alice"


def test_token_login_against_github(
    journal: Journal, ids: dict[str, int], github_standin: GitHubStandIn
) -> None:
    github_standin.add_token("ghp_aliceTOKEN0123456789abcdefghijklmn", "alice")
    settings = _settings(api_url=github_standin.api_url)
    client = TestClient(create_app(journal, settings))

    bad = client.post("/login", data={"csrf": csrf_from(client.get("/login").text), "token": "x"})
    assert bad.status_code == 403 and "did not accept" in bad.text

    response = client.post(
        "/login",
        data={
            "csrf": csrf_from(client.get("/login").text),
            "token": "ghp_aliceTOKEN0123456789abcdefghijklmn",
        },
        follow_redirects=False,
    )
    assert response.status_code == 303
    cookie = response.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    assert "ghp_alice" not in cookie
    page = client.get(f"/proposals/{ids['seed']}").text
    assert 'id="approve"' in page and "ghp_alice" not in page

    # A valid login that is not on the allow-list stays read-only.
    viewer = TestClient(create_app(journal, settings))
    viewer.post(
        "/login", data={"csrf": csrf_from(viewer.get("/login").text), "token": STANDIN_TOKEN}
    )
    page = viewer.get(f"/proposals/{ids['seed']}").text
    assert f"{STANDIN_BOT_LOGIN} is not on the maintainer list" in page
    assert 'id="approve"' not in page


def test_openapi_documents_the_json_api(journal: Journal, ids: dict[str, int]) -> None:
    client = TestClient(create_app(journal, _settings()))
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/api/summary",
        "/api/proposals",
        "/api/proposals/{proposal_id}",
        "/api/findings",
    } <= set(paths)
    assert not any(not p.startswith("/api/") for p in paths)
    detail = client.get(f"/api/proposals/{ids['seed']}").json()
    assert detail["state"] == VERIFIED and detail["events"][0]["action"] == "recorded"
    assert client.get("/api/summary").json()["findings_total"] == 4
    assert client.get("/api/proposals", params={"state": "bogus"}).status_code == 422


def test_approve_publishes_exactly_once_with_double_clicks_and_two_tabs(
    journal: Journal, ids: dict[str, int], upstream_standin: GitHubStandIn
) -> None:
    # The real publisher (bot.publish.publish_plan) against the stand-in: push to the fork,
    # open the PR, comment on the issue. Only the winner of the claim may do any of it.
    app = create_app(journal, _settings(as_login="alice"))
    with serve_in_thread(app) as base:
        tabs = [
            httpx.Client(base_url=base, timeout=120) for _ in range(2)
        ]  # publishing fetches the base
        forms = [csrf_from(tab.get(f"/proposals/{ids['seed']}").text) for tab in tabs]
        barrier = threading.Barrier(4)
        statuses: list[int] = []

        def click(tab: httpx.Client, token: str) -> None:
            barrier.wait()
            response = tab.post(f"/proposals/{ids['seed']}/approve", data={"csrf": token})
            statuses.append(response.status_code)

        clicks = [
            threading.Thread(target=click, args=(tabs[n % 2], forms[n % 2])) for n in range(4)
        ]
        for thread in clicks:
            thread.start()
        for thread in clicks:
            thread.join()
        assert statuses == [303] * 4
        page = tabs[1].get(f"/proposals/{ids['seed']}").text
        for tab in tabs:
            tab.close()

    pulls = upstream_standin.pulls(UPSTREAM)
    assert len(pulls) == 1 and "Reviewed and approved by @alice" in pulls[0]["body"]
    assert len(upstream_standin.comments(UPSTREAM, 33329)) == 1
    pull_posts = [
        w
        for w in upstream_standin.writes()
        if w["method"] == "POST" and w["path"].endswith("/pulls")
    ]
    assert len(pull_posts) == 1
    proposal = journal.proposal(ids["seed"])
    assert proposal.state == PR_OPEN and proposal.pr_number is not None
    assert [e.to_state for e in journal.events(ids["seed"])].count(APPROVED) == 1
    assert 'id="approve"' not in page


def test_failed_publish_hands_the_proposal_back(journal: Journal, ids: dict[str, int]) -> None:
    def publish(plan_dir: Path, reviewer: str) -> None:
        raise RuntimeError(f"push refused for {STANDIN_TOKEN}")

    client = TestClient(create_app(journal, _settings(as_login="alice"), publish=publish))
    page = client.get(f"/proposals/{ids['seed']}").text
    done = client.post(
        f"/proposals/{ids['seed']}/approve", data={"csrf": csrf_from(page)}, follow_redirects=True
    )
    assert "Publishing failed" in done.text and STANDIN_TOKEN not in done.text
    assert journal.proposal(ids["seed"]).state == VERIFIED
    assert all(STANDIN_TOKEN not in e.note for e in journal.events(ids["seed"]))
