"""The smoke check: the patched target, built from a tiny random config, runs on CPU.

``harness/bot_smoke.py`` runs in the release's environment, in its own subprocess with a
timeout and an allow-listed environment; this module starts it and turns its JSON result into a
:class:`Check`. A model the harness cannot build or run on CPU is "not checked", never "passed".
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bot.errors import BotError
from bot.publish.evidence import values_proven
from bot.publish.smoke_target import SmokeTarget, target_of
from bot.subprocess_env import run_upstream_code
from bot.untrusted_files import read_regular
from bot.verify.checks import Check
from bot.verify.junit import excerpt

__all__ = ["SmokeTarget", "target_of"]  # read elsewhere as smoke.<name>; defined in smoke_target

HARNESS_DIR = Path(__file__).with_name("harness")
HARNESS = HARNESS_DIR / "bot_smoke.py"
SMOKE_TIMEOUT = 600.0
_RESULT_LIMIT = 1 << 20  # the harness's JSON result (the sandbox wrote it: read as data)


@dataclass
class SmokeRun:
    status: str  # passed | failed | not_checked
    detail: str
    log_excerpt: str = ""
    output: Path | None = None  # reference mode: the saved output tensor
    values_proven: bool = False  # patched mode: the harness proved the aux values


def read_result(data: object, *, reference: bool) -> SmokeRun:
    """The harness's JSON result as a run; anything else is not a result (failed when the
    patched run wrote it, not checked when the reference run did)."""
    if isinstance(data, dict) and isinstance(data.get("status"), str) and "detail" in data:
        status = data["status"]
        if status in ("passed", "failed", "not_checked"):
            proven = not reference and status == "passed" and data.get("values_proven") is True
            return SmokeRun(status, str(data["detail"]), values_proven=proven)
    return SmokeRun("not_checked" if reference else "failed", "")


def runtime_env(tree: Path) -> dict[str, str]:
    """What a subprocess running the tree on CPU adds to the minimal environment."""
    return {
        "PYTHONPATH": os.pathsep.join((str(tree), str(HARNESS_DIR))),
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_DO_NOT_TRACK": "1",
    }


def run_harness(
    python: Path,
    tree: Path,
    target: SmokeTarget,
    work: Path,
    *,
    reference: SmokeRun | None,
    timeout: float = SMOKE_TIMEOUT,
) -> SmokeRun:
    """One harness run: ``reference`` None means the unpatched (reference) run."""
    work.mkdir(parents=True, exist_ok=True)
    result_file = work / "result.json"
    command = [
        str(python),
        str(HARNESS),
        "--module",
        target.module,
        "--cls",
        target.class_name,
        "--result",
        str(result_file),
    ]
    # The sandbox shows the harness only its own folder; the reference run's output is bound
    # back read-only.
    readable: list[Path] = []
    if reference is None:
        command += ["--mode", "reference", "--output", str(work / "output.pt")]
    else:
        assert reference.output is not None
        command += ["--mode", "patched", "--reference", str(reference.output)]
        readable.append(reference.output.parent)
    extra = runtime_env(tree)
    try:
        completed = run_upstream_code(
            command, cwd=work, extra=extra, timeout=timeout, readable=readable, writable=[work]
        )
    except subprocess.TimeoutExpired:
        return SmokeRun("not_checked", f"the smoke harness did not finish in {timeout:g}s")
    log = excerpt(completed.stdout + completed.stderr)
    try:
        data = json.loads(read_regular(result_file, _RESULT_LIMIT))
    except (OSError, ValueError):
        data = None
    run = read_result(data, reference=reference is None)
    if not run.detail:
        run.detail = f"the smoke harness exited with {completed.returncode} and no result"
    run.log_excerpt = log
    if reference is None and run.status == "passed":
        run.output = work / "output.pt"
    return run


def smoke_tree(python: Path, tree: Path, base: str, target: SmokeTarget, work: Path) -> Check:
    """The whole smoke check on a patched checkout: the reference forward runs on ``base``
    (in a scratch worktree), the patched one on ``tree`` itself."""
    from bot.tree.worktree import scratch_worktree

    with scratch_worktree(tree, base) as unpatched:
        reference = run_harness(python, unpatched, target, work / "reference", reference=None)
    if reference.status != "passed":
        return reference_failed(reference)
    return smoke_check(run_harness(python, tree, target, work / "patched", reference=reference))


def parse_target(text: str) -> SmokeTarget:
    """``module:Class``, e.g. ``vllm.model_executor.models.glm4:Glm4ForCausalLM``."""
    module, _, class_name = text.partition(":")
    parts = module.split(".")
    if not (parts[0] == "vllm" and all(p.isidentifier() for p in parts)):
        raise BotError(f"not a vllm module:Class target: {text[:120]!r}")
    if not class_name.isidentifier():
        raise BotError(f"not a vllm module:Class target: {text[:120]!r}")
    return SmokeTarget(module, class_name)


def reference_failed(reference: SmokeRun | None) -> Check:
    """The unpatched model could not be run, so the patched one proves nothing either way."""
    if reference is None:
        return Check("smoke", None, "not checked: the unpatched model was not run")
    detail = f"not checked: the unpatched model does not run on CPU: {reference.detail}"
    return Check("smoke", None, detail, reference.log_excerpt)


def smoke_check(patched: SmokeRun) -> Check:
    if patched.status == "passed":
        return Check("smoke", True, patched.detail, record={"values_proven": patched.values_proven})
    if patched.status == "failed":
        return Check("smoke", False, patched.detail, patched.log_excerpt)
    return Check("smoke", None, f"not checked: {patched.detail}", patched.log_excerpt)


def set_smoke_check(targets: list[str], checks: list[Check]) -> Check:
    """One smoke check for a set of targets sharing a decoder: passed only when every
    target's passed; otherwise the first target's that did not, named."""
    for target, check in zip(targets, checks, strict=True):
        if check.passed is not True:
            detail = f"{target}: {check.detail}"
            return Check("smoke", check.passed, detail, check.log_excerpt, check.record)
    listed = "; ".join(f"{t}: {c.detail}" for t, c in zip(targets, checks, strict=True))
    proven = all(values_proven(c) for c in checks)
    return Check(
        "smoke", True, f"every target of the set: {listed}", record={"values_proven": proven}
    )
