"""A group plan on the real vLLM 0.34.0 tree (the three interface gaps and the interface-only
wrappers: one fix shape), published against the GitHub stand-in with real PyGithub and a real
bare git fork: one PR, one commit per class, one parametrized regression test; a rerun opens
nothing; a class already in a merged or closed PR is left out; the dashboard approves a group.

The plan is made the way a user makes it: ``bot propose --group interface-only --repo TREE
--dry-run`` (here through the same pipeline functions), then ``bot verify`` (local checks).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import git
import pytest

from bot import pipeline
from bot.config import github_settings
from bot.content_hash import review_hash
from bot.dashboard.sync import sync
from bot.errors import BotError
from bot.github.client import GitHubClient
from bot.github.identity import member_marker, plan_fingerprint_in
from bot.journal.store import PR_OPEN, Journal
from bot.pipeline import refresh_duplicate_search
from bot.plan import READY, Plan, read_plan_dir, update_plan
from bot.publish.checks import check_plan_fields
from bot.publish.pr import publish_plan
from bot.tree.fetch import release_tree
from bot.triage_outcome import TriagedIssue
from tests.attest import READS
from tests.claimed import claimed
from tests.conftest import FORK, UPSTREAM
from tests.github_standin import STANDIN_BOT_LOGIN, STANDIN_FORK_OWNER, GitHubStandIn

pytestmark = pytest.mark.vllm_tree

GROUP = "interface-only"
# The first five of the 22-class group (the three interface gaps first): the suite's copy of
# the group, cut by the user's own `--max-group-size` so propose and verify stay short; the
# whole group's figures are in the README's "Grouped PRs".
GROUP_SIZE = 5
INTERFACE_GAPS = {"DomynEdgeForCausalLM", "Glm4ForCausalLM", "KimiLinearForCausalLM"}
GLM4_ISSUE = 41
LABEL = "bot:eagle3"


def _propose(checkout: Path, out: Path, *, dedupe: bool) -> tuple[Plan, list[str]]:
    ranked, groups = pipeline.find_groups(checkout, max_group_size=GROUP_SIZE)
    return pipeline.propose_group(
        checkout, out, GROUP, ranked=ranked, groups=groups, upstream=UPSTREAM, dedupe=dedupe
    )


def _verify(plan_dir: Path) -> None:
    from bot.verify import VerifyOptions, verify_plan

    options = VerifyOptions(gpu="skip", runtime=False)
    verification = verify_plan(plan_dir, options)
    assert verification.local_passed, verification.message


@pytest.fixture(scope="session")
def _group_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The interface-only group (its first GROUP_SIZE classes) of a clone of 0.34.0 (an open
    issue asks for Glm4), verified."""
    root = tmp_path_factory.mktemp("group-plan")
    checkout = root / "checkout"
    git.Repo.clone_from(str(release_tree("0.34.0")), str(checkout), shared=True).close()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BOT_HOME", str(root / "home"))
        Journal().record_triaged_issue(
            TriagedIssue(
                GLM4_ISSUE,
                "GLM-4 + EAGLE-3",
                "https://example.invalid/41",
                "open",
                "Glm4ForCausalLM",
            )
        )
        plan, left_out = _propose(checkout, root / "plan", dedupe=False)
        assert plan.status == READY and left_out == []
        _verify(root / "plan")
    return root / "plan", checkout


@pytest.fixture
def group_plan(_group_template: tuple[Path, Path], tmp_path: Path) -> Path:
    return Path(shutil.copytree(_group_template[0], tmp_path / "group-plan"))


@pytest.fixture
def stand_in(github_standin: GitHubStandIn, tmp_path: Path, monkeypatch) -> GitHubStandIn:
    tree = release_tree("0.34.0")
    github_standin.add_repo(UPSTREAM, seed_from=tree)
    github_standin.add_repo(FORK, seed_from=tree)
    github_standin.add_issue(UPSTREAM, GLM4_ISSUE, "GLM-4 + EAGLE-3", "Glm4ForCausalLM fails")
    remotes = tmp_path / "standin" / "remotes"
    monkeypatch.setenv("BOT_FORK_URL", f"{remotes / FORK}.git")
    monkeypatch.setenv("BOT_UPSTREAM_URL", f"{remotes / UPSTREAM}.git")
    return github_standin


