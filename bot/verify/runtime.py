"""The checks that run the release's own code: its CPU tests and the smoke forward pass.

Both run in the release's verification environment (:mod:`bot.verify.env`) with the scratch
tree first on ``sys.path``, once on the unpatched tree (with only the patch's tests applied, so
a new test exists and must fail) and once on the patched tree (where it must pass).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import BotError
from bot.plan import Plan
from bot.verify import scratch, smoke
from bot.verify.checks import Check, cpu_test_check
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

    @classmethod
    def prepare(cls, plan: Plan, enabled: bool = True, why_off: str | None = None) -> RuntimeStage:
        """The environment for the plan's release (built now if missing), or why there is none."""
        cpu_tests = list(plan.tests.get("cpu", []))
        if not enabled:
            return cls(plan, None, why_off or "the runtime checks were turned off", cpu_tests)
        if not plan.vllm_version:
            why = "the plan names no vLLM release, so there is no environment to run it in"
            return cls(plan, None, why, cpu_tests)
        try:
            env = vllm_env(plan.vllm_version, progress=_progress)
        except BotError as exc:
            return cls(plan, None, f"no vLLM {plan.vllm_version} environment: {exc}", cpu_tests)
        return cls(plan, env, "", cpu_tests, smoke_target=smoke.target_of(plan))

    def run_before(self, tree: Path, patch_file: Path, work: Path) -> None:
        """On the unpatched tree: the patch's own tests (must fail), the reference forward."""
        if self.env is None:
            return
        if self.cpu_tests:
            failure = scratch.apply_patch(tree, patch_file, only="tests/*")
            if failure is None:
                self.cpu_before = self._pytest(tree, work / "cpu-before.xml")
                scratch.apply_patch(tree, patch_file, only="tests/*", reverse=True)
        if isinstance(self.smoke_target, smoke.SmokeTarget):
            self.smoke_reference = smoke.run_harness(
                self.env.python, tree, self.smoke_target, work / "smoke-reference", reference=None
            )

    def run_after(self, tree: Path, work: Path) -> list[Check]:
        """On the patched tree: the CPU tests and the smoke check, as two checks."""
        return [self._cpu_check(tree, work), self._smoke_check(tree, work)]

    def _cpu_check(self, tree: Path, work: Path) -> Check:
        if not self.cpu_tests:
            return Check("cpu-tests", None, "not checked: the plan lists no CPU tests")
        if self.env is None:
            return cpu_test_check(None, None, self.why_not)
        if self.cpu_before is None:
            return cpu_test_check(None, None, "the patch's tests do not apply on their own")
        after = self._pytest(tree, work / "cpu-after.xml")
        return cpu_test_check(self.cpu_before, after)

    def _smoke_check(self, tree: Path, work: Path) -> Check:
        if self.env is None:
            return Check("smoke", None, f"not checked: {self.why_not}")
        if not isinstance(self.smoke_target, smoke.SmokeTarget):
            return Check("smoke", None, f"not checked: {self.smoke_target}")
        reference = self.smoke_reference
        if reference is None or reference.status != "passed":
            return smoke.reference_failed(reference)
        patched = smoke.run_harness(
            self.env.python, tree, self.smoke_target, work / "smoke-patched", reference=reference
        )
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
