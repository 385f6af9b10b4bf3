"""The parts of a PR body that upstream's rules require, composed from records at publish time.

``AGENTS.md`` asks a PR description for AI-assisted work to say why it is not a duplicate, which
test commands were run with their results and that AI assistance was used; the PR template adds
its checklist and (0.32+) the ``pr-checklist`` skill's report. Each part here is built from a
record: the duplicate search the bot ran through the API, ``bot verify``'s checks in plan.json,
the patch itself, the recorded review. Nothing is claimed without one: a box is ticked only when
its record says so, and a review is named only when one was recorded.

The bot's parts sit between ``<!-- bot:contribution:... -->`` and ``<!-- bot:checklist:... -->``
markers in pr.md; ``bot propose`` writes them as a preview, ``bot publish`` replaces them.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.errors import BotError
from bot.markdown import inline
from bot.publish.contrib_rules import ContributionRules, quote

if TYPE_CHECKING:
    from bot.github.client import GitHubClient
    from bot.plan import Plan

CONTRIBUTION = ("<!-- bot:contribution:start -->", "<!-- bot:contribution:end -->")
CHECKLIST = ("<!-- bot:checklist:start -->", "<!-- bot:checklist:end -->")

# --- the review and the submitter -------------------------------------------------------------


@dataclass(frozen=True)
class Review:
    """A review that was recorded: who, and the record that shows it."""

    login: str
    record: str  # e.g. "approved review hash 1a2b3c on the dashboard"


@dataclass(frozen=True)
class Submitter:
    """The human who opens the PR: the token's login and their git identity."""

    login: str
    name: str
    email: str


# --- the duplicate search ---------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    number: int
    kind: str  # "pr" | "issue"
    state: str  # "open" | "closed" | "merged"
    title: str
    ours: bool  # carries this plan's fingerprint marker
    about_eagle: bool  # title or body speaks of EAGLE(-3) / SupportsEagle3 / DFlash


@dataclass(frozen=True)
class QueryRun:
    command: str  # the AGENTS.md command, filled in
    asked: str  # what the bot asked the API
    found: tuple[Found, ...]


@dataclass(frozen=True)
class DuplicateSearch:
    runs: tuple[QueryRun, ...]
    issue_comments: int | None  # the issue's comments read (None: no issue)
    duplicates: tuple[Found, ...] = field(default=())


def search_duplicates(
    client: GitHubClient,
    plan: Plan,
    classes: list[str],
    markers: list[str],
    rules: ContributionRules,
) -> DuplicateSearch:
    """AGENTS.md's duplicate-work checks, through the API, over open and closed PRs: PRs that
    name the issue in their body, PRs that name one of the classes, and the issue's comments.
    An open or merged PR that is not this plan's own and names the issue or a class is a
    duplicate."""
    upstream = plan.upstream
    commands = list(rules.duplicate_checks)
    runs: list[QueryRun] = []
    comments = None
    for issue in plan.issues:
        data = client.get_issue(issue, repo=upstream)
        comments = (comments or 0) + len(data.get("comments_list") or [])
        runs.append(
            QueryRun(
                _fill(commands, "gh issue view", str(issue), upstream),
                f"GET /repos/{upstream}/issues/{issue} and its comments",
                (),
            )
        )
        asked = f"repo:{upstream} is:pr {issue} in:body"
        runs.append(
            QueryRun(
                _fill(commands, '"<issue_number> in:body"', str(issue), upstream),
                asked,
                _found(client, asked, markers),
            )
        )
    by_issue = [f for run in runs for f in run.found]
    for name in classes:
        asked = f"repo:{upstream} is:pr {name}"
        runs.append(
            QueryRun(
                _fill(commands, '"<short area keywords>"', name, upstream),
                asked,
                _found(client, asked, markers),
            )
        )
    # A PR naming the issue addresses it; a PR naming the class does only when it is about
    # EAGLE too (a popular class appears in many unrelated PRs).
    by_class = [f for run in runs for f in run.found if f not in by_issue and f.about_eagle]
    duplicates = {
        f.number: f
        for f in [*by_issue, *by_class]
        if not f.ours and f.kind == "pr" and f.state in ("open", "merged")
    }
    return DuplicateSearch(tuple(runs), comments, tuple(duplicates.values()))


def refuse_duplicates(search: DuplicateSearch, rules: ContributionRules) -> None:
    """Fail closed on a duplicate, quoting the tree's rule."""
    if not search.duplicates:
        return
    first = search.duplicates[0]
    rule = quote("If an open PR already addresses the same fix, do not open another.")
    raise BotError(
        f"PR #{first.number} ({first.state}) already addresses this fix; {rule} "
        "Nothing was published"
        if rules.duplicate_checks
        else f"PR #{first.number} ({first.state}) already addresses this fix; nothing published"
    )


