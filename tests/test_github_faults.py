"""Every write the bot makes on GitHub, under every failure GitHub and networks produce.

The GitHub stand-in fails one request at a time, *before* it takes effect or *after* it did:
a 502/504, a connection reset, a reply held back past the client's timeout, a chunked reply
cut in half. Whatever happens, each write has exactly one effect (one PR, one comment, one
label, one dashboard issue) and the client says what is really there. Rate limits are waited
out only within ``BOT_GITHUB_MAX_WAIT``; past it, a one-line error and nothing written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
import pytest

from bot.errors import BotError
from bot.github.client import GitHubClient, GitHubWaitTooLong
from tests.github_standin import STANDIN_BOT_LOGIN, STANDIN_FORK_OWNER, GitHubStandIn

UPSTREAM = "vllm-project/vllm"
FORK = f"{STANDIN_FORK_OWNER}/vllm"
BOT_REPO = "someone/vllm-bot"
BRANCH = "bot/eagle3-interface/foo-for-causal-lm"
MARKER = "<!-- bot:fingerprint=eagle3-interface:FooForCausalLM:abc -->"
TIMEOUT = 1  # BOT_GITHUB_TIMEOUT in these tests
HELD_BACK = 2.5  # a "timeout" fault holds the reply this long: past TIMEOUT
SLACK = 15.0  # seconds for the requests themselves on a loaded machine

# (kind, when, status): the failures of one request.
FAULTS = [
    ("status", "before", 502),
    ("status", "after", 502),
    ("status", "before", 504),
    ("status", "after", 504),
    ("reset", "before", 0),
    ("reset", "after", 0),
    ("timeout", "before", 0),
    ("timeout", "after", 0),
    ("truncate", "after", 0),
]


@pytest.fixture
def standin(
    github_standin: GitHubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> GitHubStandIn:
    """The upstream with issue #7 (and one stranger's comment), a fork whose bot branch
    exists, and the bot's repository for the dashboard issue."""
    seed = tmp_path / "seed"
    repo = git.Repo.init(seed, initial_branch="main")
    (seed / "README").write_text("x\n")
    repo.index.add(["README"])
    actor = git.Actor("t", "t@example.invalid")
    repo.index.commit("base", author=actor, committer=actor)
    repo.git.branch(BRANCH)
    repo.close()
    github_standin.add_repo(UPSTREAM)
    github_standin.add_repo(FORK, seed_from=seed)
    github_standin.add_repo(BOT_REPO)
    github_standin.add_issue(UPSTREAM, 7, "EAGLE3 for Foo", "no eagle3")
    monkeypatch.setenv("BOT_GITHUB_TIMEOUT", str(TIMEOUT))
    return github_standin


@dataclass(frozen=True)
class Write:
    """One write endpoint: how to set the scene, make the write, and check its one effect."""

    method: str
    path: str
    arrange: Callable[[GitHubClient, GitHubStandIn], Any]
    act: Callable[[GitHubClient, Any], Any]
    check: Callable[[GitHubStandIn, Any, Any], None]


def _open_pull(client: GitHubClient, standin: GitHubStandIn, *, draft: bool = False) -> int:
    pull, _ = client.create_pull(
        title="Fix Foo",
        body=f"body\n{MARKER}",
        head=f"{STANDIN_FORK_OWNER}:{BRANCH}",
        base="main",
        draft=draft,
        marker=MARKER,
        repo=UPSTREAM,
    )
    return pull["number"]


def _create_pull(client: GitHubClient, _: Any) -> Any:
    return _open_pull(client, None)  # type: ignore[arg-type]


def _check_pull(standin: GitHubStandIn, _: Any, number: int) -> None:
    pulls = standin.pulls(UPSTREAM)
    assert [p["number"] for p in pulls] == [number]


def _comment(client: GitHubClient, body: str) -> tuple[str, str]:
    return client.upsert_issue_comment(7, "<!-- bot:status issue=7 -->", body, repo=UPSTREAM)


def _check_comment(body: str, what: str) -> Callable[[GitHubStandIn, Any, Any], None]:
    def check(standin: GitHubStandIn, _: Any, result: tuple[str, str]) -> None:
        ours = [c for c in standin.comments(UPSTREAM, 7) if c["user"]["login"] != "stranger"]
        assert [c["body"] for c in ours] == [body]
        assert result == (ours[0]["html_url"], what)

    return check


def _check_labels(standin: GitHubStandIn, number: int, result: bool) -> None:
    assert result is True
    assert [x["name"] for x in standin.issue(UPSTREAM, number)["labels"]] == ["bot:eagle3"]


def _check_pull_edit(standin: GitHubStandIn, number: int, result: dict[str, Any]) -> None:
    assert result["body"] == f"new\n{MARKER}"
    assert [p["body"] for p in standin.pulls(UPSTREAM)] == [f"new\n{MARKER}"]


