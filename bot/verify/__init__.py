"""Verification of a plan (`bot verify`), the GPU runner's test step, and the scan matrix."""

from bot.verify.dispatch import GpuTarget, PollSettings
from bot.verify.junit import TestRun, parse_junit, run_pytest, split_node_ids
from bot.verify.matrix import matrix_from_findings
from bot.verify.run import GPU_MODES, VerifyOptions, exit_code, verify_plan

__all__ = [
    "GPU_MODES",
    "GpuTarget",
    "PollSettings",
    "TestRun",
    "VerifyOptions",
    "exit_code",
    "matrix_from_findings",
    "parse_junit",
    "run_pytest",
    "split_node_ids",
    "verify_plan",
]
