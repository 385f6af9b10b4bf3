"""`bot sync` against the GitHub stand-in: the dashboard issue, ticking approves, rebuilds."""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from bot.content_hash import review_hash
from bot.dashboard.sync import DASHBOARD_MARKER, sync, ticked_boxes, who_ticked
from bot.github.client import BodyRevision, GitHubClient
from bot.journal.store import FOUND, PR_OPEN, VERIFIED, Journal
from bot.tree.fetch import release_tree
from tests.conftest import FORK, SUBMITTER_EMAIL, UPSTREAM
from tests.dashboard_seed import EXTRA_HUNK, HOSTILE_TITLE, populate
from tests.github_standin import STANDIN_BOT_LOGIN, GitHubStandIn

pytestmark = pytest.mark.vllm_tree


ALICE_TOKEN = "ghp_aliceTOKEN0123456789abcdefghijklmn"
EVE_TOKEN = "ghp_eveTOKEN0123456789abcdefghijklmnop"


@pytest.fixture
def dashboard_repo(upstream_standin: GitHubStandIn, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("BOT_REPO", "example/bot")
    monkeypatch.setenv("BOT_MAINTAINERS", "alice")
    upstream_standin.add_repo("example/bot")
    upstream_standin.add_token(ALICE_TOKEN, "alice")  # a maintainer
    upstream_standin.add_token(EVE_TOKEN, "eve")  # can edit the issue, is not a maintainer
    return "example/bot"


def _tick(body: str, fingerprint: str) -> str:
    line = next(x for x in body.splitlines() if f"bot:approve={fingerprint} " in x)
    assert line.startswith("- [ ] ")
    return body.replace(line, "- [x] " + line[len("- [ ] ") :])


def _as(token: str) -> GitHubClient:
    return GitHubClient(token=token)


def _dashboard_issue(github: GitHubClient) -> dict:
    issues = github.list_issues("example/bot", creator=STANDIN_BOT_LOGIN)
    assert len(issues) == 1
    return issues[0]


def test_dashboard_issue_lists_pending_and_a_maintainers_tick_approves_once(
    tmp_path: Path, upstream_standin: GitHubStandIn, dashboard_repo: str
) -> None:
    journal = Journal(tmp_path / "journal.sqlite3")
    ids = populate(journal, tmp_path, release_tree("0.23.0"))
    github = GitHubClient()
    publish = None  # the real bot.publish.pr.publish_plan, against the stand-in

    report = sync(journal, github, publish)
    issue = _dashboard_issue(github)
    assert report.dashboard_issue
    body = issue["body"]
    seed = journal.proposal(ids["seed"])
    shown = journal.as_published(ids["seed"])
    assert DASHBOARD_MARKER in body
    digest = review_hash(shown.patch, shown.pr_markdown, shown.plan)
    assert f"<!-- bot:approve={seed.fingerprint} review={digest} -->" in body
    assert "<script>" not in body and HOSTILE_TITLE not in body  # escaped as Markdown

    # A maintainer ticks the seed's box on GitHub.
    _as(ALICE_TOKEN).edit_issue(dashboard_repo, issue["number"], body=_tick(body, seed.fingerprint))
    report = sync(journal, github, publish)
    assert report.approved == [seed.fingerprint], report.refused
    assert journal.proposal(ids["seed"]).state == PR_OPEN
    sync(journal, github, publish)  # the tick is gone from the refreshed body: no re-publish
    pulls = upstream_standin.pulls(UPSTREAM)
    assert len(pulls) == 1  # published once, however often sync runs
    assert "@alice read every changed line of the patch" in pulls[0]["body"]  # who ticked it
    # The tick signs the commit off as alice (her profile's name, her noreply address), as
    # its line says; the operator only commits it.
    fork = git.Repo(upstream_standin.state.repos[FORK].git_dir)
    head = fork.commit(f"refs/heads/{seed.plan['branch']}")
    noreply = f"{upstream_standin.state.user_json('alice')['id']}+alice@users.noreply.github.com"
    assert (head.author.name, head.author.email) == ("Alice Approver", noreply)
    assert f"Signed-off-by: Alice Approver <{noreply}>" in head.message
    assert SUBMITTER_EMAIL not in head.message and head.committer.email == SUBMITTER_EMAIL
    issue = _dashboard_issue(github)
    assert seed.fingerprint not in issue["body"]
    assert journal.proposal(ids["hostile"]).state == FOUND


def test_a_tick_by_someone_not_in_bot_maintainers_publishes_nothing(
    tmp_path: Path, upstream_standin: GitHubStandIn, dashboard_repo: str
) -> None:
    journal = Journal(tmp_path / "journal.sqlite3")
    ids = populate(journal, tmp_path, release_tree("0.23.0"))
    github = GitHubClient()
    sync(journal, github)
    issue = _dashboard_issue(github)
    seed = journal.proposal(ids["seed"])

    # Eve ticks; then a maintainer edits the body without touching that box. The box was
    # still ticked by Eve, so it does not count.
    ticked = _tick(issue["body"], seed.fingerprint)
    _as(EVE_TOKEN).edit_issue(dashboard_repo, issue["number"], body=ticked)
    _as(ALICE_TOKEN).edit_issue(dashboard_repo, issue["number"], body=ticked + "\nthanks\n")
    report = sync(journal, github)
    assert report.approved == []
    assert any("eve" in line for line in report.refused)
    assert journal.proposal(ids["seed"]).state == VERIFIED
    assert upstream_standin.pulls(UPSTREAM) == []
    assert not [w for w in upstream_standin.writes() if w["path"].startswith("/api/v3/repos/vllm")]

    # The bot itself (it can edit its own issue) does not count either.
    issue = _dashboard_issue(github)
    github.edit_issue(dashboard_repo, issue["number"], body=_tick(issue["body"], seed.fingerprint))
    assert sync(journal, github).approved == []
    assert journal.proposal(ids["seed"]).state == VERIFIED


def test_a_tick_by_a_maintainer_github_knows_no_name_for_publishes_nothing(
    tmp_path: Path, upstream_standin: GitHubStandIn, dashboard_repo: str
) -> None:
    upstream_standin.add_user("alice", "")  # no name on her profile: nothing to sign with
    journal = Journal(tmp_path / "journal.sqlite3")
    ids = populate(journal, tmp_path, release_tree("0.23.0"))
    github = GitHubClient()
    sync(journal, github)
    issue = _dashboard_issue(github)
    seed = journal.proposal(ids["seed"])
    _as(ALICE_TOKEN).edit_issue(
        dashboard_repo, issue["number"], body=_tick(issue["body"], seed.fingerprint)
    )
    report = sync(journal, github)
    assert report.approved == []
    assert report.refused == [
        f"{seed.fingerprint}: not approved: @alice's GitHub profile has no name to sign the "
        "commit off with (DCO); set one there, or approve on the review dashboard; nothing was "
        "published"
    ]
    assert upstream_standin.pulls(UPSTREAM) == []
    assert journal.proposal(ids["seed"]).state == VERIFIED


def test_a_tick_of_content_that_changed_since_is_refused(
    tmp_path: Path, upstream_standin: GitHubStandIn, dashboard_repo: str
) -> None:
    journal = Journal(tmp_path / "journal.sqlite3")
    ids = populate(journal, tmp_path, release_tree("0.23.0"))
    github = GitHubClient()
    sync(journal, github)
    issue = _dashboard_issue(github)
    seed = journal.proposal(ids["seed"])
    plan_dir = Path(seed.plan_path or "")
    (plan_dir / "patch.diff").write_text(seed.patch + EXTRA_HUNK, encoding="utf-8")

    _as(ALICE_TOKEN).edit_issue(
        dashboard_repo, issue["number"], body=_tick(issue["body"], seed.fingerprint)
    )
    assert sync(journal, github).approved == []
    assert upstream_standin.pulls(UPSTREAM) == []
    assert journal.proposal(ids["seed"]).state == VERIFIED


def test_the_standin_answers_user_content_edits_as_github_does(
    upstream_standin: GitHubStandIn, dashboard_repo: str
) -> None:
    number = upstream_standin.add_issue(dashboard_repo, None, "t", "v1", user=STANDIN_BOT_LOGIN)
    github = GitHubClient()
    assert github.issue_body_history(dashboard_repo, number) == ("v1", [])  # never edited
    _as(EVE_TOKEN).edit_issue(dashboard_repo, number, body="v2")
    body, history = github.issue_body_history(dashboard_repo, number)
    assert body == "v2"
    assert [(r.editor, r.body) for r in history] == [("eve", "v2"), (STANDIN_BOT_LOGIN, "v1")]
    # A field GitHub does not have is a GraphQL error, as on GitHub.
    with pytest.raises(Exception, match="Cannot query field"):
        github._gh.requester.graphql_query(
            'query { repository(owner: "example", name: "bot") { issue(number: 1) '
            "{ userContentEdit { nodes { diff } } } } }",
            {},
        )


def test_sync_rebuilds_rows_from_published_markers(
    tmp_path: Path, github_standin: GitHubStandIn
) -> None:
    github_standin.add_repo("vllm-project/vllm")
    github_standin.add_issue(
        "vllm-project/vllm",
        None,
        "[Model] Foo: support EAGLE-3",
        "Body\n<!-- bot:fingerprint=eagle3-interface:FooForCausalLM:abc -->",
        user=STANDIN_BOT_LOGIN,
        labels=["bot:eagle3"],
    )
    journal = Journal(tmp_path / "journal.sqlite3")
    report = sync(journal, GitHubClient())
    assert len(report.rebuilt) == 1
    rebuilt = journal.proposal_by_fingerprint("eagle3-interface:FooForCausalLM:abc")
    assert rebuilt is not None and rebuilt.pr_title == "[Model] Foo: support EAGLE-3"
    assert sync(journal, GitHubClient()).rebuilt == []  # idempotent


FP = "eagle3-interface:FooForCausalLM:abc"
HASH = "sha256:" + "1" * 64


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (f"- [x] Foo — `verified` <!-- bot:approve={FP} review={HASH} -->", {(FP, HASH)}),
        (f"- [X] Foo <!-- bot:approve={FP} review={HASH} -->\r", {(FP, HASH)}),  # web editor
        (f"* [x] Foo <!-- bot:approve={FP} -->", {(FP, "")}),  # no hash: approve refuses it
        (f"- [ ] Foo <!-- bot:approve={FP} review={HASH} -->", set()),
        (f"- [x] <!-- bot:approve={FP} review={HASH} --> Foo", set()),  # not a task on GitHub
        (f"text - [x] Foo <!-- bot:approve={FP} review={HASH} -->", set()),
        (f"- [x] Foo \\<!-- bot:approve={FP} review={HASH} --> trailing", set()),
    ],
)
def test_ticked_boxes(line: str, expected: set[tuple[str, str]]) -> None:
    assert ticked_boxes(f"{DASHBOARD_MARKER}\n\n{line}\n- [ ] other\n") == expected


