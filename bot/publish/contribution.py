"""The parts of a PR body that upstream's rules require, rendered from records only.

``AGENTS.md`` asks a PR description for AI-assisted work to say why it is not a duplicate, which
test commands were run with their results, model evaluation results when the change affects
serving, and that AI assistance was used; the PR template adds its checklist and (0.32+) the
``pr-checklist`` skill's report. Each part here is a pure function of records: ``bot verify``'s
checks in plan.json, the duplicate search (:mod:`bot.publish.duplicates`), the patch, the
tree's rules, the docs the base commit has, and what a person attested
(:mod:`bot.publish.attestation`). Nothing is claimed without its record: a box is ticked only
when its records make it true, a method is named only where it ran, and a person is said to have
done only what their attestation or a record under their name shows. No clock is read: the
same records give the same bytes.

The parts sit between markers in pr.md (``bot:results``, ``bot:contribution``,
``bot:checklist``); ``bot propose`` and ``bot verify`` write them as a preview (no attestation
yet), ``bot publish`` renders them again from the live facts for the body it posts.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.duplicate_search import DuplicateSearch
from bot.errors import BotError
from bot.github.identity import RESULTS_END, RESULTS_START
from bot.markdown import inline
from bot.publish.attestation import SUBMITTER, Attestation
from bot.publish.contrib_rules import ContributionRules, quote, read_rules
from bot.redact import redact
from bot.tree.signatures import RAISED_AT, raised_site

if TYPE_CHECKING:
    from bot.plan import Plan
    from bot.recipes.base import Finding
    from bot.verification import Check, Verification

CONTRIBUTION = ("<!-- bot:contribution:start -->", "<!-- bot:contribution:end -->")
CHECKLIST = ("<!-- bot:checklist:start -->", "<!-- bot:checklist:end -->")
RESULTS = (RESULTS_START, RESULTS_END)
# A group's claim of what its tests showed, per member, rendered from the verification records
# (the recipe's claims, written at propose time, say what the change is, not what passed).
CLAIMS = ("<!-- bot:claims:start -->", "<!-- bot:claims:end -->")
BOT_NAME = "vllm-eagle3-bot"
_EXCERPT_LINES = 3  # a log excerpt in the body: its last lines, collapsed
_EXCERPT_CHARS = 400


@dataclass(frozen=True)
class Facts:
    """Everything the generic parts of a body read. ``submitter`` is the login whose token
    opens the PR (None in a preview); ``verified`` is publish's own verdict (a GPU run GitHub
    confirms for the pushed commit); ``docs`` the base commit's docs pages that speak of
    EAGLE and name a changed class (None: not looked at)."""

    plan: Plan
    patch: str
    rules: ContributionRules
    search: DuplicateSearch | None
    submitter: str | None = None
    submitter_identity: str | None = None  # "Name <email>" that commits (the operator's)
    # "Name <email>" of each commit's author (its Signed-off-by) on the branch as pushed
    authors: tuple[str, ...] = ()
    attestation: Attestation | None = None
    verified: bool | None = None  # None: not asked of GitHub yet (a preview)
    docs: tuple[str, ...] | None = None
    # A core plan's demand: the lines of the plans that build on it and were asked for
    # (bot/publish/demand.py), each naming its dependent.
    inherited: tuple[str, ...] = ()


# --- the tests that ran -----------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One line of the validation table: what ran, and what its record says."""

    what: str  # Markdown: the command or the check, in words a reviewer can repeat
    outcome: str  # passed | failed | not run
    said: str  # Markdown: the record's figures, or why it did not run


_OUTCOME = {True: "passed", False: "failed", None: "not run"}


def validation_rows(plan: Plan, verified: bool | None = None) -> list[Row]:
    """``bot verify``'s records, each once: the patch's own checks, lint, the contributed tests
    before and after the fix, the smoke check, the GPU test (the engine has its table)."""
    verification = plan.verification
    if verification is None:
        return []
    rows: list[Row] = []
    own = [verification.check(n) for n in ("apply", "confined", "rescan", "py_compile", "ruff")]
    if any(own):
        rows.append(_joined(OWN_CHECKS, own))
    cpu = verification.check("cpu-tests")
    if cpu is not None:
        rows.append(_cpu_row(cpu, plan.tests.cpu))
    through_llm = verification.check("engine-tests")
    if through_llm is not None:
        shown = _raise_sites(verification.check("engine"))
        rows.append(_engine_tests_row(through_llm, plan.tests.engine, shown))
    smoke = verification.check("smoke")
    if smoke is not None:
        rows.append(
            Row(
                "`bot smoke`: a forward pass, patched and unpatched",
                _OUTCOME[smoke.passed],
                _said(smoke.detail),
            )
        )
    gpu = verification.gpu
    nodes = plan.tests.gpu
    if nodes or (gpu is not None and gpu.mode != "skip"):
        rows.append(_gpu_row(gpu, nodes, verified))
    return rows


# The bot's own checks of the patch, one row: each check's name is in it; when all passed the
# cell keeps the one fact a reviewer needs from their records (the commit the patch applies at).
OWN_CHECKS = (
    "`git apply`, confined to the recipe's edits, `bot scan` again, `py_compile`, `ruff check`"
)
_OWN_SAID = ("apply",)