def test_the_group_is_the_interface_gaps_and_the_interface_only_wrappers(group_plan: Path):
    planned = read_plan_dir(group_plan)
    plan = planned.plan
    names = [m.class_name for m in plan.members]
    assert plan.group == GROUP and len(names) == GROUP_SIZE and set(names) >= INTERFACE_GAPS
    assert {m.recipe for m in plan.members} == {"eagle3-interface", "eagle3-wrapper"}
    assert all(
        getattr(m.finding.evidence, "shape", "interface") == "interface" for m in plan.members
    )
    # One parametrized regression test for all of them, not one test per class.
    assert planned.patch.count("def test_registry_supports_eagle3(") == 1
    assert planned.patch.count("diff --git a/tests/models/test_registry.py") == 1
    # Each member keeps its own fingerprint; the body names every one of them.
    for member in plan.members:
        assert member.fingerprint.startswith(f"{member.recipe}:{member.class_name}")
        assert member_marker(member.fingerprint) in planned.pr_body
        assert f"`{member.class_name}`" in planned.pr_body
    glm4 = next(m for m in plan.members if m.class_name == "Glm4ForCausalLM")
    assert glm4.issues == (GLM4_ISSUE,) and f"Fixes #{GLM4_ISSUE}" in planned.pr_body
    assert plan_fingerprint_in(planned.pr_body) == plan.fingerprint


def test_group_opens_one_pr_a_commit_per_class_and_a_rerun_opens_nothing(
    group_plan: Path, stand_in: GitHubStandIn, tmp_path: Path
):
    plan = read_plan_dir(group_plan).plan
    first = publish_plan(
        group_plan, reviewer="maintainer1", work_dir=tmp_path / "work", attest=READS
    )
    assert first.action == "opened", first
    pulls = stand_in.pulls(UPSTREAM)
    assert len(pulls) == 1
    pull = pulls[0]
    assert pull["head"]["label"] == f"{STANDIN_FORK_OWNER}:{plan.branch}"
    assert LABEL in [label["name"] for label in pull["labels"]]
    for member in plan.members:
        assert member_marker(member.fingerprint) in pull["body"]

    # One commit per member, in order, each with its own title and sign-off, on the base.
    fork = git.Repo(stand_in.state.repos[FORK].git_dir)
    tip = fork.commit(f"refs/heads/{plan.branch}")
    commits = list(fork.iter_commits(f"{plan.base_commit}..{tip.hexsha}"))[::-1]
    assert [c.message.split("\n", 1)[0] for c in commits] == [m.title for m in plan.members]
    assert all("Signed-off-by: " in c.message for c in commits)
    assert commits[0].parents[0].hexsha == plan.base_commit
    glm4_commit = commits[[m.class_name for m in plan.members].index("Glm4ForCausalLM")]
    assert f"Fixes #{GLM4_ISSUE}" in glm4_commit.message
    assert {d.a_path for d in glm4_commit.parents[0].diff(glm4_commit)} == {
        "vllm/model_executor/models/glm4.py",
        "tests/models/test_registry.py",
        "tests/v1/spec_decode/test_eagle3_targets.py",  # its entry in the test through LLM
    }

    # The triaged issue of a member gets the sticky comment pointing at the group PR.
    comments = stand_in.comments(UPSTREAM, GLM4_ISSUE)
    assert len(comments) == 1 and f"#{pull['number']}" in comments[0]["body"]
    assert f"{GROUP_SIZE} model classes" in comments[0]["body"]

    writes = len(stand_in.writes())
    again = publish_plan(
        group_plan, reviewer="maintainer1", work_dir=tmp_path / "work", attest=READS
    )
    assert again.action == "unchanged", again
    assert len(stand_in.pulls(UPSTREAM)) == 1 and len(stand_in.writes()) == writes
    # A fresh work directory (another runner) finds the same PR and the same commits.
    other = publish_plan(
        group_plan, reviewer="maintainer1", work_dir=tmp_path / "work2", attest=READS
    )
    assert other.action == "unchanged", other
    assert fork.commit(f"refs/heads/{plan.branch}").hexsha == tip.hexsha


@pytest.mark.parametrize("merged", [False, True], ids=["closed", "merged"])
def test_a_member_already_in_a_closed_or_merged_pr_is_left_out(
    _group_template: tuple[Path, Path],
    group_plan: Path,
    stand_in: GitHubStandIn,
    tmp_path: Path,
    merged: bool,
):
    stale = read_plan_dir(group_plan).plan
    glm4 = next(m for m in stale.members if m.class_name == "Glm4ForCausalLM")
    number = stand_in.add_pull(
        UPSTREAM,
        f"{STANDIN_FORK_OWNER}:bot/eagle3-interface/glm4-for-causal-lm",
        user=STANDIN_BOT_LOGIN,
        body=f"an earlier proposal\n\n<!-- bot:fingerprint={glm4.fingerprint} -->\n",
        labels=[LABEL],
    )
    stand_in.close_pull(UPSTREAM, number, merged=merged)
    state = "merged" if merged else "closed unmerged"

    # The plan made before that PR is refused, naming the member and what to do.
    with pytest.raises(BotError, match=rf"Glm4ForCausalLM is already in PR #{number} \({state}\)"):
        publish_plan(group_plan, reviewer="maintainer1", work_dir=tmp_path / "work", attest=READS)
    assert [p["number"] for p in stand_in.pulls(UPSTREAM)] == [number]  # nothing opened

    # Proposing the group again (reading GitHub, no token needed) leaves Glm4 out, says why.
    checkout = _group_template[1]
    plan, left_out = _propose(checkout, tmp_path / "again", dedupe=True)
    assert [m.class_name for m in plan.members if m.class_name == "Glm4ForCausalLM"] == []
    assert len(plan.members) == len(stale.members) - 1
    assert left_out == [f"Glm4ForCausalLM: already in PR #{number} ({state}); not proposed again"]
    assert "Left out of this group" in (tmp_path / "again" / "pr.md").read_text()
    if merged:
        return  # the publish path is the same for both; one run of it is enough
    _verify(tmp_path / "again")
    # Glm4's issue was the group's demand and left with Glm4: the rest waits for a request.
    waiting = publish_plan(
        tmp_path / "again", reviewer="maintainer1", work_dir=tmp_path / "w", attest=READS
    )
    assert waiting.action == "waiting-for-demand", waiting
    result = publish_plan(
        tmp_path / "again",
        reviewer="maintainer1",
        work_dir=tmp_path / "w",
        attest=READS,
        requested_by="maintainer1",
    )
    assert result.action == "opened", result
    opened = [p for p in stand_in.pulls(UPSTREAM) if p["number"] == result.pr_number]
    assert len(opened) == 1 and glm4.fingerprint not in opened[0]["body"]


