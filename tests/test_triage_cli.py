"""`bot triage` on issue files and directories (offline), and against an unreachable GitHub."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from bot.cli import main
from bot.tree.fetch import release_tree
from tests.github_standin import STANDIN_TOKEN

ERROR = "RuntimeError: Model does not support EAGLE3 interface"


def _write(path: Path, number: int, body: str, **extra) -> Path:
    issue = {"number": number, "title": "[Bug]: x", "body": body, "state": "open", **extra}
    path.write_text(json.dumps(issue), encoding="utf-8")
    return path


@pytest.fixture
def issues_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "issues"
    folder.mkdir()
    _write(folder / "a.json", 11, f"vllm serve stepfun-ai/Step-3.5-Flash\n{ERROR}")
    _write(folder / "b.json", 12, "The docs have a typo in the quickstart.")
    _write(folder / "c.json", 13, f"vllm serve /data/inhouse\n{ERROR}")
    (folder / "labels.json").write_text('{"a.json": "propose"}', encoding="utf-8")
    return folder


@pytest.mark.vllm_tree
def test_a_directory_is_triaged_as_a_table(issues_dir: Path, capsys) -> None:
    tree = release_tree("0.34.0")
    assert main(["triage", "--tree", str(tree), str(issues_dir)]) == 0
    out, err = capsys.readouterr()
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:]}
    assert rows == {"#11": "propose", "#12": "silent", "#13": "ask"}
    assert "Step3p5ForCausalLM" in out
    assert "skipped" in err and "labels.json" in err


@pytest.mark.vllm_tree
def test_files_are_triaged_as_json(issues_dir: Path, capsys) -> None:
    tree = release_tree("0.34.0")
    closed = _write(
        issues_dir / "d.json", 14, f"vllm serve x/Step-3.5-Flash\n{ERROR}", state="closed"
    )
    assert (
        main(["triage", "--tree", str(tree), "--json", str(issues_dir / "a.json"), str(closed)])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert [(d["number"], d["outcome"]) for d in data] == [(11, "propose"), (14, "silent")]
    assert data[0]["architectures"] == ["Step3p5ForCausalLM"]


@pytest.mark.vllm_tree
@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "JSON"), ("[1, 2]", "JSON object"), ('{"title": 3}', "must be a string")],
)
def test_a_bad_file_is_one_line_and_exit_2(tmp_path: Path, capsys, content, message) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    assert main(["triage", "--tree", str(release_tree("0.34.0")), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("bot: ") and err.count("\n") == 1 and message in err


def test_a_missing_path_or_tree_is_one_line(tmp_path: Path, capsys) -> None:
    assert main(["triage", "--tree", str(tmp_path), str(tmp_path)]) == 2
    assert "not a vLLM tree" in capsys.readouterr().err


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket is closed


@pytest.mark.vllm_tree
def test_unreachable_github_is_one_line_exit_2_within_bounded_time(monkeypatch, capsys) -> None:
    monkeypatch.setenv("GITHUB_API_URL", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("GITHUB_TOKEN", STANDIN_TOKEN)
    # What a caller might set for publishing: triage caps it to its own few short retries.
    monkeypatch.setenv("BOT_GITHUB_RETRIES", "50")
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "600")
    monkeypatch.setenv("BOT_GITHUB_BACKOFF", "0.1")
    started = time.monotonic()
    assert main(["triage", "--tree", str(release_tree("0.34.0"))]) == 2
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert err.startswith("bot: ") and err.count("\n") == 1 and "unreachable" in err
    assert STANDIN_TOKEN not in err
    assert elapsed < 30  # 50 retries with these waits would take minutes


@pytest.mark.vllm_tree
def test_github_answering_errors_gets_few_retries(github_standin, capsys) -> None:
    github_standin.inject("GET", r"/search/issues", 503, times=100)
    assert main(["triage", "--tree", str(release_tree("0.34.0"))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bot: ") and err.count("\n") == 1
    searches = [r for r in github_standin.request_log() if "/search/issues" in r["path"]]
    assert 1 <= len(searches) <= 3  # the first try and at most two retries