def _joined(what: str, checks: Sequence[Check | None]) -> Row:
    ran = [c for c in checks if c is not None]
    if any(c.passed is False for c in ran):
        failed = next(c for c in ran if c.passed is False)
        return Row(what, "failed", _said(f"{failed.name}: {failed.detail}"))
    if all(c.passed is True for c in ran):
        said = [c.detail for c in ran if c.name in _OWN_SAID] or [c.detail for c in ran]
        return Row(what, "passed", _said("; ".join(said)))
    skipped = next(c for c in ran if c.passed is None)
    return Row(what, "not run", _said(f"{skipped.name}: {skipped.detail}"))


def _cpu_row(check: Check, nodes: Sequence[str]) -> Row:
    record = check.record or {}
    command = pytest_command(nodes)
    said = check.detail
    before, after = record.get("before"), record.get("after")
    runs = _case_runs(check)
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        said = f"without the fix: {_run_said(before)}; with it: {_run_said(after)}"
    elif check.passed is True and runs is not None and runs[1]:
        # Each result once: the counts from the per-case record, and where the test failed
        # without the fix (the log's last line) instead of a log excerpt saying it again.
        failed = sum(o == "failed" for o in runs[0].values())
        passed = sum(o == "passed" for o in runs[1].values())
        site = failure_site(check)
        said = (
            f"{failed} of {len(runs[0])} failed without the fix{f' ({site})' if site else ''}; "
            f"{passed} of {len(runs[1])} passed with it"
        )
    steps = ci_steps(check)
    if steps:
        said += "; CI runs it in " + ", ".join(steps)
    outcome = _OUTCOME[check.passed]
    if check.passed is None and _case_runs(check) is not None:
        outcome = "not checked"  # both runs are recorded; the detail says why they do not judge
        said = said.removeprefix("not checked: ")
    return Row(f"{command}, without the fix, then with it", outcome, _said(said))


_FAILED_AT = re.compile(r"^(\S+\.py):(\d+): (\w+)$")


def failure_site(check: Check) -> str:
    """Where pytest says the contributed test failed before the patch (its log's last
    ``path:line: Error`` line), as ``Error at path:line``; "" when the log names none."""
    before = (check.log_excerpt or "").split("\n\nafter the patch:\n")[0]
    for line in reversed(before.strip().splitlines()):
        found = _FAILED_AT.match(line.strip())
        if found:
            return f"{found[3]} at {found[1]}:{found[2]}"
    return ""


def _case_runs(check: Check | None) -> tuple[Mapping[str, str], Mapping[str, str]] | None:
    """The CPU tests' case outcomes ``(before, after)`` as ``bot verify`` recorded them."""
    record = (check.record if check is not None else None) or {}
    cases = record.get("cases")
    if not isinstance(cases, Mapping):
        return None
    before, after = cases.get("before"), cases.get("after")
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return None
    return before, after


def _case_key(name: str) -> str:
    """A pytest node id (``tests/a/b.py::C::f[x]``) or a JUnit case (``tests.a.b.C::f[x]``)
    spelled one way: ``tests.a.b.C.f[x]``."""
    head, bracket, param = name.partition("[")
    if ".py::" in head:
        path, _, rest = head.partition(".py::")
        head = f"{path.replace('/', '.')}::{rest}"
    return head.replace("::", ".") + bracket + param


@dataclass(frozen=True)
class MemberResult:
    """What the CPU tests' records show of one group member: ``backed`` when each of its cases
    failed before the patch and passed after it; otherwise ``why`` says what happened."""

    cls: str
    backed: bool
    why: str = ""


def member_results(plan: Plan) -> list[MemberResult] | None:
    """Each member's CPU test cases, before and after the patch, from ``bot verify``'s record;
    None when no per-case record exists (not verified, or the tests did not run)."""
    recorded = _recorded_cases(plan)
    if recorded is None:
        return None
    return [
        _member_result(m.class_name, m.finding.module, m.tests.cpu, *recorded) for m in plan.members
    ]


def _recorded_cases(plan: Plan) -> tuple[dict[str, str], dict[str, str], str] | None:
    """The CPU tests' case outcomes before and after the patch (keys spelled by
    :func:`_case_key`) and why the verdict could not judge them, or None without a record."""
    verification = plan.verification
    check = verification.check("cpu-tests") if verification else None
    runs = _case_runs(check)
    if check is None or runs is None:
        return None
    before, after = ({_case_key(k): v for k, v in run.items()} for run in runs)
    return before, after, str((check.record or {}).get("blocked") or "")


def _member_result(
    cls: str,
    module: str,
    tests: Sequence[str],
    before: Mapping[str, str],
    after: Mapping[str, str],
    blocked: str,
) -> MemberResult:
    """What the recorded cases show of one class: backed when each of its cases failed before
    the patch and passed after it."""
    nodes = [_case_key(n) for n in tests]
    was = [before.get(n, "not run") for n in nodes]
    now = [after.get(n, "not run") for n in nodes]
    if not nodes:
        return MemberResult(cls, False, "it has no CPU test")
    if all(o == "passed" for o in now) and all(o == "failed" for o in was):
        return MemberResult(cls, True)
    if any(o == "passed" for o in was):
        why = "its test passes without the fix too, so it does not test it"
        return MemberResult(cls, False, why)
    if any(o == "failed" for o in now) and blocked and module in blocked:
        why = f"its test still fails after the patch, and is not judged here: {blocked}"
        return MemberResult(cls, False, why)
    if any(o == "failed" for o in now):
        return MemberResult(cls, False, "its test fails after the patch")
    said = ", ".join(dict.fromkeys(o for o in now if o != "passed"))
    return MemberResult(cls, False, f"its test was {said} here")


