"""`bot scan` lists findings by demand: open issues triaged to the class, then drafts.

The journal and the draft catalogue are the real ones, in the test's own BOT_HOME and
BOT_CACHE_DIR; the command runs as a subprocess, as a user (or the nightly workflow) runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from bot.drafts import DraftEntry, user_catalogue_path, write_catalogue_file
from bot.journal.store import Journal
from bot.tree.fetch import release_tree
from bot.triage_outcome import TriagedIssue
from tests.cli import run_bot
from tests.synthetic import READY_DECODER, make_tree

TEXT = "_TEXT_GENERATION_MODELS"
HEADER = """
from torch import nn

from .interfaces import EagleModelMixin, SupportsEagle3, SupportsPP
"""
NAMES = ("Aaa", "Bbb", "Ccc")


def causal_lm(name: str, decoder: str, bases: str = "nn.Module, SupportsPP") -> str:
    return f"""
class {name}({bases}):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = {decoder}(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
"""


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three interface gaps (Aaa, Bbb, Ccc) and one broken claim (Zzz)."""
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "cache"))
    models = {
        f"model_executor/models/{n.lower()}.py": HEADER
        + READY_DECODER.format(name=f"{n}Model")
        + causal_lm(f"{n}ForCausalLM", f"{n}Model")
        for n in NAMES
    }
    models["model_executor/models/zzz.py"] = (
        HEADER
        + "\nclass ZzzModel(nn.Module):\n    def forward(self, input_ids, positions):\n"
        + "        return input_ids\n"
        + causal_lm("ZzzForCausalLM", "ZzzModel", "nn.Module, SupportsPP, SupportsEagle3")
    )
    registry = {TEXT: {f"{n}ForCausalLM": (n.lower(), f"{n}ForCausalLM") for n in (*NAMES, "Zzz")}}
    root = make_tree(tmp_path / "vllm", models, registry)
    interfaces = root / "vllm/model_executor/models/interfaces.py"
    with interfaces.open("a") as handle:  # what the plans' regression tests import
        handle.write(
            "\n\ndef supports_eagle3(model):\n    return isinstance(model, SupportsEagle3)\n"
        )
    return root


def demand(ccc_issue_state: str = "open") -> None:
    journal = Journal()
    journal.record_triaged_issue(
        TriagedIssue(
            7,
            "Ccc fails with EAGLE-3",
            "https://example.invalid/7",
            ccc_issue_state,
            "CccForCausalLM",
        )  # fmt: skip
    )
    journal.record_triaged_issue(  # closed: no longer demand
        TriagedIssue(8, "Aaa", "https://example.invalid/8", "closed", "AaaForCausalLM")
    )
    entries = [
        DraftEntry("org/Bbb-eagle3", "eagle3", "org/Bbb", "BbbForCausalLM", "curated: test"),
        # an unreviewed Hub card is not a signal until a maintainer accepts it
        DraftEntry("hub/Aaa-eagle3", "eagle3", "org/Aaa", "AaaForCausalLM", "hub", reviewed=False),
    ]
    write_catalogue_file(user_catalogue_path(), entries, "test")


