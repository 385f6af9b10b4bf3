"""Verification of a plan (`bot verify`), the GPU runner's test step, and the scan matrix.

The names below are loaded on first use: a reader of one value module (``bot publish`` reads
:mod:`bot.publish.evidence`) must not import the modules that run checks.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "GpuTarget": "bot.verify.dispatch",
    "PollSettings": "bot.verify.dispatch",
    "TestRun": "bot.verify.junit",
    "parse_junit": "bot.verify.junit",
    "run_pytest": "bot.verify.junit",
    "split_node_ids": "bot.verify.junit",
    "matrix_from_findings": "bot.verify.matrix",
    "GPU_MODES": "bot.verify.run",
    "VerifyOptions": "bot.verify.run",
    "exit_code": "bot.verify.run",
    "verify_plan": "bot.verify.run",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bot.verify' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