def test_who_ticked_is_the_editor_of_the_revision_that_ticked() -> None:
    box = (FP, HASH)
    open_ = f"- [ ] Foo <!-- bot:approve={FP} review={HASH} -->"
    ticked = open_.replace("[ ]", "[x]")

    def rev(editor: str | None, body: str | None) -> BodyRevision:
        return BodyRevision(editor, "2026-01-01T00:00:00Z", body)

    history = [rev("alice", ticked + "\nmore"), rev("eve", ticked), rev("bot", open_)]
    assert who_ticked(box, ticked + "\nmore", history) == "eve"
    assert who_ticked(box, ticked, [rev("alice", ticked), rev("bot", open_)]) == "alice"
    assert who_ticked(box, ticked, []) is None  # no history, no attribution
    assert who_ticked(box, ticked, [rev("alice", ticked)]) is None  # ticked from the start
    assert who_ticked(box, ticked, [rev("alice", "other"), rev("bot", open_)]) is None
    # A withheld revision before the tick hides who ticked: refused, not guessed.
    assert (
        who_ticked(box, ticked, [rev("alice", ticked), rev("x", None), rev("bot", open_)]) is None
    )
    assert who_ticked(box, ticked, [rev("a", ticked), rev("b", ticked), rev("x", None)]) is None
    assert who_ticked(box, ticked, [rev(None, ticked), rev("bot", open_)]) is None