def _check_ready(standin: GitHubStandIn, number: int, _: Any) -> None:
    assert [p["draft"] for p in standin.pulls(UPSTREAM)] == [False]


def _check_issue(standin: GitHubStandIn, _: Any, created: dict[str, Any]) -> None:
    mine = [
        i
        for i in GitHubClient().list_issues(BOT_REPO, creator=STANDIN_BOT_LOGIN, state="all")
        if not i.get("pull_request")
    ]
    assert [i["number"] for i in mine] == [created["number"]]


def _check_issue_edit(standin: GitHubStandIn, number: int, edited: dict[str, Any]) -> None:
    assert edited["body"] == "- [x] one" == standin.issue(BOT_REPO, number)["body"]


WRITES = {
    "create-pull": Write("POST", r"/pulls$", lambda c, s: None, _create_pull, _check_pull),
    "create-comment": Write(
        "POST",
        r"/issues/7/comments$",
        lambda c, s: None,
        lambda c, _: _comment(c, "<!-- bot:status issue=7 -->\nA fix is proposed."),
        _check_comment("<!-- bot:status issue=7 -->\nA fix is proposed.", "created"),
    ),
    "edit-comment": Write(
        "PATCH",
        r"/issues/comments/\d+$",
        lambda c, s: _comment(c, "<!-- bot:status issue=7 -->\nold"),
        lambda c, _: _comment(c, "<!-- bot:status issue=7 -->\nnew"),
        _check_comment("<!-- bot:status issue=7 -->\nnew", "updated"),
    ),
    "add-labels": Write(
        "POST",
        r"/issues/\d+/labels$",
        lambda c, s: _open_pull(c, s),
        lambda c, n: c.add_labels(n, ["bot:eagle3"], repo=UPSTREAM),
        _check_labels,
    ),
    "edit-pull": Write(
        "PATCH",
        r"/pulls/\d+$",
        lambda c, s: _open_pull(c, s),
        lambda c, n: c.edit_pull(n, title="Fix Foo", body=f"new\n{MARKER}", repo=UPSTREAM),
        _check_pull_edit,
    ),
    "mark-ready": Write(
        "POST",
        r"/api/graphql$",
        lambda c, s: _open_pull(c, s, draft=True),
        lambda c, n: c.mark_ready_for_review(n, repo=UPSTREAM),
        _check_ready,
    ),
    "create-issue": Write(
        "POST",
        r"/repos/someone/vllm-bot/issues$",
        lambda c, s: None,
        lambda c, _: c.create_issue(BOT_REPO, "dashboard", "- [ ] one"),
        _check_issue,
    ),
    "edit-issue": Write(
        "PATCH",
        r"/repos/someone/vllm-bot/issues/\d+$",
        lambda c, s: c.create_issue(BOT_REPO, "dashboard", "- [ ] one")["number"],
        lambda c, n: c.edit_issue(BOT_REPO, n, body="- [x] one"),
        _check_issue_edit,
    ),
}


@pytest.mark.parametrize(("kind", "when", "status"), FAULTS, ids=lambda x: str(x))
@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_failed_write_has_exactly_one_effect(
    standin: GitHubStandIn, name: str, kind: str, when: str, status: int
) -> None:
    write = WRITES[name]
    client = GitHubClient()
    # Someone else's comment carrying our marker must never be taken for ours.
    standin.add_token("ghp_strangerTOKEN0123456789abcdefghijkl", "stranger")
    GitHubClient(token="ghp_strangerTOKEN0123456789abcdefghijkl").upsert_issue_comment(
        7, "x", "<!-- bot:status issue=7 --> quoted", repo=UPSTREAM
    )
    scene = write.arrange(client, standin)
    standin.inject(write.method, write.path, status, kind=kind, when=when, delay=HELD_BACK)
    started = time.monotonic()

    result = write.act(client, scene)

    elapsed = time.monotonic() - started
    write.check(standin, scene, result)
    assert not [f for f in standin.state.faults if f.times], "the fault was never hit"
    # Bounded by the configured waits: BOT_GITHUB_MAX_WAIT is 0 here, so only the request
    # timeouts and the held-back reply can take time.
    assert elapsed < HELD_BACK + 3 * TIMEOUT + SLACK


def test_a_write_that_keeps_failing_before_acting_gives_up_in_one_line(standin) -> None:
    standin.inject("POST", r"/issues/7/comments$", 502, times=10)
    with pytest.raises(BotError) as caught:
        _comment(GitHubClient(), "<!-- bot:status issue=7 -->\nhello")
    assert "\n" not in str(caught.value) and "502" in str(caught.value)
    assert standin.comments(UPSTREAM, 7) == []
    posts = [w for w in standin.writes() if w["path"].endswith("/issues/7/comments")]
    assert len(posts) == 3  # sent, looked, sent, looked, sent, looked: never more


