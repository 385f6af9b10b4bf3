"""Which upstream CI step runs a test: read from the tree's ``.buildkite/test_areas/*.yaml``.

vLLM's ``tests/AGENTS.md``: "A test no step in ``.buildkite/test_areas/*.yaml`` selects never
runs, which looks like passing. Check that the step's ``commands`` and pytest markers select the
test and its ``source_file_dependencies`` cover the changed files; update the step if not."

A step selects a test file when one of its ``pytest`` commands names the file or a folder
holding it (paths are relative to the step's ``working_dir``, ``/vllm-workspace/tests`` unless
it says otherwise), no ``--ignore`` / ``--deselect`` drops it, and its ``-m`` / ``-k``
expressions keep the test. A step runs for a pull request when a changed file starts with one
of its ``source_file_dependencies`` and with none of the ``!``-prefixed ones; a step without
them always runs. ``optional: true`` steps are nightly, not per pull request, and a
``mirror`` (the AMD copy of a step) is not the step a body names.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from bot.errors import BotError
from bot.tree.layout import TEST_AREAS

_DEFAULT_WORKDIR = "/vllm-workspace/tests"
_WORKSPACE = "/vllm-workspace"
_SEPARATORS = frozenset({"&&", "||", ";", "|"})
# pytest options that take a value as the next argument (the ones vLLM's steps use, and the
# common ones): their value is not a test path.
_VALUED = frozenset(
    {"-m", "-k", "-p", "-c", "-o", "--ignore", "--deselect", "--timeout", "--maxfail", "-n"}
    | {"--durations", "--junitxml", "--rootdir", "--confcutdir", "--log-level", "--tb", "-W"}
    | {"--shard-id", "--num-shards", "--import-mode", "--basetemp", "-r"}
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class PytestRun:
    """One ``pytest`` invocation of a step: its paths (relative to the tree) and filters."""

    command: str
    paths: tuple[str, ...]
    ignored: tuple[str, ...] = ()
    deselected: tuple[str, ...] = ()
    markers: str | None = None  # -m
    keywords: str | None = None  # -k


@dataclass(frozen=True)
class CiStep:
    file: str  # .buildkite/test_areas/<area>.yaml
    label: str
    key: str | None
    commands: tuple[str, ...]
    dependencies: tuple[str, ...] | None  # source_file_dependencies; None: always runs
    optional: bool
    runs: tuple[PytestRun, ...]
    line: int = 0  # where the step's label is, in ``file`` (1-based; 0: not found)

    @property
    def name(self) -> str:
        """How a pull request body names the step: its label and key."""
        return f"{self.label} (`{self.key}`)" if self.key else self.label

    def selects(
        self, test_path: str, test_name: str = "", markers: frozenset[str] = frozenset()
    ) -> bool:
        """Whether one of the step's pytest runs collects ``test_path`` (relative to the tree)."""
        return any(_run_selects(run, test_path, test_name, markers) for run in self.runs)

    def covers(self, path: str) -> bool:
        """Whether a change to ``path`` makes the step run."""
        if self.dependencies is None:
            return True
        excluded = [d[1:] for d in self.dependencies if d.startswith("!")]
        included = [d for d in self.dependencies if not d.startswith("!")]
        return any(_under(path, d) for d in included) and not any(_under(path, d) for d in excluded)


def is_ci_step_file(path: str) -> bool:
    """A relative path naming one of ``.buildkite/test_areas/*.yaml`` (the only files beside
    Python that a fix edits: a test's step gains the model file among its dependencies)."""
    posix = PurePosixPath(path)
    return str(posix.parent) == TEST_AREAS and posix.suffix == ".yaml" and ".." not in posix.parts


def read_steps(tree: Path) -> list[CiStep]:
    """Every step of ``.buildkite/test_areas/*.yaml`` (a file that does not parse is refused)."""
    files = sorted((tree / TEST_AREAS).glob("*.yaml"))
    stamp = tuple(
        (p.relative_to(tree).as_posix(), p.stat().st_mtime_ns, p.stat().st_size) for p in files
    )
    return list(_read_steps(tree, stamp))


@functools.lru_cache(maxsize=16)
def _read_steps(tree: Path, stamp: tuple[tuple[str, int, int], ...]) -> tuple[CiStep, ...]:
    """(Cached by the files' names, times and sizes: 36 YAML files parse in seconds.)"""
    steps: list[CiStep] = []
    for relative, _, _ in stamp:
        path = tree / relative
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise BotError(f"{relative} is not YAML: {str(exc).splitlines()[0]}") from None
        if not isinstance(data, dict):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for raw in data.get("steps") or []:
            if isinstance(raw, dict):
                step = _step(relative, raw)
                if step is not None:
                    steps.append(dataclasses.replace(step, line=_label_line(lines, step.label)))
    return tuple(steps)