def _claims_view(plan: Plan) -> dict[str, Any] | None:
    """The claim of what the records showed: a group's, per member (how many its CPU tests
    back, by name those they do not, with why); a single class's, its recipe's claimed outcome
    (:meth:`bot.recipes.base.Recipe.claimed_outcome`) as far as the records show it. Before
    any record, that nothing is checked yet; None for a single class claiming no outcome."""
    if not plan.is_group:
        return _single_view(plan)
    tests = _test_functions(plan.tests.cpu)
    results = member_results(plan)
    check = plan.verification.check("cpu-tests") if plan.verification else None
    view: dict[str, Any] = {
        "single": False,
        "members": len(plan.members),
        "tests": [_code(t) for t in tests[:2]],
        "more_tests": max(0, len(tests) - 2),
        "recorded": results is not None,
        "why_not": _said(check.detail) if check is not None and results is None else "",
    }
    if results is not None:
        view["backed"] = sum(r.backed for r in results)
        unbacked = [r for r in results if not r.backed]
        view["unbacked"] = [{"cls": _code(r.cls), "why": _said(r.why)} for r in unbacked]
    return view


def _test_functions(nodes: Sequence[str]) -> list[str]:
    """The test functions ``nodes`` run, once each, parameters left out."""
    return list(dict.fromkeys(n.partition("[")[0] for n in nodes))


def _single_view(plan: Plan) -> dict[str, Any] | None:
    """A single class's claimed outcome as far as the records of the checks that can show it
    (:class:`bot.recipes.base.ClaimedOutcome`) show it: ``backed`` when one shows it (its CPU
    tests fail before the patch and pass after it; the test through ``LLM`` fails before with
    the tree's missing-interface error and passes after it; the engine refused the target
    before and ran the methods after) and none fails; ``failed`` when one fails; ``unjudged``
    when those that ran could not judge it; ``unchecked`` before any."""
    from bot.publish.writeup import environment
    from bot.recipes import recipe_named

    recipe = recipe_named(plan.recipe or "")
    if recipe is None or plan.finding is None:
        return None
    targets = [r.class_name for r in plan.resolves if r.recipe == plan.recipe]
    outcome = recipe.claimed_outcome(plan.finding, targets or [plan.finding.class_name])
    if outcome is None:
        return None
    rendered = environment().get_template(outcome.template).render(dict(outcome.values))
    said: dict[bool | None, list[str]] = {True: [], False: [], None: []}
    for name in outcome.shown_by:
        check = plan.verification.check(name) if plan.verification else None
        if check is not None:
            verdict, reason = _shown(plan, check)
            said[verdict].append(reason)
    if said[False]:
        state, reasons = "failed", said[False] + said[None]
    elif said[True]:
        state, reasons = "backed", said[True]
    elif said[None]:
        state, reasons = "unjudged", said[None]
    else:
        state, reasons = "unchecked", []
    return {"single": True, "claim": " ".join(rendered.split()), "state": state, "reasons": reasons}


def _shown(plan: Plan, check: Check) -> tuple[bool | None, str]:
    """Whether ``check``'s record shows a single class's claimed outcome, and in what words."""
    if check.name == "cpu-tests":
        tests = _test_functions(plan.tests.cpu)
        named = ", ".join(_code(t) for t in tests[:2]) + (
            f" and {len(tests) - 2} more" if len(tests) > 2 else ""
        )
        recorded = _recorded_cases(plan)
        finding = plan.finding
        result = (
            _member_result(finding.class_name, finding.module, plan.tests.cpu, *recorded)
            if recorded is not None and finding is not None
            else None
        )
        if check.passed is True and (result is None or result.backed):
            return True, (
                f"the CPU tests under Validation ({named}) fail without the patch and pass with it"
            )
        why = result.why if result is not None else check.detail.removeprefix("not checked: ")
        return (False if check.passed is True else check.passed), (
            f"The CPU tests ({named}): {_said(why)}"
        )
    if check.name == "engine-tests":
        if check.passed is True:
            return True, "the test through `LLM` fails without the patch and passes with it"
        detail = check.detail.removeprefix("not checked: ")
        detail = detail.removeprefix("every member is unjudged: ")
        return check.passed, f"The test through `LLM`: {_said(detail)}"
    methods = methods_that_ran(plan)
    if check.passed is True and methods:
        return True, f"{', '.join(methods)} run in the engine on CPU with it, refused without it"
    detail = check.detail.removeprefix("not checked: ")
    return (check.passed if check.passed is not True else None), (
        f"The engine on CPU: {_said(detail)}"
    )


