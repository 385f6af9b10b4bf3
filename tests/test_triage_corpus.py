"""The labelled triage corpus is well formed and its labels name classes the tree really has.

This checks the corpus, not the triage score (that is ``benchmarks/triage.py``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.triage import (
    DEFAULT_CORPUS,
    LABELS_FILE,
    Case,
    CorpusError,
    Label,
    Outcome,
    Report,
    Row,
    load_corpus,
)
from bot.tree.fetch import release_tree
from bot.tree.model_registry import GENERATION_CATEGORIES, load_model_registry

REPO = Path(__file__).resolve().parents[1]
BENCHMARK = REPO / "benchmarks" / "triage.py"
ISSUE_FILES = sorted(p for p in DEFAULT_CORPUS.glob("*.json") if p.name != LABELS_FILE)
LABELS = json.loads((DEFAULT_CORPUS / LABELS_FILE).read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", ISSUE_FILES, ids=lambda p: p.name)
def test_issue_is_in_githubs_rest_shape(path: Path) -> None:
    issue = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(issue["number"], int) and path.name == f"{issue['number']}.json"
    assert isinstance(issue["title"], str) and issue["title"].strip()
    assert isinstance(issue["body"], str) and len(issue["body"]) > 40
    assert issue["state"] in ("open", "closed")
    assert all(set(label) == {"name"} for label in issue["labels"])
    assert issue["html_url"] == f"https://github.com/vllm-project/vllm/issues/{issue['number']}"
    assert isinstance(issue["user"]["login"], str) and issue["user"]["login"]
    if "state_reason" in issue:
        assert issue["state"] == "closed"
        assert issue["state_reason"] in ("completed", "not_planned")


def test_labels_cover_every_file_and_nothing_else() -> None:
    assert set(LABELS) == {p.name for p in ISSUE_FILES}
    for name, label in LABELS.items():
        assert set(label) == {"outcome", "classes", "why", "tree"}, name
        assert label["outcome"] in ("propose", "ask", "silent"), name
        assert label["why"].strip() and "\n" not in label["why"], name
        assert label["tree"] == "0.34.0", name
        if label["outcome"] == "propose":
            assert label["classes"], f"{name} proposes without a class"


def test_counts() -> None:
    outcomes = Counter(label["outcome"] for label in LABELS.values())
    assert len(LABELS) >= 40
    assert outcomes["silent"] >= 15
    assert outcomes["ask"] >= 3 and outcomes["propose"] >= 15


def test_a_closed_issue_is_labelled_silent() -> None:
    closed = [p.name for p in ISSUE_FILES if json.loads(p.read_text())["state"] == "closed"]
    assert closed and all(LABELS[name]["outcome"] == "silent" for name in closed)


@pytest.mark.vllm_tree
def test_every_labelled_class_is_a_generation_class_of_the_tree() -> None:
    registry = load_model_registry(release_tree("0.34.0"))
    known = {e.arch for e in registry.entries if e.category in GENERATION_CATEGORIES}
    unknown = {
        (name, cls)
        for name, label in LABELS.items()
        for cls in label["classes"]
        if cls not in known
    }
    assert not unknown


def test_benchmark_loader_accepts_the_corpus() -> None:
    cases = load_corpus(DEFAULT_CORPUS)
    assert [c.name for c in cases] == [p.name for p in ISSUE_FILES]


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "corpus"
    shutil.copytree(DEFAULT_CORPUS, target)
    return target


def _drop_label(corpus: Path) -> None:
    labels = json.loads((corpus / LABELS_FILE).read_text())
    labels.pop(sorted(labels)[0])
    (corpus / LABELS_FILE).write_text(json.dumps(labels))


def _orphan_label(corpus: Path) -> None:
    labels = json.loads((corpus / LABELS_FILE).read_text())
    labels["99999.json"] = next(iter(labels.values()))
    (corpus / LABELS_FILE).write_text(json.dumps(labels))


def _bad_outcome(corpus: Path) -> None:
    labels = json.loads((corpus / LABELS_FILE).read_text())
    next(iter(labels.values()))["outcome"] = "comment"
    (corpus / LABELS_FILE).write_text(json.dumps(labels))


def _not_json(corpus: Path) -> None:
    first = sorted(p for p in corpus.glob("*.json") if p.name != LABELS_FILE)[0]
    first.write_text("{ not json")


def _no_body(corpus: Path) -> None:
    first = sorted(p for p in corpus.glob("*.json") if p.name != LABELS_FILE)[0]
    issue = json.loads(first.read_text())
    del issue["body"]
    first.write_text(json.dumps(issue))


BREAKAGES = [_drop_label, _orphan_label, _bad_outcome, _not_json, _no_body]


@pytest.mark.parametrize("breakage", BREAKAGES, ids=lambda f: f.__name__.strip("_"))
def test_a_broken_corpus_is_refused(tmp_path: Path, breakage) -> None:
    corpus = _copy(tmp_path)
    breakage(corpus)
    with pytest.raises(CorpusError):
        load_corpus(corpus)


def test_benchmark_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    corpus = _copy(tmp_path)
    _bad_outcome(corpus)
    done = subprocess.run(
        [sys.executable, str(BENCHMARK), "--corpus", str(corpus)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("bot: ") and done.stderr.count("\n") == 1


def _row(want: str, classes: tuple[str, ...], got: str, named: tuple[str, ...]) -> Row:
    label = Label(want, classes, "why", "0.34.0")
    return Row(Case(f"{want}-{got}.json", {"number": 1}, label), Outcome(got, named))


def test_report_figures_on_a_known_table() -> None:
    pair = ("Step5ForConditionalGeneration", "Step5ForCausalLM")
    lite = "Glm4MoeLiteForCausalLM"
    report = Report(tree="0.34.0", mode="contract")
    report.rows += [
        _row("propose", pair, "propose", ("Step5ForCausalLM",)),  # one of a pair: right
        _row("propose", pair, "propose", pair),  # both: right, primary exact
        _row("propose", ("MixtralForCausalLM",), "propose", ("MistralForCausalLM",)),  # wrong
        _row("propose", ("JambaForCausalLM",), "ask", ("JambaForCausalLM",)),  # asked instead
        _row("propose", (lite,), "propose", (lite, "Glm4MoeForCausalLM")),  # one class too many
        _row("ask", (), "ask", ()),
        _row("silent", (), "silent", ()),
        _row("silent", (), "ask", ()),  # a question on an unrelated issue
    ]
    per = report.per_outcome()
    assert per["propose"] == {
        "labelled": 5,
        "predicted": 4,
        "correct": 4,
        "precision": 1.0,
        "recall": 0.8,
    }
    assert (per["ask"]["precision"], per["ask"]["recall"]) == (round(1 / 3, 4), 1.0)
    assert (per["silent"]["precision"], per["silent"]["recall"]) == (1.0, 0.5)
    classes = report.class_accuracy()
    assert classes["accuracy"] == 0.4
    assert classes["named_right_class_any_outcome"] == 0.6
    assert classes["primary_class_exact"] == 0.4
    gates = report.gates()
    assert gates["no_comment_on_silent"] == {"passed": False, "offending": ["silent-ask.json"]}
    assert gates["class_accuracy"] == {"passed": False, "accuracy": 0.4, "gate": 0.95}
    mismatched = [m["file"] for m in report.to_dict()["mismatches"]]
    assert mismatched == [
        "propose-propose.json",
        "propose-ask.json",
        "propose-propose.json",
        "silent-ask.json",
    ]