def _fill(commands: list[str], key: str, value: str, upstream: str) -> str:
    """The tree's command containing ``key`` with its placeholder filled; the bot's own words
    when the tree names none."""
    for command in commands:
        if key in command or command.startswith(key):
            filled = re.sub(r"<issue_number>|<short area keywords>", value, command)
            # The bot searches closed PRs too (a merged one is a duplicate as well).
            filled = filled.replace("--state open", "--state all")
            return filled.replace("vllm-project/vllm", upstream)
    return f"{key} {value}"


def _found(client: GitHubClient, query: str, markers: list[str]) -> tuple[Found, ...]:
    found = []
    for item in client.search_issues(query):
        pull = item.get("pull_request") or {}
        merged = bool(pull.get("merged_at"))
        state = "merged" if merged else str(item.get("state") or "")
        found.append(
            Found(
                number=int(item["number"]),
                kind="pr" if pull or "pull_request" in item else "issue",
                state=state,
                title=str(item.get("title") or ""),
                ours=any(m in str(item.get("body") or "") for m in markers),
                about_eagle=bool(_EAGLE.search(f"{item.get('title')}\n{item.get('body')}")),
            )
        )
    return tuple(found)


_EAGLE = re.compile(r"(?i)eagle|dflash|dspark")


# --- the tests that ran -----------------------------------------------------------------------

# What each of `bot verify`'s checks runs, in the words a reviewer can repeat.
_CHECK_COMMANDS = {
    "apply": "git apply patch.diff",
    "confined": "bot verify: the patch is exactly what its recipe makes",
    "rescan": "bot scan (before and after the patch)",
    "py_compile": "python -m py_compile <changed files>",
    "ruff": "ruff check <changed files>",
    "smoke": "bot smoke --tree . --base <base> --target <module>:<class>",
    "evidence": "the recipe's required checks passed",
    "engine": "bot engine PLAN_DIR (EAGLE-3 and DFlash in vLLM's engine on CPU)",
}


@dataclass(frozen=True)
class TestRecord:
    command: str
    outcome: str  # passed | failed | not run
    figures: str  # the record's detail: what it showed


def recorded_tests(plan: Plan) -> list[TestRecord]:
    """``bot verify``'s records as commands and results; empty when nothing was recorded."""
    verification = plan.verification
    if verification is None:
        return []
    records = []
    for check in verification.checks:
        name = check.name
        if name == "cpu-tests":
            nodes = " ".join(f"'{n}'" for n in plan.tests.cpu)
            command = f"pytest -v {nodes} (without the fix, then with it)"
        else:
            command = _CHECK_COMMANDS.get(name, name)
        outcome = {True: "passed", False: "failed"}.get(check.passed, "not run")
        records.append(TestRecord(command, outcome, check.detail))
    gpu = verification.gpu
    if gpu is not None and gpu.mode in ("local", "dispatch"):
        nodes = " ".join(f"'{n}'" for n in plan.tests.gpu)
        conclusion = gpu.conclusion or "unknown"
        outcome = "passed" if conclusion == "success" else conclusion.replace("_", " ")
        records.append(TestRecord(f"pytest -v {nodes} (GPU, {gpu.mode})", outcome, ""))
    return records


def require_recorded_results(plan: Plan) -> list[TestRecord]:
    """A plan is publishable only with recorded results (AGENTS.md: test commands run and
    results); the body quotes them."""
    records = recorded_tests(plan)
    if not any(r.outcome in ("passed", "failed") for r in records):
        rule = quote("Test commands run and results.")
        raise BotError(
            f"the plan has no recorded test results: run `bot verify PLAN_DIR` first ({rule})"
        )
    return records


def _check_passed(plan: Plan, name: str) -> bool:
    return plan.verification is not None and plan.verification.check_passed(name)


# --- the pr-checklist report ------------------------------------------------------------------


@dataclass(frozen=True)
class ChecklistReport:
    lines_added_outside_tests: int
    lines_added_in_tests: int
    files: tuple[str, ...]
    core_touched: tuple[str, ...]
    tier: str  # "Low (< 50 lines)" ...
    low_complexity: bool


def checklist_report(patch: str, rules: ContributionRules) -> ChecklistReport:
    """The SKILL's measurable items from the patch: lines added outside tests (its complexity
    rule of thumb excludes tests), the core components touched (its own list)."""
    files: list[str] = []
    outside = inside = 0
    current = ""
    for line in patch.splitlines():
        if line.startswith("+++ "):
            current = line[4:].removeprefix("b/")
            files.append(current)
        elif line.startswith("+") and not line.startswith("+++"):
            if current.startswith("tests/"):
                inside += 1
            else:
                outside += 1
    core = tuple(
        f for f in files if any(fnmatch.fnmatch(f, glob) for glob in rules.core_components)
    )
    tier, low = _tier(outside, rules)
    return ChecklistReport(outside, inside, tuple(files), core, tier, low)