def _engine_tests_row(check: Check, nodes: Sequence[str], shown: frozenset[str]) -> Row:
    """The test through ``LLM`` as the CI step runs it, in the CPU engine, without the fix and
    with it; members the engine could not judge are counted here and listed under the table
    (:func:`unjudged_members`). An error's raise site the engine's table names (``shown``) is
    not said again."""
    record = check.record or {}
    step = record.get("step")
    command = step.get("command") if isinstance(step, Mapping) else None
    cases = f"{len(nodes)} cases" if len(nodes) != 1 else "1 case"
    what = (
        f"{_code(str(command))} from `tests/` ({cases}) in "
        f"{inline(record.get('engine') or 'the CPU engine')}, without the fix, then with it"
        if command
        else f"the contributed test through `LLM` ({cases}), without the fix, then with it"
    )
    said = check.detail
    before, after = record.get("before"), record.get("after")
    if check.passed is not None and isinstance(before, Mapping) and isinstance(after, Mapping):
        said = f"without the fix: {_run_said(before, shown)}; with it: {_run_said(after, shown)}"
        if record.get("failed_because"):
            said += f"; {record['failed_because']}"
        steps = ci_steps(check)
        if steps:
            said += "; CI runs it in " + ", ".join(steps)
        left_out = record.get("unjudged")
        if isinstance(left_out, Mapping) and left_out:
            said += f"; {len(left_out)} unjudged (listed below)"
        if record.get("engine"):
            said += "; configs and tokenizers from a local Hub stand-in"
    return Row(what, _OUTCOME[check.passed], _said(said))


def unjudged_members(plan: Plan) -> list[dict[str, str]]:
    """The members the engine-tests record names unjudged, one line per reason (a group's
    multimodal members share theirs): Markdown, the reason cut short."""
    verification = plan.verification
    check = verification.check("engine-tests") if verification is not None else None
    left_out = (check.record or {}).get("unjudged") if check is not None else None
    if not isinstance(left_out, Mapping):
        return []
    by_reason: dict[str, list[str]] = {}
    for arch, why in sorted(left_out.items(), key=lambda item: str(item[0])):
        # Each member's own module named aside, members whose modules fail alike (the engine
        # lacks torchvision) share one line: each result once.
        by_reason.setdefault(_OWN_MODULE.sub("", str(why)), []).append(str(arch))
    return [
        {"members": ", ".join(_code(a) for a in archs), "why": _said(_whose(why, len(archs)))}
        for why, archs in by_reason.items()
    ]


def _whose(why: str, members: int) -> str:
    if not why.startswith(_NOT_IMPORTING):
        return why
    exception = why.removeprefix(_NOT_IMPORTING)
    if members == 1:
        return f"its module does not import on this engine: {exception}"
    return f"their modules do not import on this engine: {exception}"


# The harness's reason for a member whose file does not import: "<its module> does not
# import on this engine: <exception>" (bot/verify/harness).
_NOT_IMPORTING = " does not import on this engine: "
_OWN_MODULE = re.compile(rf"^vllm(?:\.\w+)+(?={re.escape(_NOT_IMPORTING)})")


_SITE_SAID = re.compile(r" \((\S+\.py:\d+) of [^()]*\)$")


def _run_said(run: Mapping[str, Any], shown: frozenset[str] = frozenset()) -> str:
    text = str(run.get("summary") or run.get("conclusion") or "")
    error = str(run.get("error") or "")
    site = _SITE_SAID.search(error)
    if site and site[1] in shown:
        error = error[: site.start()]  # the engine's table names where it was raised
    return f"{text} ({error})" if error else text


def _raise_sites(check: Check | None) -> frozenset[str]:
    """``path:line`` of each error the engine check's runs recorded (its table shows them)."""
    runs = ((check.record if check is not None else None) or {}).get("runs") or []
    found = (raised_site(str(r.get("error") or "")) for r in runs if isinstance(r, Mapping))
    return frozenset(site for site in found if site)


def ci_steps(check: Check | None) -> list[str]:
    """The CI steps a check's record says select the contributed tests (the engine-tests
    record: ``ci`` entries naming a step and the file and line it is defined at), as plain
    text."""
    record = (check.record if check is not None else None) or {}
    steps = []
    for step in record.get("ci") or []:
        if isinstance(step, Mapping) and step.get("step"):
            where = f" ({step.get('file')}:{step.get('line')})" if step.get("file") else ""
            steps.append(f"{step['step']}{where}")  # plain text: the row's cell escapes it
    return steps


def pytest_command(nodes: Sequence[str]) -> str:
    """One ``pytest`` command for the plan's nodes: a group's cases of one parametrized test
    run by the test's own id (they are the only cases the patch adds to it)."""
    if not nodes:
        return "`pytest` (no CPU test in the plan)"
    tests = list(dict.fromkeys(n.split("[", 1)[0] for n in nodes))
    shown = tests if len(nodes) > 3 else list(nodes)
    quoted = " ".join(f"'{n}'" for n in shown)
    cases = f" ({len(nodes)} cases)" if len(nodes) > len(shown) else ""
    return f"`pytest -v {_code_inner(quoted)}`{cases}"