def test_a_tick_on_a_line_whose_marker_was_swapped_approves_nothing(
    tmp_path: Path, upstream_standin: GitHubStandIn, dashboard_repo: str
) -> None:
    """Eve swaps two lines' hidden markers; Alice ticks the line that *shows* the hostile
    proposal, whose marker is now the seed's: the seed must not be published on that tick."""
    journal = Journal(tmp_path / "journal.sqlite3")
    ids = populate(journal, tmp_path, release_tree("0.23.0"))
    github = GitHubClient()
    sync(journal, github)
    issue = _dashboard_issue(github)
    seed, hostile = journal.proposal(ids["seed"]), journal.proposal(ids["hostile"])
    lines = issue["body"].splitlines()
    at = {
        fp: next(i for i, x in enumerate(lines) if f"bot:approve={fp} " in x)
        for fp in (seed.fingerprint, hostile.fingerprint)
    }
    text = {fp: lines[i].split("<!--")[0] for fp, i in at.items()}
    marker = {fp: "<!--" + lines[i].split("<!--", 1)[1] for fp, i in at.items()}
    lines[at[seed.fingerprint]] = text[seed.fingerprint] + marker[hostile.fingerprint]
    lines[at[hostile.fingerprint]] = text[hostile.fingerprint] + marker[seed.fingerprint]
    swapped = "\n".join(lines) + "\n"
    _as(EVE_TOKEN).edit_issue(dashboard_repo, issue["number"], body=swapped)

    # Alice ticks the line that reads as the hostile proposal (it carries the seed's marker).
    line = lines[at[hostile.fingerprint]]
    ticked = swapped.replace(line, "- [x] " + line[len("- [ ] ") :])
    _as(ALICE_TOKEN).edit_issue(dashboard_repo, issue["number"], body=ticked)
    report = sync(journal, github)
    assert report.approved == []
    assert any("marker moved" in why for why in report.refused), report.refused
    assert journal.proposal(ids["seed"]).state == VERIFIED
    assert upstream_standin.pulls(UPSTREAM) == []


