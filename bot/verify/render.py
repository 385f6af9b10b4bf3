"""The PR body's results section. Everything that came from a log or a tree is escaped."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bot.config import cache_dir, home_dir
from bot.github.identity import RESULTS_END, RESULTS_START
from bot.markdown import inline
from bot.redact import redact
from bot.verification import GpuRun, Verification

START = RESULTS_START
END = RESULTS_END

_URL = re.compile(r"^https?://[A-Za-z0-9.:\-]+(/[A-Za-z0-9._~/\-%]*)?$")
_BACKTICKS = re.compile(r"`+")
_ICONS = {True: "✅ passed", False: "❌ failed", None: "⏭️ skipped"}


def without_local_paths(text: str) -> str:
    """Log text with this machine's bot cache, bot home and home directory named, not spelled:
    a PR body shows how the check ran, not where the operator keeps files."""
    places = [(cache_dir(), "<bot cache>"), (home_dir(), "<bot home>"), (Path.home(), "~")]
    for place, name in places:
        text = text.replace(str(place), name)
    return text


def code_block(text: str) -> str:
    """A fenced block whose fence is longer than any run of backticks inside it."""
    body = without_local_paths(redact(text))
    body = body.replace(START, "").replace(END, "").replace("<!--", "<! --")
    longest = max((len(m) for m in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{body}\n{fence}"


def link(label: str, url: object) -> str:
    if isinstance(url, str) and _URL.match(url):
        return f"[{label}]({url})"
    return label


def render_results(verification: Verification) -> str:
    verdict = "✅ passed" if verification.passed else "❌ not passed"
    lines = [
        "### Verification",
        "",
        f"**Result:** {verdict} — {inline(verification.message)}",
        "",
        "| Check | Result | Detail |",
        "| --- | --- | --- |",
    ]
    for check in verification.checks:
        result = _ICONS.get(check.passed, "?")
        detail = without_local_paths(check.detail)
        lines.append(f"| {inline(check.name)} | {result} | {inline(detail)} |")
    for check in verification.checks:
        if check.name == "engine" and check.record is not None:
            lines += ["", *engine_lines(check.record)]
    for check in verification.checks:
        if check.log_excerpt:
            summary = f"{inline(check.name)}: log excerpt"
            lines += ["", f"<details><summary>{summary}</summary>", ""]
            lines += [code_block(check.log_excerpt), "", "</details>"]
    if verification.gpu is not None:
        lines += ["", *_gpu_lines(verification.gpu)]
    if verification.finished_at:
        lines += ["", f"<sub>Verified by the bot at {inline(verification.finished_at)}.</sub>"]
    return "\n".join(lines)


def engine_lines(record: dict[str, Any]) -> list[str]:
    """The engine check's runs: which engine and overlay, each run's outcome and figures."""
    overlay = ", ".join(inline(m) for m in record.get("overlay") or [])
    lines = [
        f"**Engine check** ({inline(record.get('engine'))}, the {inline(record.get('release'))} "
        f"tree's {overlay} registered over the engine's classes; "
        f"{inline(record.get('command'))}):",
    ]
    runs = [run for run in record.get("runs") or [] if isinstance(run, dict)]
    if runs:
        lines += [
            "",
            "| Tree | Speculation | Outcome | Tokens | Proposed | Accepted | Seconds |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
    else:
        lines += ["", "No engine run was recorded: the engine did not start."]
    for run in runs:
        outcome = inline(run.get("outcome"))
        if run.get("error"):
            outcome += f": {inline(without_local_paths(str(run['error']))[:200])}"
        if run.get("identical_to_no_speculation") is True:
            outcome += " (output identical to no speculation)"
        cells = [inline(run.get(k, "")) for k in ("tokens", "proposed", "accepted", "seconds")]
        lines.append(
            f"| {inline(run.get('tree'))} | {inline(run.get('method'))} | {outcome} | "
            + " | ".join(cells)
            + " |"
        )
    if record.get("engine_note"):
        lines += ["", f"Engine: {inline(without_local_paths(str(record['engine_note'])))}"]
    return lines


def _gpu_lines(gpu: GpuRun) -> list[str]:
    after = _conclusion(gpu.conclusion, gpu.run_url)
    lines = [f"**GPU test** ({inline(gpu.mode)}): {after}"]
    if gpu.before is not None:
        before = _conclusion(gpu.before.get("conclusion"), gpu.before.get("run_url"))
        lines.append(f"- before the patch: {before}; after the patch: {after}")
    if gpu.log_excerpt:
        lines += ["", "<details><summary>Log excerpt</summary>", "", code_block(gpu.log_excerpt)]
        lines += ["", "</details>"]
    return lines


def _conclusion(conclusion: object, url: object) -> str:
    said = str(conclusion or "unknown").replace("_", " ")
    text = f"**{inline(said)}**"
    if url:
        text += f" ({link('run', url)})"
    return text


def replace_results_section(pr_markdown: str, section: str) -> str:
    """Put ``section`` between the result markers, or append a marked section."""
    block = f"{START}\n{section}\n{END}"
    start = pr_markdown.find(START)
    end = pr_markdown.find(END, start + len(START)) if start >= 0 else -1
    if start >= 0 and end >= 0:
        return pr_markdown[:start] + block + pr_markdown[end + len(END) :]
    if not pr_markdown.strip():
        return block + "\n"
    return pr_markdown.rstrip("\n") + "\n\n" + block + "\n"