def _gpu_row(gpu: Any, nodes: Sequence[str], verified: bool | None) -> Row:
    command = pytest_command(nodes) + " on the self-hosted GPU runner"
    if gpu is None or gpu.mode == "skip":
        return Row(
            command, "not run", "no GPU run is recorded; the PR stays a draft until one passes"
        )
    before = f"; before the patch: {inline(gpu.before.get('conclusion'))}" if gpu.before else ""
    if gpu.conclusion == "success" and verified is None:
        return Row(
            command,
            "not confirmed yet",
            "the record says passed; the PR states it once GitHub confirms a passed run of the "
            "pushed commit" + before,
        )
    if gpu.conclusion == "success" and not verified:
        return Row(
            command,
            "not confirmed",
            "GitHub shows no passed gpu-verify run of this commit, so it is not stated as passed",
        )
    outcome = "passed" if gpu.conclusion == "success" else str(gpu.conclusion).replace("_", " ")
    if gpu.conclusion == "success" and gpu.mode == "dispatch":
        said = "run confirmed on GitHub: a passed gpu-verify run of this commit"
    elif gpu.conclusion == "success":
        said = "run on the operator's GPU machine (their record; GitHub cannot confirm it)"
    else:
        said = f"{inline(gpu.mode)} run"
    return Row(command, outcome, _said(said + before))


def _said(text: str) -> str:
    from bot.publish.render import without_local_paths

    return inline(without_local_paths(text), 400)


def _code(text: str) -> str:
    from bot.publish.writeup import code

    return code(text)


def _code_inner(text: str) -> str:
    return text.replace("`", "'")


def code_cell(text: str, limit: int) -> str:
    """Untrusted text as the inside of a code span in a table cell: literal there, so only what
    ends the span or the cell, or reads as one of the bot's markers, is changed."""
    from bot.publish.writeup import code_plain

    flat = " ".join(code_plain(redact(text)).split())[:limit]
    return flat.replace("`", "'").replace("|", "\\|").replace("<!--", "<! --")


# --- the engine check -------------------------------------------------------------------------

_METHOD_NAMES = {"eagle3": "EAGLE-3", "dflash": "DFlash", "dspark": "DSpark", "ngram": "n-gram"}


@dataclass(frozen=True)
class EngineRow:
    method: str
    without: str  # Markdown
    with_fix: str  # Markdown


def engine_view(check: Check | None) -> dict[str, Any] | None:
    """The engine check as the body shows it: which engine (its own version), which tree's
    files, and per method the run without the fix (the error and the file and line of the
    engine that raised it) and with it (tokens, identical output, acceptance)."""
    if check is None or not isinstance(check.record, Mapping):
        return None
    record = check.record
    engine = inline(record.get("engine") or "the engine")
    runs = [r for r in record.get("runs") or [] if isinstance(r, Mapping)]
    by = {(str(r.get("tree")), str(r.get("method"))): r for r in runs}
    rows = []
    for method in dict.fromkeys(str(r.get("method")) for r in runs):
        if method in ("none", "ngram"):
            continue
        before, after = by.get(("before", method)), by.get(("after", method))
        row = EngineRow(
            _METHOD_NAMES.get(method, inline(method)),
            _engine_run(before, engine),
            _engine_run(after, engine),
        )
        if rows and (rows[-1].without, rows[-1].with_fix) == (row.without, row.with_fix):
            # Each result once: methods that ran alike share a row.
            alike = rows.pop()
            row = dataclasses.replace(alike, method=f"{alike.method}, {row.method}")
        rows.append(row)
    return {
        "engine": engine,
        "release": inline(record.get("release") or ""),
        "overlay": [str(m) for m in record.get("overlay") or []],  # shown as code spans
        "note": inline(record.get("engine_note") or ""),
        "outcome": _OUTCOME[check.passed],
        "detail": "" if check.passed is not None or rows else _said(check.detail),
        "rows": rows,
        "methods": [m for r in rows for m in r.method.split(", ")],
    }


def _engine_run(run: Mapping[str, Any] | None, engine: str) -> str:
    if run is None:
        return "not run"
    outcome = str(run.get("outcome"))
    if outcome == "ok":
        parts = [f"{inline(run.get('tokens'))} tokens"]
        if run.get("identical_to_no_speculation") is True:
            parts.append("identical to the run without speculation")
        if run.get("proposed") is not None:
            parts.append(
                f"{inline(run.get('accepted'))} of {inline(run.get('proposed'))} drafted accepted"
            )
        return ", ".join(parts)
    error = str(run.get("error") or "")
    message = RAISED_AT.split(error, maxsplit=1)[0].strip().rstrip("(").strip()
    said = f"{_word(outcome)}: `{code_cell(message, 160)}`"
    if raised := raised_site(error):
        said += f", raised at `{raised}` of {engine}"
    return said


def _word(outcome: str) -> str:
    return {"load_error": "refused at load", "run_error": "failed while generating"}.get(
        outcome, inline(outcome)
    )


def methods_that_ran(plan: Plan) -> list[str]:
    """The speculative methods a record shows running with the fix (engine or GPU)."""
    view = engine_view(plan.verification.check("engine") if plan.verification else None)
    return [] if view is None else [r.method for r in view["rows"] if "tokens" in r.with_fix]


# --- the pr-checklist report ------------------------------------------------------------------


@dataclass(frozen=True)
class ChecklistReport:
    lines_added_outside_tests: int
    lines_added_in_tests: int
    files: tuple[str, ...]
    core_touched: tuple[str, ...]
    tier: str  # "Low (< 50 lines)" ...
    tier_name: str  # "Low" | "Medium" | "High" | ""
    low_complexity: bool


