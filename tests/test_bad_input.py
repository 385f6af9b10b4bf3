"""Every bad input gets one `bot: ...` line and exit 2, through the real `bot` command.

A corrupt journal or cache entry is reported and rebuilt; it never stops a scan.
"""

from __future__ import annotations

import json
import pickle
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

from bot.tree.fetch import release_tree
from tests.cli import EXAMPLE_ISSUE, propose_issue, run_bot
from tests.synthetic import make_tree


def _one_line_exit_2(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bot: "), result.stderr
    assert "internal error" not in lines[0] and "Traceback" not in result.stderr
    assert fragment in lines[0], lines[0]


def _issue_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "issue.json"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"title": "x", "body": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ('{"title": "\\ud800", "body": "x"}', "lone surrogate"),
        ('{"title": "x", "body": "y", "number": 1' + "0" * 5000 + "}", "too large"),
        ('{"title": "x", "body": "y", "number": 1e999}', "too large"),
        ('{"title": "x", "body": "y", "number": true}', "`number`"),
        ('{"title": "x", "body": "y", "number": NaN}', "not valid JSON"),
        ('{"title": "x", "body": "y", "number": 1' + "0" * 30 + "}", "not an issue number"),
        ('{"title": "x", "body": "y", "number": -3}', "not an issue number"),
    ],
    ids=[
        "deep-nesting",
        "lone-surrogate",
        "huge-int",
        "huge-float",
        "number-true",
        "nan",
        "10**30",
        "negative",
    ],  # fmt: skip
)
def test_hostile_issue_files(tmp_path: Path, text: str, fragment: str) -> None:
    tree = make_tree(tmp_path / "tree", {}, {})
    issue = _issue_file(tmp_path, text)
    result = run_bot(
        "propose", "--issue", "1", "--issue-file", str(issue), "--repo", str(tree), "--dry-run",
        "--out", str(tmp_path / "plan"),
    )  # fmt: skip
    _one_line_exit_2(result, fragment)
    assert not (tmp_path / "plan").exists()


def test_an_issue_argument_beyond_githubs_numbers_is_one_line(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree", {}, {})
    issue = _issue_file(tmp_path, '{"title": "x", "body": "y"}')
    result = run_bot(
        "propose", "--issue", str(10**30), "--issue-file", str(issue), "--repo", str(tree),
        "--dry-run", "--out", str(tmp_path / "plan"),
    )  # fmt: skip
    _one_line_exit_2(result, "not an issue number")
    assert not (tmp_path / "plan").exists()


def _plan_dir(tmp_path: Path) -> Path:
    """A real plan directory (the seed issue on vLLM 0.23.0) to spoil."""
    out = tmp_path / "plan"
    result = propose_issue(release_tree("0.23.0"), out, EXAMPLE_ISSUE)
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.vllm_tree
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("reason", 5),
        ("edits", "all of them"),
        ("edits", [["not", "an", "object"]]),
        ("issue_number", "33329"),
        ("issue_number", True),
        ("issue_number", 10**30),
        ("members", [{}]),
        ("tests", {"cpu": "tests/x.py"}),
        ("verification", ["passed"]),
        ("questions", [1, 2]),
        ("schema", 1.5),
    ],
)
def test_plan_json_with_wrong_types(tmp_path: Path, field: str, value: object) -> None:
    plan_dir = _plan_dir(tmp_path)
    data = json.loads((plan_dir / "plan.json").read_text())
    data[field] = value
    (plan_dir / "plan.json").write_text(json.dumps(data))
    for command in (["publish", str(plan_dir)], ["verify", str(plan_dir)]):
        result = run_bot(*command)
        _one_line_exit_2(result, "plan.json")
        assert re.search(rf"`{field}`|plan\.json\.{field}\b", result.stderr), result.stderr


@pytest.mark.vllm_tree
def test_deeply_nested_plan_json(tmp_path: Path) -> None:
    plan_dir = _plan_dir(tmp_path)
    (plan_dir / "plan.json").write_text('{"finding": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _one_line_exit_2(run_bot("publish", str(plan_dir)), "nested too deeply")


@pytest.mark.vllm_tree
def test_binary_patch_diff(tmp_path: Path) -> None:
    plan_dir = _plan_dir(tmp_path)
    (plan_dir / "patch.diff").write_bytes(b"diff --git a/x b/x\n\xff\xfe\x00\x01binary\n")
    for command in (["publish", str(plan_dir)], ["verify", str(plan_dir)]):
        _one_line_exit_2(run_bot(*command), "patch.diff")


def test_max_prs_per_run_not_a_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_MAX_PRS_PER_RUN", "abc")
    plan = tmp_path / "plan"
    plan.mkdir()
    (plan / "plan.json").write_text(json.dumps({"status": "needs-info", "reason": "r"}))
    _one_line_exit_2(run_bot("publish", str(plan)), "BOT_MAX_PRS_PER_RUN")


@pytest.mark.vllm_tree
def test_out_that_is_a_file(tmp_path: Path) -> None:
    tree = release_tree("0.23.0")
    out = tmp_path / "taken"
    out.write_text("not a directory\n")
    result = run_bot("propose", "--class", "Qwen3NextForCausalLM", "--repo", str(tree),
                     "--dry-run", "--out", str(out))  # fmt: skip
    _one_line_exit_2(result, "not a directory")
    assert out.read_text() == "not a directory\n"
    _one_line_exit_2(run_bot("demo", "--out", str(out)), "not a directory")


def _scan(tree: Path) -> subprocess.CompletedProcess[str]:
    return run_bot("scan", "--json", str(tree))


@pytest.mark.vllm_tree
def test_corrupt_journal_is_reported_and_rebuilt(tmp_path: Path) -> None:
    from bot.config import home_dir

    tree = release_tree("0.23.0")
    journal = home_dir() / "journal.sqlite3"
    journal.parent.mkdir(parents=True, exist_ok=True)
    journal.write_bytes(b"this is not a database" * 100)
    result = _scan(tree)
    assert result.returncode == 0, result.stderr
    assert "journal" in result.stderr and "corrupt" in result.stderr
    assert "Qwen3NextForCausalLM" in result.stdout
    assert list(journal.parent.glob("journal.sqlite3.corrupt-*"))  # kept for a post-mortem
    again = _scan(tree)
    assert again.returncode == 0 and "corrupt" not in again.stderr


@pytest.mark.vllm_tree
@pytest.mark.parametrize("kind", ["facts", "signatures"])
@pytest.mark.parametrize("damage", ["bad-entries", "not-a-database", "foreign-object"])
def test_corrupt_cache_is_reported_and_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, damage: str
) -> None:
    tree = release_tree("0.23.0")  # resolved before the cache directory moves
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "cache"))

    def run() -> subprocess.CompletedProcess[str]:
        # The scan fills the facts cache; triage (in propose) the error-signature cache.
        return _scan(tree) if kind == "facts" else propose_issue(tree, tmp_path / "plan")

    first = run()
    assert first.returncode == 0, first.stderr
    [cache] = (tmp_path / "cache" / "index").glob(f"{kind}-*.sqlite3")
    if damage == "not-a-database":
        cache.write_bytes(b"this is not a database" * 100)
    else:
        value = "garbage" if damage == "bad-entries" else ValueError("x")
        with sqlite3.connect(cache) as db:
            db.execute("UPDATE facts SET value = ?", (pickle.dumps(value),))
        db.close()
    result = run()
    assert result.returncode == 0, result.stderr
    assert result.stdout == first.stdout
    assert "cache" in result.stderr and "rebuilt" in result.stderr
    assert "corrupt" not in run().stderr  # rebuilt for good