def _primary_limit(reset_in: float, status: int = 403) -> dict[str, Any]:
    return {
        "status": status,
        "headers": {
            "X-RateLimit-Limit": "5000",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(int(time.time() + reset_in)),
        },
        "message": "API rate limit exceeded for user ID 1.",
    }


@pytest.mark.parametrize("status", [403, 429])
def test_a_primary_limit_past_the_wait_cap_is_one_line_and_quick(
    standin, monkeypatch, status
) -> None:
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "3")
    standin.inject("POST", r"/issues/7/comments$", **_primary_limit(3600, status))
    started = time.monotonic()
    with pytest.raises(GitHubWaitTooLong) as caught:
        _comment(GitHubClient(), "<!-- bot:status issue=7 -->\nhello")
    assert time.monotonic() - started < 3 + SLACK  # never the hour to the reset
    assert "BOT_GITHUB_MAX_WAIT" in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value.exit_code == 2
    assert standin.comments(UPSTREAM, 7) == []
    # The next run, after the reset, resumes cleanly.
    assert _comment(GitHubClient(), "<!-- bot:status issue=7 -->\nhello")[1] == "created"
    assert len(standin.comments(UPSTREAM, 7)) == 1


def test_a_primary_limit_within_the_wait_cap_is_waited_out(standin, monkeypatch) -> None:
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "5")
    standin.inject("POST", r"/issues/7/comments$", **_primary_limit(1))
    started = time.monotonic()
    assert _comment(GitHubClient(), "<!-- bot:status issue=7 -->\nhi")[1] == "created"
    assert time.monotonic() - started < 5 + SLACK
    assert len(standin.comments(UPSTREAM, 7)) == 1
    assert not [f for f in standin.state.faults if f.times]


@pytest.mark.parametrize(
    ("retry_after", "max_wait", "fits"), [("1", "3", True), ("60", "3", False)]
)
def test_a_secondary_limit_is_retried_only_within_the_wait_cap(
    standin, monkeypatch, retry_after, max_wait, fits
) -> None:
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", max_wait)
    standin.inject("POST", r"/pulls$", 403, {"Retry-After": retry_after})
    started = time.monotonic()
    if fits:
        _create_pull(GitHubClient(), None)
        assert len(standin.pulls(UPSTREAM)) == 1
    else:
        with pytest.raises(GitHubWaitTooLong):
            _create_pull(GitHubClient(), None)
        assert standin.pulls(UPSTREAM) == []
    assert time.monotonic() - started < float(max_wait) + SLACK


def test_all_waits_of_a_client_share_one_budget(standin, monkeypatch) -> None:
    """Two waits of 2 s each do not both fit in BOT_GITHUB_MAX_WAIT=3."""
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "3")
    standin.inject("GET", r"/issues/7$", 503, {"Retry-After": "2"}, times=2)
    client = GitHubClient()
    with pytest.raises(GitHubWaitTooLong):
        client.get_issue(7)
        client.get_issue(7)


def test_a_lost_dispatch_answer_is_not_sent_again(standin) -> None:
    standin.inject("POST", r"/dispatches$", 502, when="after", kind="status", delay=HELD_BACK)
    with pytest.raises(BotError, match="not dispatched again"):
        GitHubClient().dispatch_workflow(BOT_REPO, "gpu-test.yml", "main", {"m": "1"})
    assert len(standin.runs()) == 1


def test_an_unreachable_github_is_one_line_and_exit_2(standin, monkeypatch, capsys) -> None:
    import socket

    from bot.cli import main

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("GITHUB_API_URL", f"http://127.0.0.1:{port}/api/v3")
    monkeypatch.setenv("BOT_GITHUB_RETRIES", "1")
    assert main(["sync"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bot: ") and err.count("\n") == 1 and "Traceback" not in err


def test_a_reset_read_is_retried_and_a_cut_off_read_is_one_line(standin) -> None:
    standin.inject("GET", r"/issues/7/comments$", 0, kind="reset", when="before")
    assert GitHubClient().get_issue(7)["title"] == "EAGLE3 for Foo"  # urllib3 retried it
    # A body cut off mid-way is read by requests after urllib3's retries are done: the read
    # fails as one line (the next run reads again), never with a traceback.
    standin.inject("GET", r"/issues/7$", 0, kind="truncate", when="after")
    with pytest.raises(BotError) as caught:
        GitHubClient().get_issue(7)
    assert "ChunkedEncodingError" in str(caught.value) and "\n" not in str(caught.value)
    assert not [f for f in standin.state.faults if f.times]
