"""The PR body's results section. Everything that came from a log or a tree is escaped."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bot.config import cache_dir, home_dir
from bot.identity import RESULTS_END, RESULTS_START
from bot.markdown import inline
from bot.redact import redact

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


def render_results(verification: dict[str, Any]) -> str:
    verdict = "✅ passed" if verification.get("passed") else "❌ not passed"
    lines = [
        "### Verification",
        "",
        f"**Result:** {verdict} — {inline(verification.get('message') or '')}",
        "",
        "| Check | Result | Detail |",
        "| --- | --- | --- |",
    ]
    for check in verification.get("checks", []):
        result = _ICONS.get(check.get("passed"), "?")
        detail = without_local_paths(str(check.get("detail") or ""))
        lines.append(f"| {inline(check.get('name'))} | {result} | {inline(detail)} |")
    for check in verification.get("checks", []):
        if check.get("name") == "engine" and isinstance(check.get("record"), dict):
            lines += ["", *engine_lines(check["record"])]
    for check in verification.get("checks", []):
        if check.get("log_excerpt"):
            summary = f"{inline(check.get('name'))}: log excerpt"
            lines += ["", f"<details><summary>{summary}</summary>", ""]
            lines += [code_block(str(check["log_excerpt"])), "", "</details>"]
    gpu = verification.get("gpu") or {}
    if gpu:
        lines += ["", *_gpu_lines(gpu)]
    finished = verification.get("finished_at")
    if finished:
        lines += ["", f"<sub>Verified by the bot at {inline(finished)}.</sub>"]
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


def _gpu_lines(gpu: dict[str, Any]) -> list[str]:
    mode = gpu.get("mode")
    lines = [f"**GPU test** ({inline(mode)}): {_conclusion(gpu)}"]
    before = gpu.get("before")
    if isinstance(before, dict):
        lines.append(
            f"- before the patch: {_conclusion(before)}; after the patch: {_conclusion(gpu)}"
        )
    excerpt = gpu.get("log_excerpt")
    if excerpt:
        lines += ["", "<details><summary>Log excerpt</summary>", "", code_block(str(excerpt))]
        lines += ["", "</details>"]
    return lines


def _conclusion(run: dict[str, Any]) -> str:
    conclusion = str(run.get("conclusion") or "unknown").replace("_", " ")
    text = f"**{inline(conclusion)}**"
    if run.get("run_url"):
        text += f" ({link('run', run.get('run_url'))})"
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
