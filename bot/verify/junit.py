"""Running pytest node ids in a subprocess and reading its JUnit XML report."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bot.errors import BotError
from bot.sandbox import gpu_devices
from bot.subprocess_env import run_upstream_code
from bot.untrusted_files import copy_regular

# A pytest node id as vLLM's tests spell them: a path under tests/, then ::names, then an
# optional parametrisation. No leading dash, so a node id can never become a pytest option.
_NODE_ID = re.compile(r"^tests/[\w./-]+\.py(::[\w.]+)*(\[[^\s\]]*\])?$")
_EXCERPT_LINES = 40
_EXCERPT_CHARS = 4000
_REPORT_LIMIT = 64 * 1024 * 1024  # a JUnit report bigger than this is not one


@dataclass
class TestRun:
    conclusion: str  # success | failure | skipped | error
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    log_excerpt: str = ""
    # Each case's outcome (passed | failed | skipped), keyed "classname::name" as JUnit names it.
    cases: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> int:
        return self.tests - self.skipped - self.failures - self.errors

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["cases"]  # per case: the check's record holds them where a reader needs them
        return data


def validate_node_ids(node_ids: list[str]) -> list[str]:
    for node_id in node_ids:
        if not _NODE_ID.match(node_id) or ".." in node_id.split("::")[0].split("/"):
            raise BotError(f"not a pytest node id under tests/: {node_id[:120]!r}")
    return node_ids


def split_node_ids(text: str) -> list[str]:
    return validate_node_ids(text.split())


def run_pytest(
    node_ids: list[str],
    cwd: Path,
    junit_path: Path,
    *,
    pythonpath: Path | None = None,
    timeout: float = 3600,
    python: Path | None = None,
    extra_env: dict[str, str] | None = None,
    plugins: tuple[str, ...] = (),
    gpu: bool = False,
) -> TestRun:
    """Run ``node_ids`` with pytest in ``cwd`` (this interpreter, or ``python``: a vLLM
    verification environment); the JUnit report decides, and is kept at ``junit_path``.
    ``gpu``: the sandbox also binds the host's GPU device nodes.

    ``cwd`` is read-only to the tests: git later runs there (applying or reversing the patch),
    and a ``.git`` or ``.gitattributes`` a test planted would run as the bot. pytest writes its
    report into a directory of its own, from which it is copied as data (a regular file, never
    a link the tests left there) to ``junit_path``, which the tests never see."""
    validate_node_ids(node_ids)
    if not node_ids:
        return TestRun(conclusion="skipped", log_excerpt="no tests to run")
    junit_path = junit_path.absolute()  # relative to the caller's directory, not pytest's
    junit_path.parent.mkdir(parents=True, exist_ok=True)
    # Upstream code runs here: it gets no token, none of the runner's command files, and a
    # scratch HOME (no ~/.git-credentials, ~/.netrc, gh or Hugging Face tokens).
    extra = dict(extra_env or {})
    if pythonpath is not None and extra_env is None:
        extra["PYTHONPATH"] = str(pythonpath)
    with tempfile.TemporaryDirectory(prefix="bot-junit-") as private:
        report = Path(private) / "junit.xml"
        command = [
            str(python or sys.executable),
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            *(f"-p{plugin}" for plugin in plugins),
            f"--junitxml={report}",
            "--",
            *node_ids,
        ]
        try:
            result = run_upstream_code(
                command,
                cwd=cwd,
                extra=extra,
                timeout=timeout,
                writable=[Path(private)],
                devices=gpu_devices() if gpu else (),
            )
        except subprocess.TimeoutExpired:
            return TestRun(conclusion="error", log_excerpt=f"pytest did not finish in {timeout:g}s")
        try:
            copy_regular(report, junit_path, _REPORT_LIMIT)
        except OSError:
            return TestRun(conclusion="error", log_excerpt=excerpt(result.stdout + result.stderr))
    run = parse_junit(junit_path.read_bytes())
    if result.returncode != 0 and run.conclusion == "success":
        run.conclusion = "failure"  # e.g. a collection error pytest reports outside cases
        run.log_excerpt = excerpt(result.stdout + result.stderr)
    return run


def parse_junit(data: bytes) -> TestRun:
    """Summarise a JUnit XML report: counts, and the failure messages as the excerpt."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        return TestRun(conclusion="error", log_excerpt=f"unreadable JUnit report ({exc})")
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    run = TestRun(conclusion="success")
    failed_parts: list[str] = []
    for suite in suites:
        for case in suite.iter("testcase"):
            run.tests += 1
            name = f"{case.get('classname', '')}::{case.get('name', '')}".strip(":")
            outcome = "passed"
            for kind in ("failure", "error"):
                for element in case.findall(kind):
                    outcome = "failed"
                    if kind == "failure":
                        run.failures += 1
                    else:
                        run.errors += 1
                    message = element.get("message") or ""
                    body = (element.text or "").strip()
                    failed_parts.append(f"{kind.upper()} {name}: {message}\n{body}".strip())
            if case.find("skipped") is not None:
                run.skipped += 1
                outcome = "skipped" if outcome == "passed" else outcome
            run.cases[name] = outcome
    if run.failures or run.errors:
        run.conclusion = "failure"
        run.log_excerpt = excerpt("\n\n".join(failed_parts))
    elif run.tests == 0 or run.skipped == run.tests:
        run.conclusion = "skipped" if run.tests else "error"
        run.log_excerpt = "no test ran" if not run.tests else f"{run.skipped} skipped"
    else:
        run.log_excerpt = f"{run.tests - run.skipped} passed, {run.skipped} skipped"
    return run


def excerpt(text: str) -> str:
    """The last lines of a log, bounded: the end of a pytest log is where the verdict is."""
    lines = text.strip().splitlines()[-_EXCERPT_LINES:]
    return "\n".join(lines)[-_EXCERPT_CHARS:]