def _tier(lines: int, rules: ContributionRules) -> tuple[str, bool]:
    for tier in rules.complexity_tiers:
        numbers = [int(n) for n in re.findall(r"\d+", tier.bound)]
        if tier.bound.startswith("<") and numbers and lines < numbers[0]:
            return f"{tier.name} ({tier.bound})", tier.name == "Low"
        if "-" in tier.bound and len(numbers) == 2 and numbers[0] <= lines <= numbers[1]:
            return f"{tier.name} ({tier.bound})", False
        if tier.bound.startswith(">") and numbers and lines > numbers[0]:
            return f"{tier.name} ({tier.bound})", False
    return "not stated by this tree", False


# --- the template's checklist -----------------------------------------------------------------


@dataclass(frozen=True)
class Box:
    text: str  # the template's item, verbatim
    ticked: bool
    why: str  # the record behind the tick (or why not)


def template_boxes(
    rules: ContributionRules,
    plan: Plan,
    report: ChecklistReport | None,
    published: bool,
) -> list[Box]:
    """The template's checklist, each box ticked only when a record makes it true."""
    tests = recorded_tests(plan)
    ran = any(t.outcome in ("passed", "failed") for t in tests)
    regression = _check_passed(plan, "cpu-tests")
    clean = _check_passed(plan, "ruff") and _check_passed(plan, "py_compile")
    boxes = []
    for item in rules.template_checklist:
        low = item.lower()
        if "/pr-checklist" in low:
            ok, why = report is not None, "the report below"
        elif "ai assistance was used" in low:
            ok, why = True, "the bot wrote this change"
        elif low.startswith("**design fit"):
            ok = report is not None and report.low_complexity and not report.core_touched
            why = "no core component touched, low complexity" if ok else "see the report"
        elif low.startswith("**testing and validation"):
            ok, why = regression, "the regression test failed before and passed after"
        elif low.startswith("**code quality"):
            ok, why = clean, "ruff and py_compile passed on the changed files"
        elif low.startswith("**pull request contents"):
            ok, why = published and ran, "summary, links, recorded evidence, root cause"
        elif low.startswith("the purpose of the pr"):
            ok, why = True, "Purpose"
        elif low.startswith("the test plan"):
            ok, why = bool(plan.tests.cpu or plan.tests.gpu), "Test Plan"
        elif low.startswith("the test results"):
            ok, why = ran, "Test Result, from `bot verify`'s records"
        else:
            ok, why = False, "not checked by the bot"
        if not ok and why not in ("not checked by the bot", "see the report"):
            why = "no record yet"
        boxes.append(Box(item, ok, why))
    return boxes


# --- rendering --------------------------------------------------------------------------------


def contribution_context(
    *,
    plan: Plan,
    patch: str,
    rules: ContributionRules,
    search: DuplicateSearch | None,
    submitter: Submitter | None,
    review: Review | None,
    trailer: str | None,
) -> dict[str, Any]:
    """Everything the contribution and checklist sections show, as plain escaped values."""
    from bot.recipes import recipe_named

    report = checklist_report(patch, rules) if rules.pr_checklist_sections else None
    published = search is not None
    named = list(dict.fromkeys(m.recipe for m in plan.members)) or [plan.recipe or ""]
    recipes = [r for r in map(recipe_named, named) if r is not None]
    smoke_passed = _check_passed(plan, "smoke")
    return {
        "published": published,
        "recipe": ", ".join(named),
        "replication": " ".join(dict.fromkeys(r.replication for r in recipes if r.replication)),
        "model_evaluation": " ".join(
            dict.fromkeys(r.model_evaluation(smoke_passed) for r in recipes)
        ),
        "search": _search_view(search),
        "tests": [
            {"command": t.command, "outcome": t.outcome, "figures": inline(t.figures, 300)}
            for t in recorded_tests(plan)
        ],
        "model_eval_rule": any(
            "model evaluation" in item.lower() for item in rules.description_must_include
        ),
        "submitter": submitter,
        "review": review,
        "trailer": trailer,
        "report": report,
        "rules": rules,
        "boxes": template_boxes(rules, plan, report, published),
    }


def _search_view(search: DuplicateSearch | None) -> dict[str, Any] | None:
    if search is None:
        return None
    return {
        "issue_comments": search.issue_comments,
        "runs": [
            {
                "command": run.command,
                "asked": run.asked,
                "found": [
                    {
                        "number": f.number,
                        "state": f.state,
                        "title": inline(f.title, 120),
                        "ours": f.ours,
                    }
                    for f in run.found
                    if not f.ours  # this PR itself: listing it would change the body on reruns
                ],
            }
            for run in search.runs
        ],
    }


def render_blocks(context: dict[str, Any]) -> dict[str, str]:
    """The contribution and checklist blocks, each wrapped in its markers."""
    from bot.publish.writeup import environment

    env = environment()
    out = {}
    for name, (start, end) in (("contribution", CONTRIBUTION), ("checklist", CHECKLIST)):
        text = env.get_template(f"sections/{name}.j2").render(context).strip()
        out[name] = f"{start}\n{text}\n{end}"
    return out


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