def checklist_report(patch: str, rules: ContributionRules) -> ChecklistReport:
    """The SKILL's measurable items from the patch: lines added outside tests (its complexity
    rule of thumb excludes tests and docs), the core components touched (its own list)."""
    files: list[str] = []
    outside = inside = 0
    current = ""
    for line in patch.splitlines():
        if line.startswith("+++ "):
            current = line[4:].removeprefix("b/")
            files.append(current)
        elif line.startswith("+") and not line.startswith("+++"):
            if current.startswith(("tests/", "docs/")):
                inside += 1
            else:
                outside += 1
    core = tuple(
        f for f in files if any(fnmatch.fnmatch(f, glob) for glob in rules.core_components)
    )
    name, tier = tier_of(outside, rules)
    return ChecklistReport(
        outside, inside, tuple(dict.fromkeys(files)), core, tier, name, name == "Low"
    )


def tier_of(lines: int, rules: ContributionRules) -> tuple[str, str]:
    """(name, "name (bound)") of the SKILL's complexity tier for ``lines`` added outside tests;
    ("", ...) when the tree states no tiers."""
    for tier in rules.complexity_tiers:
        numbers = [int(n) for n in re.findall(r"\d+", tier.bound)]
        if tier.bound.startswith("<") and numbers and lines < numbers[0]:
            return tier.name, f"{tier.name} ({tier.bound})"
        if "-" in tier.bound and len(numbers) == 2 and numbers[0] <= lines <= numbers[1]:
            return tier.name, f"{tier.name} ({tier.bound})"
        if tier.bound.startswith(">") and numbers and lines > numbers[0]:
            return tier.name, f"{tier.name} ({tier.bound})"
    return "", "not stated by this tree"


# --- the template's checklist -----------------------------------------------------------------


@dataclass(frozen=True)
class Box:
    text: str  # the template's item, verbatim
    ticked: bool
    why: str  # the record behind the tick, or what is missing


def template_boxes(facts: Facts, report: ChecklistReport | None) -> list[Box]:
    """The template's checklist, each box ticked only when records make it true."""
    plan = facts.plan
    verification = plan.verification
    ran = bool(verification) and any(r.outcome != "not run" for r in validation_rows(plan))
    cpu = verification.check("cpu-tests") if verification else None
    regression = cpu is not None and cpu.passed is True
    clean = bool(verification) and all(verification.check_passed(n) for n in ("ruff", "py_compile"))
    attested = facts.attestation is not None and facts.attestation.read_every_line
    searched = facts.search is not None and facts.search.ran
    docs = facts.docs is not None and not facts.docs
    titled = bool(re.match(r"^(\[[^\]]+\])+ ", plan.title or ""))
    boxes = []
    for item in facts.rules.template_checklist:
        low = item.lower()
        if "/pr-checklist" in low:
            ok, why = report is not None, "the pr-checklist report below, section by section"
        elif "ai assistance was used" in low:
            ok, why = True, "the AI assistance statement"
        elif low.startswith("**design fit"):
            ok = report is not None and report.low_complexity and not report.core_touched
            why = "Low complexity, no core component" if ok else "not Low complexity, or core"
        elif low.startswith("**testing and validation"):
            through_llm = verification.check("engine-tests") if verification else None
            # A member the test through LLM could not judge here is validated by nothing.
            unjudged = through_llm is not None and bool((through_llm.record or {}).get("unjudged"))
            ok = (regression and bool(ci_steps(cpu))) or (
                through_llm is not None
                and through_llm.passed is True
                and not unjudged
                and bool(ci_steps(through_llm))
            )
            why = (
                "the regression test failed without the fix and passed with it, and a CI step "
                "runs it"
                if ok
                else "no record of the regression test failing before and passing after for "
                "every class it fixes, and of a CI step that runs it"
            )
        elif low.startswith("**code quality"):
            ok = clean and attested and docs
            why = "lint records, the read-every-line attestation, no docs page to update"
        elif low.startswith("**pull request contents"):
            ok = ran and searched and attested and titled
            why = "summary, links, recorded evidence, root cause; tagged title; sign-off"
        elif low.startswith("the purpose of the pr"):
            ok, why = True, "Purpose"
        elif low.startswith("the test plan"):
            ok, why = bool(plan.tests.cpu or plan.tests.gpu), "Test Plan"
        elif low.startswith("the test results"):
            ok, why = ran, "Test Result, from `bot verify`'s records"
        else:
            ok, why = False, "not checked by the bot"
        boxes.append(Box(item, ok, why))
    return boxes


# --- rendering --------------------------------------------------------------------------------