def test_render_only_writes_the_issue_and_leaves_ticks_for_a_run_that_may_publish(
    tmp_path: Path,
    upstream_standin: GitHubStandIn,
    dashboard_repo: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scheduled workflow's dashboard job: a token that may write issues and nothing else,
    the journal the scan job handed over, its login named by BOT_LOGIN."""
    journal = Journal(tmp_path / "journal.sqlite3")
    ids = populate(journal, tmp_path, release_tree("0.23.0"))
    monkeypatch.setenv("BOT_LOGIN", STANDIN_BOT_LOGIN)
    github = GitHubClient()
    report = sync(journal, github, render_only=True)
    issue = _dashboard_issue(github)
    seed = journal.proposal(ids["seed"])
    assert report.dashboard_issue and f"bot:approve={seed.fingerprint} " in issue["body"]
    assert not any(r["path"].endswith("/user") for r in upstream_standin.request_log())

    ticked = _tick(issue["body"], seed.fingerprint)
    _as(ALICE_TOKEN).edit_issue(dashboard_repo, issue["number"], body=ticked)
    report = sync(journal, github, render_only=True)
    assert report.approved == [] and any("left ticked" in line for line in report.refused)
    assert upstream_standin.pulls(UPSTREAM) == []
    assert _dashboard_issue(github)["body"] == ticked  # the tick survives the re-render
    assert journal.proposal(ids["seed"]).state == VERIFIED

    report = sync(journal, github)  # a run that may publish acts on it
    assert report.approved == [seed.fingerprint], report.refused
    assert len(upstream_standin.pulls(UPSTREAM)) == 1
