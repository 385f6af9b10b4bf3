"""Upstream's contribution rules, read from the real trees, and the PR a human submits.

The body is checked item by item against the tree's own `AGENTS.md` and PR template (parsed
here with plain regular expressions, independently of bot/publish/contrib_rules.py): every item is
there and backed by a record; nothing is claimed that was not recorded. Publishing runs
against the GitHub stand-in with real PyGithub and a bare fork repository.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import git
import pytest

from bot.cli import main
from bot.errors import BotError
from bot.plan import read_plan_dir
from bot.publish.contrib_rules import rules_of_tree
from bot.publish.contribution import checklist_report, template_boxes
from bot.publish.pr import publish_plan
from bot.tree.fetch import release_tree
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


def _published(plan_dir: Path, standin, tmp_path: Path):
    """Publish (a reviewer is passed, but no approval is recorded); the PR's body, the plan
    and its recorded checks by name."""
    result = publish_plan(plan_dir, reviewer="maintainer1", work_dir=tmp_path / "work")
    assert result.action == "opened", result
    (pull,) = standin.pulls(UPSTREAM)
    plan = read_plan_dir(plan_dir).plan
    return pull["body"], plan, {c.name: c.to_json() for c in plan.verification.checks}


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


def test_seed_body_meets_agents_md_and_template_item_by_item(seed_plan, upstream_standin, tmp_path):
    tree = release_tree("0.23.0")
    body, plan, checks = _published(seed_plan, upstream_standin, tmp_path)

    # The template: its headings and every checklist item, ticked only from records.
    for heading in ("## Purpose", "## Test Plan", "## Test Result"):
        assert heading in body
    items = _template_items(tree)
    assert len(items) == 4
    purpose, test_plan, results, docs = items
    assert _ticked(body, purpose) and f"#{plan.issue_number}" in body
    assert _ticked(body, test_plan) == bool(plan.tests.cpu or plan.tests.gpu)
    ran = any(c["passed"] in (True, False) for c in checks.values())
    assert ran and _ticked(body, results)
    assert not _ticked(body, docs)  # no documentation was changed

    # AGENTS.md: each thing a description for AI-assisted work must include.
    must = _must_include(tree)
    assert must == [
        "Why this is not duplicating an existing PR.",
        "Test commands run and results.",
        "Clear statement that AI assistance was used.",
    ]
    # 1. the duplicate search, with the queries AGENTS.md names, filled in, and what they found
    assert "**Duplicate-work check**" in body
    assert "gh issue view 33329 --repo vllm-project/vllm --comments" in body
    assert 'gh pr list --repo vllm-project/vllm --state all --search "33329 in:body"' in body
    assert '--search "Qwen3NextForCausalLM"' in body
    assert "No other open or merged PR addresses this fix" in body
    searched = [r["query"] for r in upstream_standin.request_log() if "search" in r["path"]]
    assert any("33329" in q for q in searched) and any("Qwen3Next" in q for q in searched)
    # 2. every recorded check, with its outcome; the runtime checks did not run and say so
    assert "**Test commands run and results**" in body
    for name, check in checks.items():
        outcome = {True: "passed", False: "failed", None: "not run"}[check["passed"]]
        assert re.search(rf"\| `[^`]*` \| {outcome} \|", body), name
    assert checks["cpu-tests"]["passed"] is None
    assert "| not run |" in body and "the regression test failed before" not in body
    # 3. the AI-assistance statement, the submitter, and no review that was not recorded
    assert "AI assistance was used." in body
    assert f"Submitted by @{STANDIN_BOT_LOGIN}" in body
    assert "Reviewed" not in body and "maintainer1" not in body
    assert "reviewed every line" not in body

    fork = git.Repo(upstream_standin.state.repos[FORK].git_dir)
    commit = fork.commit(f"refs/heads/{BRANCH}")
    assert commit.author.email == SUBMITTER_EMAIL
    assert f"Signed-off-by: {SUBMITTER_NAME} <{SUBMITTER_EMAIL}>" in commit.message
    assert "Co-authored-by: vllm-eagle3-bot" in commit.message


def test_a_plan_on_0_34_0_carries_the_pr_checklist_and_its_report(github_standin, tmp_path):
    from bot import pipeline
    from bot.github.client import GitHubClient
    from bot.github.identity import fingerprint_marker
    from bot.publish.contribution import search_duplicates
    from bot.publish.pr import compose_body
    from bot.verify import VerifyOptions, verify_plan

    tree = release_tree("0.34.0")
    checkout = tmp_path / "checkout"
    git.Repo.clone_from(str(tree), str(checkout), shared=True).close()
    out = tmp_path / "plan"
    pipeline.propose(checkout, out, class_name="Glm4ForCausalLM", upstream=UPSTREAM)
    verify_plan(out, VerifyOptions(gpu="skip", runtime=False))
    planned = read_plan_dir(out)
    plan = planned.plan
    rules = rules_of_tree(tree)
    github_standin.add_repo(UPSTREAM)
    other = github_standin.add_pull(
        UPSTREAM,
        "someone:glm",
        user="someone",
        state="closed",
        title="Try Glm4ForCausalLM with EAGLE",
    )
    unrelated = github_standin.add_pull(
        UPSTREAM, "someone:rope", user="someone", title="Glm4ForCausalLM: fix rope scaling"
    )
    ours = [fingerprint_marker(plan.fingerprint)]
    search = search_duplicates(GitHubClient(), plan, ["Glm4ForCausalLM"], ours, rules)
    # A closed, unmerged PR is listed, not a duplicate; nor is an open one about something else.
    assert not search.duplicates
    eagle = github_standin.add_pull(
        UPSTREAM, "someone:eagle", user="someone", title="Support EAGLE-3 on Glm4ForCausalLM"
    )
    again = search_duplicates(GitHubClient(), plan, ["Glm4ForCausalLM"], ours, rules)
    assert [f.number for f in again.duplicates] == [eagle]
    body = compose_body(
        planned,
        planned.pr_title,
        verified=False,
        rules=rules,
        search=search,
        submitter=None,
        review=None,
        credit="Co-authored-by: vllm-eagle3-bot",
    )
    for heading in ("## Overview", "## Claims", "## Validation", "## Details"):
        assert heading in body
    assert "<summary> Pull Request Checklist </summary>" in body
    items = _template_items(tree)
    skill_item, ai_item, design, testing, quality, contents = items
    assert _ticked(body, skill_item)  # the report below is the skill's, section by section
    assert "<summary>pr-checklist report" in body
    assert "1 line(s) added outside tests" in body or "line(s) added outside tests" in body
    assert "no core component touched" in body and "complexity Low (< 50 lines)" in body
    assert _ticked(body, ai_item) and "AI assistance was used." in body
    assert _ticked(body, design)
    assert not _ticked(body, testing)  # the regression test was not run (runtime off)
    assert _ticked(body, quality)  # ruff and py_compile passed
    assert _ticked(body, contents)
    assert f"#{other} (closed) Try Glm4ForCausalLM with EAGLE" in body
    assert f"#{unrelated} (open) Glm4ForCausalLM: fix rope scaling" in body
    must = _must_include(tree)
    assert "Model evaluation results when the change affects output, accuracy, or serving." in must
    assert "**Model evaluation:** none run: the change declares an interface" in body
    assert "Submitted by" not in body and "Not submitted yet" in body


def test_a_duplicate_fails_closed_before_anything_is_written(seed_plan, upstream_standin, tmp_path):
    upstream_standin.add_pull(
        UPSTREAM,
        "someone:fix",
        user="someone",
        title="[Model] Qwen3-Next: support EAGLE3",
        body="Fixes #33329",
    )
    writes = len(upstream_standin.writes())
    with pytest.raises(BotError, match=r"already addresses this fix; AGENTS\.md: \"If an open PR"):
        publish_plan(seed_plan, reviewer=None, work_dir=tmp_path / "work")
    assert len(upstream_standin.writes()) == writes
    assert len(upstream_standin.pulls(UPSTREAM)) == 1


def test_without_a_human_submitter_nothing_is_published(
    seed_plan, upstream_standin, tmp_path, monkeypatch, capsys
):
    monkeypatch.delenv("BOT_SUBMITTER_NAME")
    assert main(["publish", str(seed_plan)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "set BOT_SUBMITTER_NAME and BOT_SUBMITTER_EMAIL" in err
    assert upstream_standin.writes() == [] and upstream_standin.pulls(UPSTREAM) == []


def test_propose_goes_from_issue_to_a_draft_pr_in_one_command(upstream_standin, tmp_path):
    # A process of its own: it starts with the submitter's token in its environment, so its
    # verification runs only the checks that run nothing from the tree.
    out = tmp_path / "plan"
    argv = ["propose", "--issue", "33329", "--issue-file", str(EXAMPLE_ISSUE)]
    argv += ["--repo", str(release_tree("0.23.0")), "--out", str(out), "--yes"]
    done = run_bot(*argv)
    assert done.returncode == 0, done.stderr
    printed = done.stdout
    assert "--- patch.diff ---" in printed and "+    SupportsEagle3," in printed
    assert "publish: opened: opened PR #" in printed
    (pull,) = upstream_standin.pulls(UPSTREAM)
    assert pull["draft"] is True and pull["user"]["login"] == STANDIN_BOT_LOGIN
    assert "| `git apply patch.diff` | passed |" in pull["body"]


def test_propose_without_confirmation_publishes_nothing(upstream_standin, tmp_path):
    out = tmp_path / "plan"
    argv = ["propose", "--issue", "33329", "--issue-file", str(EXAMPLE_ISSUE)]
    argv += ["--repo", str(release_tree("0.23.0")), "--out", str(out)]
    done = run_bot(*argv)  # stdin is not a terminal and there is no --yes
    assert done.returncode == 0, done.stderr
    assert "not published: confirm with --yes" in done.stdout
    assert upstream_standin.pulls(UPSTREAM) == []
    assert read_plan_dir(out).plan.verification.local_passed is True


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("where", ["refused", "unresolvable"])
def test_offline_propose_is_one_line_naming_issue_file(where, monkeypatch, tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}" if where == "refused" else "http://bot.invalid"
    monkeypatch.setenv("GITHUB_API_URL", url)
    # A retry would be logged ("Retrying ...", a second line) and its second backoff (20 s)
    # would not fit this budget: the message would then be the budget's, not the one below.
    monkeypatch.setenv("BOT_GITHUB_BACKOFF", "10")
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "5")
    done = run_bot("propose", "--issue", "33329", "--repo", str(tmp_path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "GitHub is unreachable" in lines[0] and "--issue-file" in lines[0]


# Its first use builds the interface-only group of 0.34.0 (propose and verify), then publishes it.
@pytest.mark.timeout(1200)
def test_a_group_body_on_0_34_0_meets_agents_md_and_the_template(request, tmp_path):
    plan_dir = request.getfixturevalue("group_plan")
    standin = request.getfixturevalue("stand_in")
    tree = release_tree("0.34.0")
    body, plan, checks = _published(plan_dir, standin, tmp_path)

    for heading in ("## Overview", "## Claims", "## Validation", "## Details"):
        assert heading in body
    assert "<summary> Pull Request Checklist </summary>" in body
    skill_item, ai_item, design, testing, quality, contents = _template_items(tree)
    assert _ticked(body, skill_item) and "<summary>pr-checklist report" in body
    assert _ticked(body, ai_item)
    # Design Fit only at the skill's low complexity tier (the whole 22-class group is Medium).
    report = checklist_report(read_plan_dir(plan_dir).patch, rules_of_tree(tree))
    assert report.low_complexity and not report.core_touched
    assert _ticked(body, design) and "no core component touched" in body
    assert not _ticked(body, testing)  # no regression test run was recorded (runtime off)
    assert _ticked(body, quality) == (checks["ruff"]["passed"] and checks["py_compile"]["passed"])
    assert _ticked(body, contents)

    must = _must_include(tree)
    assert len(must) == 4
    # Why not a duplicate: every member's class and every member's issue was searched for.
    for member in plan.members:
        assert f'--search "{member.class_name}"' in body
    assert '--search "41 in:body"' in body and "gh issue view 41" in body
    # Test commands run and results, each from the records.
    for name, check in checks.items():
        outcome = {True: "passed", False: "failed", None: "not run"}[check["passed"]]
        assert re.search(rf"\| `[^`]*` \| {outcome} \|", body), name
    assert "**Model evaluation:** none run: the change declares an interface" in body
    assert "AI assistance was used." in body
    assert f"Submitted by @{STANDIN_BOT_LOGIN}" in body
    assert "Reviewed" not in body and "maintainer1" not in body

    fork = git.Repo(standin.state.repos[FORK].git_dir)
    tip = fork.commit(f"refs/heads/{plan.branch}")
    commits = list(fork.iter_commits(f"{plan.base_commit}..{tip.hexsha}"))
    assert len(commits) == len(plan.members)
    for commit in commits:
        assert (commit.author.name, commit.author.email) == (SUBMITTER_NAME, SUBMITTER_EMAIL)
        assert commit.message.rstrip().endswith(
            f"Co-authored-by: vllm-eagle3-bot\nSigned-off-by: {SUBMITTER_NAME} <{SUBMITTER_EMAIL}>"
        )


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


def test_in_actions_the_publish_environments_approver_is_the_recorded_review(
    seed_plan, upstream_standin, tmp_path, monkeypatch
):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_RUN_ID", "77")
    monkeypatch.setenv("BOT_REPO", "example/bot")
    upstream_standin.add_repo("example/bot")
    upstream_standin.approve_environment(77, "someone-else", environment="gpu")
    upstream_standin.approve_environment(77, "maintainer3", environment="publish")
    assert publish_plan(seed_plan, reviewer=None, work_dir=tmp_path / "work").action == "opened"
    (pull,) = upstream_standin.pulls(UPSTREAM)
    assert (
        "Reviewed by @maintainer3 before opening: approved the `publish` environment of run 77"
        in pull["body"]
    )
    assert "someone-else" not in pull["body"]


@pytest.mark.parametrize(("added", "tier", "ticked"), [(49, "Low", True), (50, "Medium", False)])
def test_design_fit_is_ticked_only_at_the_skills_low_tier(seed_plan, added, tier, ticked):
    """The 0.34.0 skill: "Low complexity: < 50 lines" outside tests; a 22-class group adds 98."""
    rules = rules_of_tree(release_tree("0.34.0"))
    body = "".join(f"+x{n} = {n}\n" for n in range(added))
    path = "vllm/model_executor/models/m.py"
    patch = f"--- a/{path}\n+++ b/{path}\n@@ -1,0 +1,{added} @@\n{body}"
    report = checklist_report(patch, rules)
    assert report.lines_added_outside_tests == added and report.tier.startswith(tier)
    [design] = [
        b
        for b in template_boxes(rules, read_plan_dir(seed_plan).plan, report, True)
        if b.text.lower().startswith("**design fit")
    ]
    assert design.ticked is ticked