def context(facts: Facts) -> dict[str, Any]:
    """Everything the three generic blocks show, as plain escaped values."""
    from bot.recipes import recipe_named

    plan, rules = facts.plan, facts.rules
    report = checklist_report(facts.patch, rules) if rules.pr_checklist_sections else None
    named = list(dict.fromkeys(m.recipe for m in plan.members)) or [plan.recipe or ""]
    recipes = [r for r in map(recipe_named, named) if r is not None]
    verification = plan.verification
    smoke_passed = bool(verification) and verification.check_passed("smoke")
    engine = engine_view(verification.check("engine") if verification else None)
    return {
        "recipe": ", ".join(named),
        "replication": " ".join(dict.fromkeys(r.replication for r in recipes if r.replication)),
        "model_evaluation": " ".join(
            dict.fromkeys(r.model_evaluation(smoke_passed) for r in recipes)
        ),
        "model_eval_rule": any(
            "model evaluation" in item.lower() for item in rules.description_must_include
        ),
        "rows": validation_rows(plan, facts.verified),
        "unjudged": unjudged_members(plan),
        "asks_gpu": bool(plan.tests.gpu),
        "engine": engine,
        "logs": _logs(verification),
        "search": _search_view(facts.search, plan),
        "who": _who(facts),
        "claims": _claims_view(plan),
        "report": report,
        "docs": facts.docs,
        "rules": rules,
        "boxes": template_boxes(facts, report),
        # Mid-sentence, "#8" is GitHub's link to the issue, not a heading: left unescaped.
        "inherited": [inline(line, limit=200).replace("\\#", "#") for line in facts.inherited],
    }


def _logs(verification: Verification | None) -> list[dict[str, str]]:
    """The contributed tests' and the smoke check's logs, collapsed and cut to their last lines
    (the engine's figures are in its table; the records hold the rest)."""
    from bot.publish.render import code_block

    if verification is None:
        return []
    logs = []
    for check in verification.checks:
        if check.log_excerpt and check.name in ("cpu-tests", "engine-tests", "smoke"):
            if _row_quotes_error(check):
                continue  # its row quotes the error already: each result once
            parts = check.log_excerpt.strip().split("\n\nafter the patch:\n")
            if check.passed is True:
                parts = parts[:1]  # its row says it passed after the patch: the failure before
            said = check.log_excerpt.replace("before the patch:", "").replace(
                "after the patch:", ""
            )
            if not said.strip():
                continue  # the runs printed nothing worth quoting (their record says why)
            text = "\n\nafter the patch:\n".join(_tail(part) for part in parts)
            name = inline(check.name) + (", before the patch" if len(parts) == 1 else "")
            logs.append({"name": name, "block": code_block(text)})
    gpu = verification.gpu
    if gpu is not None and gpu.log_excerpt and gpu.mode != "skip":
        logs.append({"name": "GPU test", "block": code_block(_tail(gpu.log_excerpt))})
    return logs


def _row_quotes_error(check: Check) -> bool:
    record = check.record or {}
    before = record.get("before")
    quoted = check.name == "cpu-tests" and check.passed is True and bool(failure_site(check))
    return (
        quoted
        or bool(record.get("failed_because"))
        or (isinstance(before, Mapping) and bool(before.get("error")))
    )


def _tail(text: str) -> str:
    lines = [line[:200] for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-_EXCERPT_LINES:])[-_EXCERPT_CHARS:]


def _search_view(search: DuplicateSearch | None, plan: Plan) -> dict[str, Any]:
    """The search as the body states it, for the plan's classes only and without counts that
    grow with upstream's PR list, so an unchanged answer gives the same words."""
    members = [m.class_name for m in plan.members] or [plan.class_name or ""]
    if search is None or not search.ran:
        return {"ran": False, "why_not": inline(search.why_not if search else "not run yet")}
    search = search.for_classes(members)
    first = next(iter(search.keywords), None)
    covered = [(c, p) for c in members if (p := search.covering(c)) is not None]
    numbers = {p.number for _, p in covered}
    return {
        "ran": True,
        "commands": [_code_inner(c) for c in search.commands],
        "classes": len(members),
        "example": ", ".join(_code(v) for v in first.shown().split(", ")) if first else "",
        "covered": [
            {"cls": inline(c), "number": p.number, "state": p.state, "title": inline(p.title, 100)}
            for c, p in covered
        ],
        "related": [
            {"number": f.number, "state": f.state, "why": inline(f.why, 160)}
            for f in search.found
            if f.number not in numbers
        ][:8],
    }


def _who(facts: Facts) -> dict[str, Any]:
    """Who did what, from the records: the bot's part, the person's attestation, who ran the
    checks (``Verification.ran_by``)."""
    attestation = facts.attestation
    verification = facts.plan.verification
    ran_by = verification.ran_by if verification is not None else None
    first_person = (
        attestation is not None
        and attestation.role == SUBMITTER
        and attestation.login == facts.submitter
    )
    signer = attestation.signer if attestation is not None else None
    # The attester ran the tests only if the verification of the very patch they attested was
    # recorded under their own identity (the submitter's git identity, an approver's sign-off).
    attester = facts.submitter_identity if first_person else signer.identity if signer else None
    ran_by_person = bool(
        attestation is not None
        and verification is not None
        and verification.patch_hash == attestation.patch_hash
        and ran_by
        and ran_by == attester
    )
    return {
        "bot": BOT_NAME,
        "attestation": attestation,
        # The approver's own sign-off is on every commit (a commit the fork already held with
        # the same change keeps the sign-off it was pushed with).
        "approver_signed": signer is not None
        and bool(facts.authors)
        and all(a == signer.identity for a in facts.authors),
        "first_person": first_person,
        "submitter": facts.submitter,
        "patch_hash": attestation.patch_hash.removeprefix("sha256:")[:12] if attestation else "",
        "ran_by_person": ran_by_person,
        "ran_where": _ran_where(ran_by, ran_by_person or ran_by == attester),
        "tests_ran": bool(verification) and any(c.passed is not None for c in verification.checks),
    }


