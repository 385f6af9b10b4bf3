"""The dashboard over HTTP: read-only for anonymous viewers, CSRF-checked maintainer actions,
escaped issue text, a GitHub-token login against the stand-in, and approve-publishes-once."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import git
import httpx
import pytest
from fastapi.testclient import TestClient

from bot.content_hash import review_hash
from bot.dashboard.app import DashboardSettings, create_app
from bot.journal.store import APPROVED, PR_OPEN, PROPOSED, REJECTED, VERIFIED, Journal
from bot.plan import read_plan_dir
from bot.tree.fetch import release_tree
from tests.conftest import FORK, UPSTREAM
from tests.dashboard_seed import (
    EXTRA_HUNK,
    approve_form,
    csrf_from,
    populate,
    seed_plan_dir,
    serve_in_thread,
)
from tests.github_standin import STANDIN_BOT_LOGIN, STANDIN_TOKEN, GitHubStandIn

pytestmark = pytest.mark.vllm_tree


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "journal.sqlite3")


@pytest.fixture
def ids(journal: Journal, tmp_path: Path) -> dict[str, int]:
    return populate(journal, tmp_path, release_tree("0.23.0"))


def _client(app: object) -> TestClient:
    # The dashboard answers only to the host names it is served under (DNS rebinding).
    return TestClient(app, base_url="http://127.0.0.1:8765")  # type: ignore[arg-type]


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
    client = _client(create_app(journal, _settings()))
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
    client = _client(create_app(journal, _settings()))
    page = client.get(f"/proposals/{ids['seed']}").text
    assert '<div class="highlight">' in page and "SupportsEagle3" in page
    assert "<table>" in page  # the write-up's markdown table, rendered
    assert "bot:fingerprint" not in page  # hidden markers stay hidden, as on GitHub
    assert "https://github.com/vllm-project/vllm/issues/33329" in page
    assert "https://github.com/example/bot/actions/runs/42" in page
    assert "1 passed" in page
    assert "inner model inherits EagleModelMixin" in page
    assert client.get("/proposals/424242").status_code == 404


def test_a_finding_and_a_proposal_that_build_on_a_core_fix_say_so(
    journal: Journal, ids: dict[str, int], tmp_path: Path
) -> None:
    core = {
        "recipe": "core-drafter-loader",
        "name": "load_eagle_model",
        "path": "vllm/v1/worker/gpu/spec_decode/eagle/utils.py",
        "why": "vLLM's drafter loaders read its decoder under names it does not use <b>",
    }
    finding = {
        "recipe": "eagle3-enable",
        "class": "GPTJForCausalLM",
        "path": "vllm/model_executor/models/gpt_j.py",
        "line": 245,
        "architectures": ["GPTJForCausalLM"],
        "evidence": {"builds_on": core},
        "summary": "can collect the aux hidden states, once the core plan is applied",
    }
    journal.record_findings([finding], release_tree("0.23.0"), "1e84f5b", "0.23.0")
    plan_dir = seed_plan_dir(tmp_path / "dependent", release_tree("0.23.0"))
    plan = json.loads((plan_dir / "plan.json").read_text())
    plan["finding"]["evidence"]["builds_on"] = core
    (plan_dir / "plan.json").write_text(json.dumps(plan))
    dependent = journal.record_proposal(plan_dir)
    client = _client(create_app(journal, _settings()))
    overview = client.get("/", params={"q": "GPTJ"}).text
    assert "builds on core-drafter-loader" in overview
    page = client.get(f"/proposals/{dependent}").text
    assert 'id="builds-on"' in page and "<code>load_eagle_model</code>" in page
    assert "&lt;b&gt;" in page  # the record's words are shown, never rendered
    assert 'id="builds-on"' not in client.get(f"/proposals/{ids['hostile']}").text


def test_hostile_issue_text_stays_text(journal: Journal, ids: dict[str, int]) -> None:
    client = _client(create_app(journal, _settings()))
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
    client = _client(create_app(journal, _settings()))
    page = client.get(f"/proposals/{ids['seed']}").text
    assert 'id="approve"' not in page and "Sign in" in page
    token = csrf_from(client.get("/login").text)  # a valid token does not make a maintainer
    refused = client.post(f"/proposals/{ids['seed']}/reject", data={"csrf": token})
    assert refused.status_code == 403
    assert journal.proposal(ids["seed"]).state == VERIFIED


def test_actions_need_the_session_csrf_token(journal: Journal, ids: dict[str, int]) -> None:
    client = _client(create_app(journal, _settings(as_login="alice")))
    page = client.get(f"/proposals/{ids['seed']}").text
    assert client.post(f"/proposals/{ids['seed']}/reject").status_code == 403
    forged = client.post(f"/proposals/{ids['seed']}/reject", data={"csrf": "forged"})
    assert forged.status_code == 403
    other_tab = _client(create_app(journal, _settings(as_login="alice", secret_key="other")))
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
    client = _client(create_app(journal, settings))

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
    viewer = _client(create_app(journal, settings))
    viewer.post(
        "/login", data={"csrf": csrf_from(viewer.get("/login").text), "token": STANDIN_TOKEN}
    )
    page = viewer.get(f"/proposals/{ids['seed']}").text
    assert f"{STANDIN_BOT_LOGIN} is not on the maintainer list" in page
    assert 'id="approve"' not in page


def test_openapi_documents_the_json_api(journal: Journal, ids: dict[str, int]) -> None:
    client = _client(create_app(journal, _settings()))
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
    # The real publisher (bot.publish.pr.publish_plan) against the stand-in: push to the fork,
    # open the PR, comment on the issue. Only the winner of the claim may do any of it.
    app = create_app(journal, _settings(as_login="alice"))
    with serve_in_thread(app) as base:
        # publishing fetches the base
        tabs = [httpx.Client(base_url=base, timeout=120) for _ in range(2)]
        forms = [approve_form(tab.get(f"/proposals/{ids['seed']}").text) for tab in tabs]
        barrier = threading.Barrier(4)
        statuses: list[int] = []

        def click(tab: httpx.Client, form: dict[str, str]) -> None:
            barrier.wait()
            response = tab.post(f"/proposals/{ids['seed']}/approve", data=form)
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
    assert len(pulls) == 1 and "@alice read every changed line of the patch" in pulls[0]["body"]
    assert len(upstream_standin.comments(UPSTREAM, 33329)) == 1
    pull_posts = [
        w
        for w in upstream_standin.writes()
        if w["method"] == "POST" and w["path"].endswith("/pulls")
    ]
    assert len(pull_posts) == 1
    proposal = journal.proposal(ids["seed"])
    assert proposal.state == PR_OPEN and proposal.pr_number is not None
    approvals = [e for e in journal.events(ids["seed"]) if e.to_state == APPROVED]
    assert len(approvals) == 1 and approvals[0].actor == "alice"
    shipped = read_plan_dir(Path(proposal.plan_path or ""))
    assert review_hash(shipped.patch, shipped.pr_markdown, shipped.plan) in approvals[0].note
    assert forms[0]["review_hash"] in approvals[0].note
    assert 'id="approve"' not in page


def test_approve_is_refused_when_the_patch_changed_after_the_page_was_loaded(
    journal: Journal, ids: dict[str, int], upstream_standin: GitHubStandIn
) -> None:
    # The maintainer reviews the page; then a hunk they never saw lands in patch.diff on disk
    # (same plan directory, same fingerprint). Their approve must not publish it.
    client = _client(create_app(journal, _settings(as_login="alice")))
    page = client.get(f"/proposals/{ids['seed']}").text
    form = approve_form(page)
    plan_dir = Path(journal.proposal(ids["seed"]).plan_path or "")
    shown = read_plan_dir(plan_dir)
    assert form["review_hash"] == review_hash(shown.patch, shown.pr_markdown, shown.plan)

    (plan_dir / "patch.diff").write_text(shown.patch + EXTRA_HUNK, encoding="utf-8")
    done = client.post(f"/proposals/{ids['seed']}/approve", data=form, follow_redirects=True)
    assert "changed after you loaded the page" in done.text
    assert upstream_standin.writes() == []
    assert upstream_standin.pulls(UPSTREAM) == []
    fork = git.Repo(upstream_standin.state.repos[FORK].git_dir)
    assert not [ref for ref in fork.references if ref.path.startswith("refs/heads/bot/")]
    assert journal.proposal(ids["seed"]).state == VERIFIED
    # The page now shows the hunk, with the hash of the new content in the form.
    again = client.get(f"/proposals/{ids['seed']}").text
    assert "never shown" in again
    assert approve_form(again)["review_hash"] != form["review_hash"]


def test_approve_without_the_reviewed_hash_publishes_nothing(
    journal: Journal, ids: dict[str, int]
) -> None:
    published: list[Path] = []

    def publish(plan_dir: Path, reviewer: str | None, approved_hash: str, **_: object) -> None:
        published.append(plan_dir)

    client = _client(create_app(journal, _settings(as_login="alice"), publish=publish))
    page = client.get(f"/proposals/{ids['seed']}").text
    for forged in ("", "sha256:" + "0" * 64):
        form = {**approve_form(page), "review_hash": forged}
        done = client.post(f"/proposals/{ids['seed']}/approve", data=form, follow_redirects=True)
        assert "Not approved" in done.text or "changed after you loaded" in done.text
    assert published == []
    assert journal.proposal(ids["seed"]).state == VERIFIED


def test_approve_without_reading_every_line_publishes_nothing(
    journal: Journal, ids: dict[str, int]
) -> None:
    """The form's "I read every changed line" box is the approving maintainer's attestation
    (AGENTS.md: the human must review every changed line); unticked, nothing is published."""
    from bot.publish.pr import PublishResult

    seen: list[object] = []

    def publish(
        plan_dir: Path, reviewer: str | None, approved_hash: str, **kw: object
    ) -> PublishResult:
        seen.append(kw.get("attestation"))
        return PublishResult("nothing-to-do", message="stub")

    client = _client(create_app(journal, _settings(as_login="alice"), publish=publish))
    page = client.get(f"/proposals/{ids['seed']}").text
    unticked = approve_form(page, read_every_line=False)
    done = client.post(f"/proposals/{ids['seed']}/approve", data=unticked, follow_redirects=True)
    assert "Not approved: tick that you read every changed line first" in done.text
    assert seen == [] and journal.proposal(ids["seed"]).state == VERIFIED
    client.post(f"/proposals/{ids['seed']}/approve", data=approve_form(page))
    [attestation] = seen
    assert (attestation.login, attestation.role, attestation.read_every_line) == (
        "alice",
        "approver",
        True,
    )


def test_failed_publish_hands_the_proposal_back(journal: Journal, ids: dict[str, int]) -> None:
    def publish(plan_dir: Path, reviewer: str | None, approved_hash: str, **_: object) -> None:
        raise RuntimeError(f"push refused for {STANDIN_TOKEN}")

    client = _client(create_app(journal, _settings(as_login="alice"), publish=publish))
    page = client.get(f"/proposals/{ids['seed']}").text
    done = client.post(
        f"/proposals/{ids['seed']}/approve", data=approve_form(page), follow_redirects=True
    )
    assert "Publishing failed" in done.text and STANDIN_TOKEN not in done.text
    assert journal.proposal(ids["seed"]).state == VERIFIED
    assert all(STANDIN_TOKEN not in e.note for e in journal.events(ids["seed"]))


def test_only_the_hosts_it_is_served_under_are_answered(
    journal: Journal, ids: dict[str, int]
) -> None:
    # DNS rebinding: evil.example resolves to 127.0.0.1, so the browser sends Host: evil.example.
    client = _client(create_app(journal, _settings(as_login="alice")))
    for host in (
        "evil.example",
        "evil.example:8765",
        "127.0.0.1.evil.example",
        "127.0.0.1@evil.example",
        "localhost.:8765",
        "",
    ):
        refused = client.get(f"/proposals/{ids['seed']}", headers={"Host": host})
        assert refused.status_code == 400, host
        assert 'id="approve"' not in refused.text
    page = client.get(f"/proposals/{ids['seed']}")
    posted = client.post(
        f"/proposals/{ids['seed']}/approve",
        data=approve_form(page.text),
        headers={"Host": "evil.example"},
    )
    assert posted.status_code == 400 and journal.proposal(ids["seed"]).state == VERIFIED
    for host in ("127.0.0.1:8765", "localhost:8765", "LOCALHOST", "[::1]:8765"):
        assert client.get("/", headers={"Host": host}).status_code == 200, host
    extra = _client(create_app(journal, _settings(allowed_hosts=("review.internal",))))
    assert extra.get("/", headers={"Host": "review.internal:443"}).status_code == 200


def test_every_response_forbids_framing_sniffing_and_foreign_content(
    journal: Journal, ids: dict[str, int]
) -> None:
    client = _client(create_app(journal, _settings()))
    for url in ("/", f"/proposals/{ids['seed']}", "/api/summary", "/static/style.css", "/nope"):
        response = client.get(url)
        csp = response.headers.get("content-security-policy", "")
        directives = dict((d.strip().split(" ", 1) + [""])[:2] for d in csp.split(";") if d.strip())
        assert directives.get("frame-ancestors") == "'none'", url
        assert directives.get("default-src") == "'none'", url
        assert "http" not in csp and "*" not in csp and "unsafe" not in csp, url
        assert response.headers.get("x-content-type-options") == "nosniff", url
        assert response.headers.get("x-frame-options") == "DENY", url
        assert response.headers.get("referrer-policy") == "no-referrer", url


def test_api_docs_load_nothing_from_elsewhere(journal: Journal, ids: dict[str, int]) -> None:
    client = _client(create_app(journal, _settings()))
    docs = client.get("/api/docs")
    assert docs.status_code == 200
    assert "<script" not in docs.text.lower()
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', docs.text)
    for path in ("/api/summary", "/api/proposals/{proposal_id}", "/api/findings"):
        assert path in docs.text
    assert client.get("/openapi.json").status_code == 200


def _signed_in_as_alice(journal: Journal, github_standin: GitHubStandIn):
    github_standin.add_token("ghp_aliceTOKEN0123456789abcdefghijklmn", "alice")
    app = create_app(journal, _settings(api_url=github_standin.api_url))
    client = _client(app)
    client.post(
        "/login",
        data={
            "csrf": csrf_from(client.get("/login").text),
            "token": "ghp_aliceTOKEN0123456789abcdefghijklmn",
        },
    )
    return app, client


def test_a_cross_site_visit_leaves_the_session_alone(
    journal: Journal, ids: dict[str, int], github_standin: GitHubStandIn
) -> None:
    app, client = _signed_in_as_alice(journal, github_standin)
    assert "Sign out" in client.get("/").text

    # A link on another site: SameSite=Strict keeps the cookie home, and the answer must not
    # set a fresh (signed-out) session over the maintainer's.
    for url in ("/", f"/proposals/{ids['seed']}", "/login", "/logout"):
        visit = _client(app).get(url, headers={"Sec-Fetch-Site": "cross-site"})
        assert "set-cookie" not in visit.headers, url
    # Logging out is a POST with the session's CSRF token, nothing less.
    assert client.get("/logout").status_code == 405
    assert client.post("/logout").status_code == 403
    assert client.post("/logout", data={"csrf": "forged"}).status_code == 403
    page = client.get("/").text
    assert "Sign out" in page and "alice" in page
    client.post("/logout", data={"csrf": csrf_from(page)})
    assert "Sign in" in client.get("/").text


def test_a_session_cookie_copied_before_logout_is_worthless_after_it(
    journal: Journal, ids: dict[str, int], github_standin: GitHubStandIn
) -> None:
    """The cookie is signed, not stored: without a server-side record, a copy taken before the
    maintainer signs out would keep acting as them for the cookie's 12 hours."""
    app, client = _signed_in_as_alice(journal, github_standin)
    page = client.get("/").text
    assert "Sign out" in page
    stolen = client.cookies.get("bot_session")
    assert stolen
    client.post("/logout", data={"csrf": csrf_from(page)})

    thief = _client(app)
    thief.cookies.set("bot_session", stolen)
    assert "Sign out" not in thief.get("/").text  # read as anonymous
    approve = thief.post(
        f"/proposals/{ids['seed']}/approve", data={"csrf": "x"}, follow_redirects=False
    )
    assert approve.status_code == 403
