"""GitHubClient against the stand-in: issues, comments, dashboard issues, Actions, triage."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime, timedelta

import pytest

from bot.cli import main
from bot.errors import BotError
from bot.github.client import GitHubClient
from bot.journal.store import Journal
from bot.tree.fetch import release_tree
from bot.triage.search import candidates_path, find_candidates, record_candidates
from tests.github_standin import STANDIN_BOT_LOGIN, STANDIN_TOKEN

UPSTREAM = "vllm-project/vllm"
BOT_REPO = "someone/vllm-bot"


@pytest.fixture
def standin(github_standin):
    github_standin.add_repo(UPSTREAM)
    github_standin.add_repo(BOT_REPO)
    return github_standin


def test_issue_with_comments_survives_faults(standin, monkeypatch):
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "2")  # Retry-After: 1 fits
    standin.add_issue(UPSTREAM, 33329, "EAGLE3 for Qwen3-Next", "body <script>")
    standin.inject("GET", r"/issues/33329$", 503, times=2)
    standin.inject("GET", r"/issues/33329$", 403, {"Retry-After": "1"}, times=1)
    client = GitHubClient()
    client.upsert_issue_comment(33329, "<!-- m -->", "<!-- m --> one")
    issue = client.get_issue(33329)
    assert issue["title"] == "EAGLE3 for Qwen3-Next" and issue["body"] == "body <script>"
    assert [c["body"] for c in issue["comments_list"]] == ["<!-- m --> one"]
    assert not [f for f in standin.state.faults if f.times]


def test_sticky_comment_ignores_markers_quoted_by_others(standin):
    number = standin.add_issue(UPSTREAM, None, "t", "b")
    client = GitHubClient()
    # Someone else quotes our marker: the bot must not try to edit their comment.
    standin.add_token("ghp_otherUSER0123456789abcdefghijklmnop", "stranger")
    GitHubClient(token="ghp_otherUSER0123456789abcdefghijklmnop").upsert_issue_comment(
        number, "<!-- m -->", "<!-- m --> quoted"
    )
    assert client.upsert_issue_comment(number, "<!-- m -->", "<!-- m --> a")[1] == "created"
    assert client.upsert_issue_comment(number, "<!-- m -->", "<!-- m --> a")[1] == "unchanged"
    assert client.upsert_issue_comment(number, "<!-- m -->", "<!-- m --> b")[1] == "updated"
    bodies = [c["body"] for c in standin.comments(UPSTREAM, number)]
    assert bodies == ["<!-- m --> quoted", "<!-- m --> b"]


def test_persistent_5xx_is_one_line_bot_error(standin, monkeypatch):
    monkeypatch.setenv("BOT_GITHUB_RETRIES", "2")
    standin.add_issue(UPSTREAM, 7, "t", "b")
    standin.inject("GET", r"/issues/7$", 500, times=10)
    with pytest.raises(BotError) as caught:
        GitHubClient().get_issue(7)
    assert "500" in str(caught.value) and "\n" not in str(caught.value)
    assert sum(1 for r in standin.request_log() if r["path"].endswith("/issues/7")) == 3


def test_missing_issue_and_label_refusal(standin):
    client = GitHubClient()
    with pytest.raises(BotError, match="not found"):
        client.get_issue(404404)
    number = standin.add_issue(UPSTREAM, None, "t", "b")
    standin.forbid_label("bot:eagle3")
    assert client.add_labels(number, ["bot:eagle3"]) is False
    assert client.add_labels(number, ["other"]) is True


def test_unauthenticated_read_of_public_issue(standin, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN")
    standin.add_issue(UPSTREAM, 5, "public", "text")
    client = GitHubClient()
    assert not client.authenticated
    assert client.get_issue(5)["title"] == "public"
    with pytest.raises(BotError, match="GITHUB_TOKEN"):
        client.upsert_issue_comment(5, "m", "m")


def test_dashboard_issue_round_trip(standin):
    client = GitHubClient()
    created = client.create_issue(BOT_REPO, "Bot dashboard", "- [ ] approve #1", ["dashboard"])
    standin.add_issue(BOT_REPO, None, "other", "x", labels=["dashboard"], user="someone")
    mine = client.list_issues(BOT_REPO, creator=STANDIN_BOT_LOGIN, labels=["dashboard"])
    assert [i["number"] for i in mine] == [created["number"]]
    edited = client.edit_issue(BOT_REPO, created["number"], body="- [x] approve #1")
    assert edited["body"] == "- [x] approve #1"
    assert client.get_issue(created["number"], repo=BOT_REPO)["body"] == "- [x] approve #1"


def test_workflow_dispatch_find_complete_download(standin):
    standin.set_run_name(BOT_REPO, "gpu-test.yml", "gpu-test {marker}")
    client = GitHubClient()
    started = datetime.now(UTC) - timedelta(seconds=5)
    client.dispatch_workflow(BOT_REPO, "gpu-test.yml", "main", {"marker": "abc123"})
    client.dispatch_workflow(BOT_REPO, "gpu-test.yml", "main", {"marker": "zzz999"})
    run = client.find_workflow_run(BOT_REPO, "gpu-test.yml", started, "abc123")
    assert run is not None and run["display_title"] == "gpu-test abc123"
    assert run["status"] == "queued" and run["conclusion"] is None
    assert standin.run_inputs(run["id"]) == {"marker": "abc123"}
    assert client.find_workflow_run(BOT_REPO, "gpu-test.yml", started, "nope") is None
    future = datetime.now(UTC) + timedelta(hours=1)
    assert client.find_workflow_run(BOT_REPO, "gpu-test.yml", future, None) is None

    standin.complete_run(run["id"], "success", {"result.json": b'{"passed": true}'})
    done = client.get_workflow_run(BOT_REPO, run["id"])
    assert (done["status"], done["conclusion"]) == ("completed", "success")
    archive = client.download_run_artifact(BOT_REPO, run["id"], "result.json")
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        assert opened.read("result.json") == b'{"passed": true}'
    with pytest.raises(BotError, match="no artifact"):
        client.download_run_artifact(BOT_REPO, run["id"], "missing")


@pytest.mark.vllm_tree
def test_triage_finds_by_signature_and_label(standin, capsys):
    tree = release_tree("0.34.0")
    by_error = standin.add_issue(
        UPSTREAM, None, "crash", "RuntimeError: Model does not support EAGLE3 interface"
    )
    by_label = standin.add_issue(UPSTREAM, None, "labelled", "x", labels=["bot:eagle3"])
    standin.add_issue(
        UPSTREAM, None, "closed", "Model does not support EAGLE3 interface", state="closed"
    )
    standin.add_issue(UPSTREAM, None, "unrelated", "a typo in the docs")
    found = find_candidates(tree)
    assert [c.number for c in found] == [by_error, by_label]
    path = record_candidates(found)
    assert path == candidates_path() and str(by_error) in path.read_text()

    named = standin.add_issue(
        UPSTREAM,
        None,
        "[Bug]: EAGLE-3 with gemma-2-9b-it",
        'vllm serve google/gemma-2-9b-it --speculative-config \'{"method": "eagle3"}\'\n'
        "RuntimeError: Model does not support EAGLE3 interface",
    )
    assert main(["triage", "--tree", str(tree), "--json"]) == 0
    out = capsys.readouterr()
    assert f'"number": {by_label}' in out.out
    assert STANDIN_TOKEN not in out.out + out.err
    # Each issue found was triaged: the one naming a class is demand for that class's finding.
    triaged = {t.number: t.architecture for t in Journal().triaged_issues()}
    assert triaged == {by_error: None, by_label: None, named: "Gemma2ForCausalLM"}
    assert json.loads(out.out)[-1]["architecture"] == "Gemma2ForCausalLM"


def test_triage_sweep_needs_a_vllm_tree(standin, tmp_path, capsys):
    """The workspace root that holds a checkout in vllm/ is not the tree itself."""
    (tmp_path / "vllm").mkdir()
    assert main(["triage", "--tree", str(tmp_path)]) == 2
    assert "not a vLLM tree" in capsys.readouterr().err


def test_cli_publish_error_is_one_line_without_token(standin, tmp_path, capsys):
    assert main(["publish", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bot: ") and err.count("\n") == 1 and STANDIN_TOKEN not in err
