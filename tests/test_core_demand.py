"""A core plan inherits the demand of the plans that build on it (issue 33).

A core fix (here core-drafter-loader's, on the recipe's own synthetic case: the loaders refuse
DemoForCausalLM) has no issue of its own, and DemoForCausalLM's plan opens only after the core
PR merged: without inheritance a Demo with demand would wait forever. Plans are the bot's own
(`bot propose`, recorded in the journal; the core verified without a token), published through
the GitHub stand-in; `bot scan --groups` and the dashboard issue are read as a person reads
them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot import pipeline
from bot.dashboard.sync import render_dashboard
from bot.github.client import GitHubClient
from bot.journal.store import Journal
from bot.plan import read_plan_dir
from bot.publish.demand import inherited_demand
from bot.publish.dependencies import waiting_for
from bot.publish.pr import publish_plan
from bot.recipes.core_drafter_loader.cases import loader_tree
from bot.scan.findings import scan
from bot.triage_outcome import TriagedIssue
from bot.verify import VerifyOptions
from tests.attest import READS
from tests.conftest import FORK, UPSTREAM
from tests.github_standin import GitHubStandIn
from tests.test_recipe_cases import build

DEMO = "DemoForCausalLM"
LOADER = "core-drafter-loader"


@pytest.fixture
def plans(tmp_path: Path) -> dict[str, Path]:
    """The synthetic tree; the core plan (verified) and Demo's plan, both in the journal."""
    tree = build(loader_tree(), tmp_path / "tree")
    findings = scan(tree).findings
    (core,) = [f for f in findings if f.recipe == LOADER]
    assert core.evidence.dependents() == (DEMO,)
    out = {"tree": tree}
    for name, cls in (("core", core.class_name), ("demo", DEMO)):
        out[name] = tmp_path / name
        plan = pipeline.propose(
            tree, out[name], class_name=cls, upstream=UPSTREAM, record=True, dedupe=False
        )
        assert plan.status == "ready", plan.reason
    # The core verified (the journal's copy too); Demo's plan would need the smoke check,
    # which needs a release environment: it stays proposed, waiting in the journal.
    (verified,) = pipeline.verify([out["core"]], VerifyOptions(gpu="skip", runtime=False))
    assert verified.local_passed, verified.message
    return out


def _triaged(number: int, arch: str = DEMO) -> None:
    url = f"https://github.com/{UPSTREAM}/issues/{number}"
    Journal().record_triaged_issue(TriagedIssue(number, "EAGLE-3 fails", url, "open", arch))


def test_a_core_plan_has_the_demand_of_the_plans_that_build_on_it(plans: dict[str, Path]) -> None:
    core = read_plan_dir(plans["core"]).plan
    assert inherited_demand(core) == []  # nobody asked for Demo yet
    _triaged(7, "SomeOtherForCausalLM")
    assert inherited_demand(core) == []  # an issue about another class is no demand for it
    _triaged(8)
    assert inherited_demand(core) == [f"{DEMO} builds on it: issue #8"]
    journal = Journal()
    (demo,) = [p for p in journal.proposals() if read_plan_dir(plans["demo"]).plan.fingerprint
               == p.fingerprint]  # fmt: skip
    journal.record_request(demo.id, "alice", "ticked on the dashboard issue")
    assert inherited_demand(core) == [
        f"{DEMO} builds on it: requested by @alice on the dashboard issue",
        f"{DEMO} builds on it: issue #8",
    ]
    # Demo's own plan inherits nothing: nothing builds on it.
    assert inherited_demand(read_plan_dir(plans["demo"]).plan) == []


def test_the_dashboard_issue_lists_the_core_as_wanted_and_says_through_whom(
    plans: dict[str, Path],
) -> None:
    before = render_dashboard(Journal())
    requestable = before.split("## Requestable")[1]
    assert "Wanted through" not in before and "Drafter loaders" in requestable
    _triaged(8)
    after = render_dashboard(Journal())
    pending = after.split("## Pending approval")[1].split("## Requestable")[0]
    # The line to tick stays the one the bot renders for the proposal; why follows it.
    assert "Drafter loaders" in pending
    assert (
        f"\n  Wanted through the plans that build on it: {DEMO} builds on it: issue #8" in pending
    )


def test_bot_scan_groups_shows_the_core_wanted_through_its_dependent(
    plans: dict[str, Path],
) -> None:
    def groups() -> list[str]:
        done = subprocess.run(
            [sys.executable, "-m", "bot", "scan", str(plans["tree"]), "--groups"],
            capture_output=True, text=True, check=True, env=dict(os.environ),
        )  # fmt: skip
        return done.stdout.splitlines()

    before = groups()
    assert any(x.startswith(f"{LOADER} (1)") and x.endswith("-- no demand yet") for x in before)
    _triaged(8)
    after = groups()
    (core,) = [x for x in after if x.startswith(f"{LOADER} (1)")]
    assert core.endswith(f"-- demand: {DEMO} builds on it: open issue #8"), core
    assert after[-1].startswith("2 groups: 2 with demand"), after[-1]


def test_publish_opens_the_core_pr_only_with_inherited_demand_and_names_it(
    plans: dict[str, Path], github_standin: GitHubStandIn, tmp_path: Path, monkeypatch
) -> None:
    upstream = github_standin.add_repo(UPSTREAM, seed_from=plans["tree"])
    fork = github_standin.add_repo(FORK, seed_from=plans["tree"], fork_of=UPSTREAM)
    monkeypatch.setenv("BOT_FORK_URL", str(fork))
    monkeypatch.setenv("BOT_UPSTREAM_URL", str(upstream))

    def publish(plan: Path):
        return publish_plan(plan, reviewer=None, work_dir=tmp_path / "work", attest=READS)

    waiting = publish(plans["core"])
    assert waiting.action == "waiting-for-demand", waiting
    assert "nor for a plan that builds on it" in waiting.message
    _triaged(8)
    opened = publish(plans["core"])
    assert opened.action == "opened", opened
    (pull,) = github_standin.pulls(UPSTREAM)
    assert "**Why this PR now.**" in pull["body"]
    assert f"{DEMO} builds on it: issue #8." in pull["body"]
    # Demo itself still waits for the core's PR to merge.
    waiting_on = waiting_for(GitHubClient(), read_plan_dir(plans["demo"]).plan)
    assert waiting_on is not None and f"PR #{pull['number']} is open" in waiting_on


def test_the_review_dashboard_shows_the_core_findings_demand_through_its_dependent(
    plans: dict[str, Path],
) -> None:
    from bot.dashboard.pages import finding_demand

    journal = Journal()
    findings = [f.to_json() for f in scan(plans["tree"]).findings]
    journal.record_findings(findings, plans["tree"], "base", "synthetic")
    rows = {r.class_name: r for r in journal.findings()}
    core = next(r for r in rows.values() if r.recipe == LOADER)
    assert core.id not in finding_demand(journal, list(rows.values()))
    _triaged(8)
    shown = finding_demand(journal, list(rows.values()))
    assert shown[core.id] == f"{DEMO} builds on it: open issue #8"
    assert shown[rows[DEMO].id] == "open issue #8"