def scan_json(tree: Path, *args: str) -> list[dict]:
    result = run_bot("scan", str(tree), "--json", "--no-cache", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_findings_are_listed_by_demand_with_the_signal_shown(tree: Path) -> None:
    demand()
    found = scan_json(tree)
    assert [(f["class"], f["priority"]["rank"]) for f in found] == [
        ("CccForCausalLM", 1),  # an open issue
        ("BbbForCausalLM", 2),  # a reviewed draft
        ("AaaForCausalLM", 3),  # nothing (closed issue, unreviewed draft): fixable first
        ("ZzzForCausalLM", 4),  # report only
    ]
    top = found[0]["priority"]
    assert top["open_issues"] == [
        {"number": 7, "url": "https://example.invalid/7", "architecture": "CccForCausalLM"}
    ]
    assert top["why"] == "open issue #7" and top["fixable"]
    assert found[1]["priority"]["drafts"] == ["org/Bbb-eagle3"]
    assert found[2]["priority"]["why"] == "no demand signal"
    assert found[3]["recipe"] == "eagle3-broken-claim" and not found[3]["priority"]["fixable"]

    table = run_bot("scan", str(tree)).stdout.splitlines()
    assert table[1].split()[:3] == ["1", "eagle3-interface", "CccForCausalLM"]
    assert "open issue #7" in table[1] and "draft org/Bbb-eagle3" in table[2]
    assert scan_json(tree, "--top", "2") == found[:2]


def test_the_order_is_stable_without_demand(tree: Path) -> None:
    first = scan_json(tree)
    assert [f["class"] for f in first] == [
        "AaaForCausalLM",
        "BbbForCausalLM",
        "CccForCausalLM",
        "ZzzForCausalLM",
    ]
    assert scan_json(tree) == first


def test_a_closed_issue_is_no_demand(tree: Path) -> None:
    demand(ccc_issue_state="closed")
    assert [f["class"] for f in scan_json(tree)][:2] == ["BbbForCausalLM", "AaaForCausalLM"]


def test_propose_top_plans_the_first_fixable_findings_of_a_real_tree(tmp_path: Path) -> None:
    """On vLLM 0.34.0 (a git checkout, as the nightly workflow has): an open issue lifts
    Glm4ForCausalLM to the top; one plan is written for it, none for the rest, no PR."""
    tree = release_tree("0.34.0")
    Journal().record_triaged_issue(
        TriagedIssue(41, "GLM-4 + EAGLE-3", "https://example.invalid/41", "open", "Glm4ForCausalLM")
    )
    plans = tmp_path / "plans"
    result = run_bot("scan", str(tree), "--json", "--propose-top", "1", "--plans", str(plans))
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found[0]["class"] == "Glm4ForCausalLM"
    assert found[0]["priority"]["why"] == "open issue #41"
    assert [p.name for p in plans.iterdir()] == ["class-Glm4ForCausalLM"]
    plan = json.loads((plans / "class-Glm4ForCausalLM" / "plan.json").read_text())
    assert plan["finding"]["class"] == "Glm4ForCausalLM" and plan["status"] == "ready"
    assert "plan #1 Glm4ForCausalLM (open issue #41)" in result.stderr
    assert not git.Repo(tree).is_dirty(untracked_files=True)  # plans only; the tree untouched
    matrix = json.loads(run_bot("scan", str(tree), "--matrix", "--top", "1").stdout)
    assert [row["class"] for row in matrix["include"]] == ["Glm4ForCausalLM"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--propose-top", "2"], "--propose-top needs --plans DIR"),
        (["--top", "-1"], "is negative"),
        (["--propose-top", "two", "--plans", "x"], "is not a whole number"),
    ],
)
def test_bad_priority_options_are_one_line_errors(
    tree: Path, args: list[str], message: str
) -> None:
    result = run_bot("scan", str(tree), *args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_the_dashboard_shows_the_demand_and_the_report_only_findings(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from bot.dashboard.app import DashboardSettings, create_app

    journal = Journal(tmp_path / "journal.sqlite3")
    finding = {"path": "vllm/model_executor/models/m.py", "line": 3, "evidence": {}}
    journal.record_findings(
        [
            {
                **finding,
                "recipe": "eagle3-interface",
                "class": "WantedForCausalLM",
                "architectures": ["WantedForCausalLM"],
                "summary": "lacks the interface",
            },
            {
                **finding,
                "recipe": "eagle3-broken-claim",
                "class": "ClaimsForCausalLM",
                "architectures": ["ClaimsForCausalLM"],
                "summary": "declares but would fail",
            },
        ],  # fmt: skip
        tmp_path,
        "abc123",
        "0.34.0",
    )
    journal.record_triaged_issue(
        TriagedIssue(5, "<b>x</b>", "https://example.invalid/5", "open", "WantedForCausalLM")
    )
    settings = DashboardSettings(
        maintainers=frozenset({"alice"}), api_url="http://127.0.0.1:9/unused", secret_key="k"
    )
    page = TestClient(create_app(journal, settings), base_url="http://127.0.0.1:8765").get("/")
    rows = {row.split("<code>")[1].split("</code>")[0]: row for row in page.text.split("<tr>")[1:]
            if "<code>" in row}  # fmt: skip
    assert "open issue #5" in rows["WantedForCausalLM"]
    assert "report only" in rows["ClaimsForCausalLM"]
    assert "report only" not in rows["WantedForCausalLM"]
    assert "declares but would fail" in rows["ClaimsForCausalLM"]


def test_proposing_for_an_issue_records_its_triage_as_demand(tmp_path: Path) -> None:
    from tests.cli import propose_issue

    tree = release_tree("0.23.0")
    result = propose_issue(tree, tmp_path / "plan")
    assert result.returncode == 0, result.stderr
    assert Journal().triaged_issues() == [
        TriagedIssue(
            33329,
            Journal().triaged_issues()[0].title,
            "https://github.com/vllm-project/vllm/issues/33329",
            "open",
            "Qwen3NextForCausalLM",
            Journal().triaged_issues()[0].recorded_at,
        )
    ]
    found = json.loads(run_bot("scan", str(tree), "--json", "--top", "1").stdout)
    assert found[0]["class"] == "Qwen3NextForCausalLM"
    assert found[0]["priority"]["why"].startswith("open issue #33329")
    assert [i["number"] for i in found[0]["priority"]["open_issues"]] == [33329]
