"""Triage quality on a labelled corpus of issue texts: precision and recall per outcome.

The corpus (``benchmarks/triage_corpus/``) holds issues in GitHub's REST shape, one JSON file
each, written the way users write vLLM bug reports and feature requests, and ``labels.json``:
per file the outcome a careful maintainer would choose (``propose``, ``ask`` or ``silent``), the
architecture classes (primary first), a one-line reason and the vLLM tree the label was read from.

Every issue goes through ``bot.triage.issue.triage_issue(issue, tree)``. Reported:
- a confusion matrix and precision / recall for each outcome;
- class accuracy on the issues labelled ``propose``: the bot proposes, and every class it names is
  one of the labelled classes (so a text/multimodal pair may be answered with either or both);
  also the stricter "primary class matches" figure;
- the two hard gates: no proposal and no question on any issue labelled ``silent``, and class
  accuracy >= 95% (issue 23; ``--class-gate 0.9`` for the held-out set kept outside the
  repository);
- every issue whose outcome or class differs from its label.

Until ``Triage`` carries ``.outcome`` and ``.architectures``, the older fields are mapped
(shown as ``mode: fallback``): ``confident`` -> propose; else non-empty ``missing`` -> ask; else
silent; ``architectures`` = ``(architecture,)`` when set. It knows nothing of closed issues.

Exit status is 0 whatever the scores (this is a measurement, not a test); a malformed corpus is
bad input: one ``bot: ...`` line and exit 2.

Run: ``.venv/bin/python benchmarks/triage.py [--corpus DIR] [--class-gate F] [--json]``.

``--hostile`` measures speed instead: triage of a 51 x 64 KB hostile issue (issue 25) against a
3 KB one, best of ``--repeat`` runs, wall and CPU seconds and their ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.errors import BotError  # noqa: E402
from bot.hub import Hub, HubSettings  # noqa: E402
from bot.tree.fetch import release_tree  # noqa: E402
from bot.triage.issue import triage_issue  # noqa: E402
from bot.triage.thread import MAX_PART_CHARS  # noqa: E402
from tests.hub_standin import HubStandIn, closed_port_url, repos_from_file  # noqa: E402

OUTCOMES = ("propose", "ask", "silent")
CLASS_GATE = 0.95
SMALL_ISSUE = "41446.json"  # its last 3 KB: the command, the traceback, the model named
HOSTILE_TREE = "0.34.0"
DEFAULT_CORPUS = Path(__file__).resolve().parent / "triage_corpus"
LABELS_FILE = "labels.json"
HUB_FILE = "hub.json"  # the checkpoints' configs and cards a corpus's Hub stand-in serves
DEFAULT_CHECKPOINT_SET = Path(__file__).resolve().parent / "triage_checkpoint"
REQUIRED_ISSUE_KEYS = {
    "number": int,
    "title": str,
    "body": str,
    "state": str,
    "labels": list,
    "html_url": str,
    "user": dict,
}


class CorpusError(ValueError):
    """The corpus or its labels are malformed."""


@dataclass(frozen=True)
class Label:
    outcome: str
    classes: tuple[str, ...]
    why: str
    tree: str
    offline: str | None = None  # the outcome when the Hub cannot be reached, if it differs


@dataclass(frozen=True)
class Case:
    name: str
    issue: dict[str, Any]
    label: Label


@dataclass(frozen=True)
class Outcome:
    outcome: str
    architectures: tuple[str, ...]
    error: str | None = None


@dataclass
class Row:
    case: Case
    got: Outcome

    @property
    def outcome_ok(self) -> bool:
        return self.got.outcome == self.case.label.outcome

    @property
    def class_ok(self) -> bool:
        """Every named class is a labelled one (a subset, so one of a pair is enough)."""
        named = self.got.architectures
        return bool(named) and set(named) <= set(self.case.label.classes)

    @property
    def primary_ok(self) -> bool:
        named, wanted = self.got.architectures, self.case.label.classes
        return bool(named) and bool(wanted) and named[0] == wanted[0]

    @property
    def mismatch(self) -> bool:
        if not self.outcome_ok:
            return True
        return self.case.label.outcome == "propose" and not self.class_ok


@dataclass
class Report:
    tree: str
    mode: str
    rows: list[Row] = field(default_factory=list)
    class_gate: float = CLASS_GATE

    def confusion(self) -> dict[str, dict[str, int]]:
        got_keys = [*OUTCOMES, "error"]
        table = {want: dict.fromkeys(got_keys, 0) for want in OUTCOMES}
        for row in self.rows:
            table[row.case.label.outcome][row.got.outcome] += 1
        return table

    def per_outcome(self) -> dict[str, dict[str, Any]]:
        result = {}
        for outcome in OUTCOMES:
            tp = sum(1 for r in self.rows if r.case.label.outcome == outcome and r.outcome_ok)
            predicted = sum(1 for r in self.rows if r.got.outcome == outcome)
            actual = sum(1 for r in self.rows if r.case.label.outcome == outcome)
            result[outcome] = {
                "labelled": actual,
                "predicted": predicted,
                "correct": tp,
                "precision": _ratio(tp, predicted),
                "recall": _ratio(tp, actual),
            }
        return result

    def class_accuracy(self) -> dict[str, Any]:
        ours = [r for r in self.rows if r.case.label.outcome == "propose"]
        proposed_right = sum(1 for r in ours if r.got.outcome == "propose" and r.class_ok)
        named_right = sum(1 for r in ours if r.class_ok)
        primary_right = sum(1 for r in ours if r.got.outcome == "propose" and r.primary_ok)
        return {
            "issues": len(ours),
            "proposed_right_class": proposed_right,
            "accuracy": _ratio(proposed_right, len(ours)),
            "named_right_class_any_outcome": _ratio(named_right, len(ours)),
            "primary_class_exact": _ratio(primary_right, len(ours)),
        }

    def gates(self) -> dict[str, Any]:
        noisy = [
            r.case.name
            for r in self.rows
            if r.case.label.outcome == "silent" and r.got.outcome in ("propose", "ask")
        ]
        accuracy = self.class_accuracy()["accuracy"]
        return {
            "no_comment_on_silent": {"passed": not noisy, "offending": noisy},
            "class_accuracy": {
                "passed": accuracy is not None and accuracy >= self.class_gate,
                "accuracy": accuracy,
                "gate": self.class_gate,
            },
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "tree": self.tree,
            "mode": self.mode,
            "issues": len(self.rows),
            "confusion": self.confusion(),
            "per_outcome": self.per_outcome(),
            "class_accuracy": self.class_accuracy(),
            "gates": self.gates(),
            "mismatches": [_row_dict(r) for r in self.rows if r.mismatch],
        }


def _ratio(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def _row_dict(row: Row) -> dict[str, Any]:
    return {
        "file": row.case.name,
        "number": row.case.issue["number"],
        "expected": row.case.label.outcome,
        "expected_classes": list(row.case.label.classes),
        "got": row.got.outcome,
        "got_classes": list(row.got.architectures),
        "error": row.got.error,
        "why": row.case.label.why,
    }


def load_corpus(directory: Path) -> list[Case]:
    """Read and check every issue file and its label; CorpusError names the first problem."""
    if not directory.is_dir():
        raise CorpusError(f"corpus directory {directory} does not exist")
    labels = _load_labels(directory / LABELS_FILE)
    files = sorted(
        p.name for p in directory.glob("*.json") if p.name not in (LABELS_FILE, HUB_FILE)
    )
    if not files:
        raise CorpusError(f"corpus directory {directory} holds no issue files")
    unlabelled = sorted(set(files) - set(labels))
    if unlabelled:
        raise CorpusError(f"{LABELS_FILE} has no label for {', '.join(unlabelled[:5])}")
    orphans = sorted(set(labels) - set(files))
    if orphans:
        raise CorpusError(f"{LABELS_FILE} labels missing files: {', '.join(orphans[:5])}")
    return [Case(name, _load_issue(directory / name), labels[name]) for name in files]


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CorpusError(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorpusError(f"{path} is not readable JSON: {exc}") from None


def _load_issue(path: Path) -> dict[str, Any]:
    issue = _load_json(path)
    if not isinstance(issue, dict):
        raise CorpusError(f"{path.name}: an issue must be a JSON object")
    for key, kind in REQUIRED_ISSUE_KEYS.items():
        if not isinstance(issue.get(key), kind) or isinstance(issue.get(key), bool):
            raise CorpusError(f"{path.name}: '{key}' must be a {kind.__name__}")
    if issue["state"] not in ("open", "closed"):
        raise CorpusError(f"{path.name}: 'state' must be 'open' or 'closed'")
    if not all(isinstance(x, dict) and isinstance(x.get("name"), str) for x in issue["labels"]):
        raise CorpusError(f"{path.name}: 'labels' must be a list of {{'name': ...}} objects")
    if not isinstance(issue["user"].get("login"), str):
        raise CorpusError(f"{path.name}: 'user' must carry a 'login'")
    if not issue["html_url"].endswith(f"/issues/{issue['number']}"):
        raise CorpusError(f"{path.name}: 'html_url' does not end in /issues/{issue['number']}")
    return issue


def _load_labels(path: Path) -> dict[str, Label]:
    raw = _load_json(path)
    if not isinstance(raw, dict):
        raise CorpusError(f"{path.name} must map file names to labels")
    labels = {}
    for name, entry in raw.items():
        if not isinstance(entry, dict):
            raise CorpusError(f"{path.name}: label of {name} must be an object")
        outcome, classes = entry.get("outcome"), entry.get("classes")
        why, tree = entry.get("why"), entry.get("tree")
        if outcome not in OUTCOMES:
            raise CorpusError(f"{path.name}: {name} has outcome {outcome!r}, not one of {OUTCOMES}")
        if not isinstance(classes, list) or not all(isinstance(c, str) and c for c in classes):
            raise CorpusError(f"{path.name}: {name} 'classes' must be a list of class names")
        if outcome == "propose" and not classes:
            raise CorpusError(f"{path.name}: {name} is labelled propose but names no class")
        if not isinstance(why, str) or not why.strip():
            raise CorpusError(f"{path.name}: {name} needs a one-line 'why'")
        if not isinstance(tree, str) or not tree:
            raise CorpusError(f"{path.name}: {name} needs the 'tree' its label was read from")
        offline = entry.get("offline")
        if offline is not None and offline not in OUTCOMES:
            raise CorpusError(f"{path.name}: {name} has offline outcome {offline!r}")
        labels[name] = Label(outcome, tuple(classes), why, tree, offline)
    return labels


def corpus_tree(cases: list[Case]) -> str:
    trees = {case.label.tree for case in cases}
    if len(trees) != 1:
        raise CorpusError(f"labels were read from several trees ({', '.join(sorted(trees))})")
    return trees.pop()


def has_contract(result: object) -> bool:
    return hasattr(result, "outcome") and hasattr(result, "architectures")


def observed(result: Any) -> Outcome:
    """The outcome and classes of one triage, from the contract fields or the fallback mapping."""
    if has_contract(result):
        return Outcome(str(result.outcome), tuple(result.architectures))
    if result.confident:
        outcome = "propose"
    elif result.missing:
        outcome = "ask"
    else:
        outcome = "silent"
    return Outcome(outcome, (result.architecture,) if result.architecture else ())


def run(cases: list[Case], tree_root: Path, version: str, hub: Hub | None = None) -> Report:
    """Triage every case; ``hub`` is where checkpoints' configs are read (default: a Hub that
    cannot be reached, so a corpus is judged on the tree alone, the same on every machine)."""
    report = Report(tree=version, mode="contract")
    hub = hub or unreachable_hub()
    for case in cases:
        try:
            result = triage_issue(case.issue, tree_root, checkpoints=hub)
        except Exception as exc:  # a crash on one issue is a finding, not the end of the run
            report.rows.append(Row(case, Outcome("error", (), f"{type(exc).__name__}: {exc}")))
            continue
        if not has_contract(result):
            report.mode = "fallback"
        got = observed(result)
        if got.outcome not in OUTCOMES:
            got = Outcome("error", got.architectures, f"unknown outcome {got.outcome!r}")
        report.rows.append(Row(case, got))
    return report


def unreachable_hub() -> Hub:
    """A Hub at a port on 127.0.0.1 nothing listens on, with an empty cache of its own."""
    import tempfile

    cache = Path(tempfile.mkdtemp(prefix="bot-bench-hub-"))
    return Hub(HubSettings(closed_port_url(), offline=False, cache=cache))


def offline_cases(cases: list[Case]) -> list[Case]:
    """The cases as judged without the Hub: each label's ``offline`` outcome where it has one
    (a question names no class to be right about)."""
    judged = []
    for case in cases:
        label = case.label
        if label.offline is not None and label.offline != label.outcome:
            classes = label.classes if label.offline == "propose" else ()
            label = Label(label.offline, classes, label.why, label.tree, label.offline)
        judged.append(Case(case.name, case.issue, label))
    return judged


def run_with_standin(
    cases: list[Case], tree_root: Path, version: str, directory: Path
) -> tuple[Report, Report]:
    """The corpus with its Hub stand-in serving ``hub.json``, and again with no Hub at all."""
    import tempfile

    with HubStandIn(repos_from_file(directory / HUB_FILE)) as standin:
        cache = Path(tempfile.mkdtemp(prefix="bot-bench-hub-"))
        hub = Hub(HubSettings(standin.url, offline=False, cache=cache))
        online = run(cases, tree_root, version, hub)
    return online, run(offline_cases(cases), tree_root, version)


def _fmt(value: float | None) -> str:
    return "   n/a" if value is None else f"{value:6.1%}"


def print_report(report: Report, corpus: Path, how: str = "") -> None:
    how = f" ({how})" if how else ""
    print(f"triage benchmark: {len(report.rows)} issues from {corpus}, vLLM {report.tree}{how}")
    if report.mode == "fallback":
        print("  mode: fallback (Triage has no .outcome/.architectures; confident -> propose,")
        print("        missing -> ask, else silent; closed issues are not recognised)")
    print("\n  expected \\ got   propose      ask   silent    error")
    for want, row in report.confusion().items():
        cells = "".join(f"{row[g]:>9}" for g in (*OUTCOMES, "error"))
        print(f"  {want:<15}{cells}")
    print("\n  outcome    labelled  predicted  precision   recall")
    for outcome, m in report.per_outcome().items():
        print(
            f"  {outcome:<10}{m['labelled']:>9}{m['predicted']:>11}"
            f"     {_fmt(m['precision'])}   {_fmt(m['recall'])}"
        )
    cls = report.class_accuracy()
    print(
        f"\n  class accuracy on ours (proposed, right class): {cls['proposed_right_class']}"
        f"/{cls['issues']} = {_fmt(cls['accuracy']).strip()}"
        f"  [right class any outcome {_fmt(cls['named_right_class_any_outcome']).strip()},"
        f" exact primary {_fmt(cls['primary_class_exact']).strip()}]"
    )
    gates = report.gates()
    silent = gates["no_comment_on_silent"]
    state = "PASS" if silent["passed"] else f"FAIL ({', '.join(silent['offending'])})"
    print(f"  gate: no proposal or question on a silent issue ... {state}")
    accuracy = gates["class_accuracy"]
    print(
        f"  gate: class accuracy >= {accuracy['gate']:.0%} ..................... "
        f"{'PASS' if accuracy['passed'] else 'FAIL'}"
    )
    mismatches = [r for r in report.rows if r.mismatch]
    if mismatches:
        print(f"\n  mismatches ({len(mismatches)}):")
        print(f"  {'file':<12} {'expected':<9} {'got':<8} expected classes -> got classes")
        for r in mismatches:
            want = ",".join(r.case.label.classes) or "-"
            got = ",".join(r.got.architectures) or "-"
            expected, outcome = r.case.label.outcome, r.got.outcome
            print(f"  {r.case.name:<12} {expected:<9} {outcome:<8} {want} -> {got}")
            if r.got.error:
                print(f"  {'':<12} error: {r.got.error}")


# What a hostile issue is made of: each part repeats one of these to 64 KB (issue 25's Low: a
# long line with no newline, unclosed architectures dumps and speculative configs, docker lines,
# floods of distinct names, sentences naming a method, words with digits, bare newlines).
HOSTILE_UNITS = (
    "org/Model-7B-x ",
    "dict_keys([ 'A', ",
    "Supported architectures: [ ",
    'speculative_config={"model": "a/b" ',
    "speculative_config={ ",
    "docker run x/y:1 ",
    "step 3.5 flash qwen ",
    "model_type `abc_def` ",
    "please add eagle3 support for x. ",
    "Qwen3-Next-80B ",
    "LlamaForCausalLM Qwen3ForCausalLM ",
    "a\n",
    "<!-- ",
)
HOSTILE_PARTS = 51  # title, body and 49 comments


def hostile_issue(part_chars: int) -> dict[str, Any]:
    """51 parts of ``part_chars`` each, cycling through HOSTILE_UNITS; the distinct-names
    part holds a new ``orgN/ModelN-7B`` each time."""
    parts = []
    for number in range(HOSTILE_PARTS):
        if number % (len(HOSTILE_UNITS) + 1) == len(HOSTILE_UNITS):
            text = " ".join(f"org{i}/Model{i}-7B" for i in range(part_chars // 8))
        else:
            unit = HOSTILE_UNITS[number % (len(HOSTILE_UNITS) + 1)]
            text = unit * (part_chars // len(unit) + 1)
        parts.append(text[:part_chars])
    return {
        "number": 1,
        "title": parts[0],
        "body": parts[1],
        "state": "open",
        "html_url": "https://github.com/vllm-project/vllm/issues/1",
        "comments_list": [{"body": p} for p in parts[2:]],
    }


def _timed(issue: dict[str, Any], tree_root: Path, repeat: int) -> tuple[float, float]:
    """Best wall and CPU seconds of ``repeat`` triages (the tree's tables loaded beforehand)."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        triage_issue(issue, tree_root)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def _chars(issue: dict[str, Any]) -> int:
    comments = issue.get("comments_list", [])
    return len(issue["title"]) + len(issue["body"]) + sum(len(c["body"]) for c in comments)


def run_hostile(tree_root: Path, repeat: int) -> dict[str, Any]:
    """A 3 KB issue (a corpus bug report: environment, command, traceback) against a
    51 x 64 KB one."""
    small = json.loads((DEFAULT_CORPUS / SMALL_ISSUE).read_text(encoding="utf-8"))
    small["body"] = small["body"][-(3000 - len(small["title"])) :]
    big = hostile_issue(MAX_PART_CHARS)
    triage_issue(small, tree_root)  # loads the tree's tables once, for both
    small_wall, small_cpu = _timed(small, tree_root, repeat)
    big_wall, big_cpu = _timed(big, tree_root, repeat)
    sizes = [len(small["title"]) + len(small["body"])]
    sizes.append(
        len(big["title"]) + len(big["body"]) + sum(len(c["body"]) for c in big["comments_list"])
    )
    return {
        "small_chars": sizes[0],
        "hostile_chars": sizes[1],
        "size_ratio": round(sizes[1] / sizes[0], 1),
        "small_seconds": round(small_wall, 4),
        "small_cpu_seconds": round(small_cpu, 4),
        "hostile_seconds": round(big_wall, 3),
        "hostile_cpu_seconds": round(big_cpu, 3),
        "time_ratio": round(big_wall / small_wall, 1),
        "architectures_of_small": list(triage_issue(small, tree_root).architectures),
        "cpu_ratio": round(big_cpu / small_cpu, 1) if small_cpu else None,
    }


def print_hostile(result: dict[str, Any], version: str) -> None:
    print(f"triage of a hostile issue, vLLM {version} (best of the runs)")
    print(f"  3 KB issue:   {result['small_chars']:>9} chars  {result['small_seconds']:8.4f} s")
    print(
        f"  hostile:      {result['hostile_chars']:>9} chars  {result['hostile_seconds']:8.3f} s"
        f"  (CPU {result['hostile_cpu_seconds']:.3f} s)"
    )
    print(
        f"  ratio: {result['time_ratio']}x the 3 KB issue's time (CPU {result['cpu_ratio']}x)"
        f" for {result['size_ratio']}x its size"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--class-gate",
        type=float,
        default=CLASS_GATE,
        help=f"class accuracy the gate asks for (default {CLASS_GATE:.0%}%; held-out set: 0.9)",
    )
    parser.add_argument(
        "--hostile",
        action="store_true",
        help="time a 51 x 64 KB hostile issue against a 3 KB one instead (speed, not quality)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per issue for --hostile")
    args = parser.parse_args(argv)
    if args.hostile:
        try:
            tree_root = release_tree(HOSTILE_TREE)
        except BotError as exc:
            print(f"bot: {exc}", file=sys.stderr)
            return 2
        result = run_hostile(tree_root, max(1, args.repeat))
        if args.json:
            print(json.dumps(result, indent=2, sort_keys=True))
        else:
            print_hostile(result, HOSTILE_TREE)
        return 0
    try:
        cases = load_corpus(args.corpus)
        version = corpus_tree(cases)
        tree_root = release_tree(version)
    except (CorpusError, BotError) as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return 2
    if (args.corpus / HUB_FILE).is_file():
        online, offline = run_with_standin(cases, tree_root, version, args.corpus)
        runs = {"with the Hub stand-in": online, "without the Hub": offline}
    else:
        runs = {"": run(cases, tree_root, version)}
    for report in runs.values():
        report.class_gate = args.class_gate
    if args.json:
        data = {name or "report": r.to_dict() for name, r in runs.items()}
        print(json.dumps(data if len(runs) > 1 else data["report"], indent=2, sort_keys=True))
    else:
        for name, report in runs.items():
            print_report(report, args.corpus, name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