def _ran_where(ran_by: str | None, attesters: bool) -> str:
    if not ran_by:
        return "on a machine that recorded no identity"
    if ran_by.startswith("GitHub Actions"):
        return f"in {inline(ran_by)}"
    if attesters:  # the attester's identity, but another patch than the one attested
        return "for another patch than this one"
    return "under another identity"


def render_blocks(facts: Facts) -> dict[tuple[str, str], str]:
    """The three generic blocks, each wrapped in its markers, keyed by the markers."""
    from bot.publish.writeup import environment

    env = environment()
    values = context(facts)
    out = {}
    for name, markers in (
        ("validation", RESULTS),
        ("contribution", CONTRIBUTION),
        ("checklist", CHECKLIST),
        ("claims", CLAIMS),
    ):
        text = env.get_template(f"sections/{name}.j2").render(values).strip()
        out[markers] = f"{markers[0]}\n{text}\n{markers[1]}"
    return out


def validation_block(plan: Plan, verified: bool | None = None) -> str:
    """The results block alone (it reads no rule of the tree): ``bot verify``'s records."""
    facts = Facts(plan=plan, patch="", rules=read_rules(lambda _: None), search=None)
    return render_blocks(dataclasses.replace(facts, verified=verified))[RESULTS]


def refresh(markdown: str, facts: Facts) -> str:
    """``markdown`` (pr.md, or its body) with every generic block rendered from ``facts`` (a
    body without a results block gets one at its end)."""
    from bot.publish.render import replace_results_section

    for markers, block in render_blocks(facts).items():
        if markers == RESULTS:
            inner = block.removeprefix(f"{RESULTS[0]}\n").removesuffix(f"\n{RESULTS[1]}")
            markdown = replace_results_section(markdown, inner)
        elif markers != CLAIMS or markers[0] in markdown:  # a pr.md whose claims assert results
            markdown = replace_block(markdown, block, markers)
    return markdown


def preview_facts(plan: Plan, patch: str, repo: Path) -> Facts:
    """The facts of a preview (propose, verify): the tree's rules and docs at the plan's base
    commit in ``repo``, the plan's recorded duplicate search, nobody's attestation yet."""
    from bot.publish.demand import inherited_demand
    from bot.publish.tree_facts import docs_naming, rules_at

    names = [n for m in plan.members for n in (m.class_name, *_archs(m.finding))]
    names = names or [plan.class_name or ""]
    return Facts(
        plan=plan,
        patch=patch,
        rules=rules_at(repo, plan.base_commit),
        search=plan.duplicate_search,
        docs=docs_naming(repo, plan.base_commit, names),
        inherited=tuple(inherited_demand(plan)),
    )


def _archs(finding: Finding) -> list[str]:
    return list(finding.architectures)


def preview(markdown: str, plan: Plan, patch: str, repo: Path | None) -> str:
    """pr.md with its generic blocks rendered from the records (what ``bot verify`` leaves for
    review; a pr.md without a results block gets one at its end). Without the tree (``repo``
    None) only the validation and claims blocks, which need no rule of the tree."""
    from bot.publish.render import replace_results_section

    if repo is None:
        facts = Facts(plan=plan, patch=patch, rules=read_rules(lambda _: None), search=None)
        rendered = render_blocks(facts)
        blocks = {markers: rendered[markers] for markers in (RESULTS, CLAIMS)}
    else:
        blocks = render_blocks(preview_facts(plan, patch, repo))
    for markers, block in blocks.items():
        if markers == RESULTS:
            inner = block.removeprefix(f"{RESULTS[0]}\n").removesuffix(f"\n{RESULTS[1]}")
            markdown = replace_results_section(markdown, inner)
        elif markers[0] in markdown:
            markdown = replace_block(markdown, block, markers)
    return markdown


def require_recorded_results(plan: Plan) -> list[Row]:
    """A plan is publishable only with recorded results (AGENTS.md: test commands run and
    results); the body quotes them."""
    rows = validation_rows(plan)
    if not any(r.outcome in ("passed", "failed") for r in rows):
        rule = quote("Test commands run and results.")
        raise BotError(
            f"the plan has no recorded test results: run `bot verify PLAN_DIR` first ({rule})"
        )
    return rows


def replace_block(markdown: str, block: str, markers: tuple[str, str]) -> str:
    start, end = markers
    at = markdown.find(start)
    stop = markdown.find(end, at + len(start)) if at >= 0 else -1
    if at < 0 or stop < 0:
        raise BotError("pr.md lacks the bot's contribution sections; re-run `bot propose`")
    return markdown[:at] + block + markdown[stop + len(end) :]


def strip_block(markdown: str, markers: tuple[str, str]) -> str:
    start, end = markers
    at = markdown.find(start)
    stop = markdown.find(end, at + len(start)) if at >= 0 else -1
    if at < 0 or stop < 0:
        return markdown
    return markdown[:at] + markdown[stop + len(end) :]