def test_the_dashboard_issue_approves_a_group_by_its_review_hash(
    group_plan: Path, stand_in: GitHubStandIn, tmp_path: Path, monkeypatch
):
    monkeypatch.setenv("BOT_REPO", "example/bot")
    monkeypatch.setenv("BOT_MAINTAINERS", "alice")
    alice = "ghp_aliceTOKEN0123456789abcdefghijklmn"
    stand_in.add_repo("example/bot")
    stand_in.add_token(alice, "alice")
    # Listed for approval once verification passed; the GPU result is recorded as the
    # dashboard's own tests record it (publish still opens a draft: no run GitHub confirms).
    plan = read_plan_dir(group_plan).plan
    gpu = {"mode": "dispatch", "conclusion": "success", "log_excerpt": "6 passed"}
    update_plan(
        group_plan,
        dataclasses.replace(plan, verification=claimed(plan.verification, passed=True, gpu=gpu)),
    )
    refresh_duplicate_search(group_plan)  # recorded as propose does when GitHub answers
    journal = Journal(tmp_path / "journal.sqlite3")
    proposal_id = journal.record_proposal(group_plan)
    github = GitHubClient()
    sync(journal, github)
    [issue] = github.list_issues("example/bot", creator=STANDIN_BOT_LOGIN)
    fingerprint = read_plan_dir(group_plan).plan.fingerprint
    shown = journal.as_published(proposal_id)
    digest = review_hash(shown.patch, shown.pr_markdown, shown.plan)
    line = next(x for x in issue["body"].splitlines() if f"bot:approve={fingerprint} " in x)
    assert f"review={digest}" in line and f"{GROUP_SIZE} model classes" in line
    ticked = issue["body"].replace(line, line.replace("- [ ] ", "- [x] ", 1))
    GitHubClient(token=alice).edit_issue("example/bot", issue["number"], body=ticked)

    report = sync(journal, github)
    assert report.approved == [fingerprint], report.refused
    assert journal.proposal(proposal_id).state == PR_OPEN
    pulls = stand_in.pulls(UPSTREAM)
    assert len(pulls) == 1 and "@alice read every changed line of the patch" in pulls[0]["body"]
    sync(journal, github)
    assert len(stand_in.pulls(UPSTREAM)) == 1


@pytest.mark.parametrize(
    ("tamper", "error"),
    [
        (lambda p: _member(p, 1, fingerprint="eagle3-interface:Other:0"), "fingerprint is not"),
        (lambda p: _member(p, 0, class_name="Glm4ForCausalLM"), "finding is for another class"),
        (lambda p: dataclasses.replace(p, branch="bot/group/other"), "branch or fingerprint"),
        (lambda p: dataclasses.replace(p, members=p.members[:1]), "at least two members"),
        (lambda p: _member(p, 2, recipe="eagle3-enable"), "finding is for another class"),
        (lambda p: _member(p, 3, title="Fixes: everything"), "trailer-looking"),
        (lambda p: _member(p, 4, patch=""), "no commit"),
    ],
)
def test_a_tampered_group_plan_is_refused_before_anything_is_sent(group_plan, tamper, error):
    plan = read_plan_dir(group_plan).plan
    update_plan(group_plan, tamper(plan))
    with pytest.raises(BotError, match=error):
        check_plan_fields(read_plan_dir(group_plan), github_settings())


def _member(plan: Plan, index: int, **changes) -> Plan:
    members = list(plan.members)
    members[index] = dataclasses.replace(members[index], **changes)
    return dataclasses.replace(plan, members=members)


def test_plan_json_of_a_group_round_trips(group_plan: Path):
    data = json.loads((group_plan / "plan.json").read_text())
    assert Plan.from_dict(data).to_json() == (group_plan / "plan.json").read_text()