def selecting_steps(
    tree: Path, test_path: str, test_name: str = "", markers: frozenset[str] = frozenset()
) -> list[CiStep]:
    """The per-pull-request steps that run ``test_path`` (nightly ones left out)."""
    return [
        s for s in read_steps(tree) if not s.optional and s.selects(test_path, test_name, markers)
    ]


def _label_line(lines: list[str], label: str) -> int:
    """The 1-based line of ``label: <label>`` (quoted or not), 0 if the YAML spells it another
    way."""
    for number, line in enumerate(lines, 1):
        key, _, value = line.strip().removeprefix("- ").partition(":")
        if key.strip() == "label" and value.strip().strip("'\"") == label:
            return number
    return 0


def _step(file: str, raw: dict) -> CiStep | None:
    label = raw.get("label")
    commands = raw.get("commands")
    if not isinstance(label, str) or not isinstance(commands, list):
        return None
    texts = tuple(c for c in commands if isinstance(c, str))
    deps = raw.get("source_file_dependencies")
    dependencies = tuple(str(d) for d in deps) if isinstance(deps, list) else None
    workdir = raw.get("working_dir") if isinstance(raw.get("working_dir"), str) else None
    runs = tuple(run for text in texts for run in _pytest_runs(text, workdir or _DEFAULT_WORKDIR))
    key = raw.get("key") if isinstance(raw.get("key"), str) else None
    return CiStep(file, label, key, texts, dependencies, raw.get("optional") is True, runs)


def _pytest_runs(command: str, workdir: str) -> list[PytestRun]:
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    runs: list[PytestRun] = []
    index = 0
    while index < len(words):
        word = words[index]
        if (
            word == "pytest"
            or word.endswith("/pytest")
            or words[index : index + 3]
            == [
                "python",
                "-m",
                "pytest",
            ]
        ):
            start = index + (3 if word == "python" else 1)
            end = start
            while end < len(words) and words[end] not in _SEPARATORS:
                end += 1
            runs.append(_pytest_run(command, words[start:end], workdir))
            index = end
        index += 1
    return runs


def _pytest_run(command: str, args: list[str], workdir: str) -> PytestRun:
    paths: list[str] = []
    ignored: list[str] = []
    deselected: list[str] = []
    markers = keywords = None
    index = 0
    while index < len(args):
        arg = args[index]
        option, _, inline = arg.partition("=")
        if arg.startswith("-") and option in _VALUED:
            value = inline if inline else (args[index + 1] if index + 1 < len(args) else "")
            index += 1 if inline else 2
            if option == "-m":
                markers = value
            elif option == "-k":
                keywords = value
            elif option == "--ignore":
                ignored.append(_tree_path(value, workdir))
            elif option == "--deselect":
                deselected.append(_tree_path(value, workdir))
            continue
        if not arg.startswith("-"):
            paths.append(_tree_path(arg, workdir))
        index += 1
    return PytestRun(command, tuple(paths), tuple(ignored), tuple(deselected), markers, keywords)


def _tree_path(argument: str, workdir: str) -> str:
    """A pytest path argument as a path from the tree's root (``tests/...``)."""
    if argument.startswith("/"):
        absolute = PurePosixPath(argument)
    else:
        absolute = PurePosixPath(workdir) / argument
    try:
        return absolute.relative_to(_WORKSPACE).as_posix()
    except ValueError:
        return argument


def _under(path: str, prefix: str) -> bool:
    return (
        path == prefix
        or path.startswith(prefix.rstrip("/") + "/")
        or (not prefix.endswith("/") and path.startswith(prefix))
    )


def _run_selects(run: PytestRun, test_path: str, test_name: str, markers: frozenset[str]) -> bool:
    named = False
    for path in run.paths:
        file, _, node = path.partition("::")
        if file == test_path:
            named = not node or node.split("[")[0] == test_name or not test_name
        elif _under(test_path, file) and not node:
            named = True
        if named:
            break
    if not named:
        return False
    if any(_under(test_path, i) for i in run.ignored):
        return False
    if any(d.partition("::")[0] == test_path and not d.partition("::")[2] for d in run.deselected):
        return False
    if run.markers is not None and not _evaluate(run.markers, lambda n: n in markers):
        return False
    if run.keywords is not None:
        haystack = f"{PurePosixPath(test_path).name} {test_name}".lower()
        if not _evaluate(run.keywords, lambda n: n.lower() in haystack):
            return False
    return True


def _evaluate(expression: str, truth: object) -> bool:
    """A pytest ``-m`` / ``-k`` expression (names, and/or/not, parentheses); one this reader
    does not understand selects nothing, so a step is never credited by a guess."""
    assert callable(truth)
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        return False

    def value(node: ast.expr) -> bool:
        if isinstance(node, ast.BoolOp):
            results = [value(v) for v in node.values]
            return all(results) if isinstance(node.op, ast.And) else any(results)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not value(node.operand)
        if isinstance(node, ast.Name) and _NAME.fullmatch(node.id):
            return bool(truth(node.id))
        raise ValueError(ast.dump(node))

    try:
        return value(tree.body)
    except ValueError:
        return False
