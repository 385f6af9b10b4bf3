"""`publish_plan` against the GitHub stand-in, with the seed case (vllm#33329) built from the
real 0.23.0 tree: real PyGithub over HTTP, real GitPython pushing to a bare fork remote."""

from __future__ import annotations

import logging
from pathlib import Path

import git
import pytest

from bot.content_hash import patch_hash, review_hash
from bot.errors import BotError
from bot.pipeline import refresh_duplicate_search
from bot.plan import NEEDS_INFO, read_plan_dir, update_plan, write_plan_dir
from bot.publish.attestation import APPROVER, DASHBOARD, Attestation, Signer, given
from bot.publish.pr import PublishBudget, publish_plan
from tests.attest import READS
from tests.claimed import claimed
from tests.conftest import FORK, SUBMITTER_EMAIL, SUBMITTER_NAME, UPSTREAM
from tests.github_standin import STANDIN_BOT_LOGIN, STANDIN_FORK_OWNER, STANDIN_TOKEN

pytestmark = pytest.mark.vllm_tree
BOT_REPO = "example/bot"

BRANCH = "bot/eagle3-interface/qwen3-next-for-causal-lm"
TITLE = "[Model][Spec Decode] Declare SupportsEagle3 on Qwen3NextForCausalLM"


@pytest.fixture
def seed(seed_plan: Path, upstream_standin, tmp_path: Path):
    """The bot's own seed plan (from `bot propose`) and a work directory for publishing."""
    return seed_plan, tmp_path / "work"


def _publish(plan_dir: Path, work_dir: Path, reviewer: str | None = "maintainer1"):
    return publish_plan(plan_dir, reviewer=reviewer, work_dir=work_dir, attest=READS)


def _fork_branch(standin) -> git.Commit | None:
    fork = git.Repo(standin.state.repos[FORK].git_dir)
    try:
        return fork.commit(f"refs/heads/{BRANCH}")
    except git.BadName:
        return None


def test_seed_opens_one_draft_pr_then_reruns_change_nothing(
    seed, github_standin, capsys, caplog, tmp_path
):
    caplog.set_level(logging.DEBUG)
    plan_dir, work_dir = seed
    first = _publish(plan_dir, work_dir)
    assert first.action == "opened", first

    pulls = github_standin.pulls(UPSTREAM)
    assert len(pulls) == 1
    pull = pulls[0]
    assert pull["draft"] is True
    assert pull["head"]["label"] == f"{STANDIN_FORK_OWNER}:{BRANCH}"
    assert pull["base"]["ref"] == "main"
    assert "Fixes #33329" in pull["body"]
    assert "<!-- bot:fingerprint=eagle3-interface:Qwen3NextForCausalLM:" in pull["body"]
    # maintainer1 is named only with their attestation, not on its own; the submitter who
    # attested at the confirmation speaks in the first person.
    assert "maintainer1" not in pull["body"]
    assert "I read every changed line of the patch" in pull["body"]
    assert "bot:eagle3" in [label["name"] for label in pull["labels"]]

    commit = _fork_branch(github_standin)
    assert commit is not None and commit.hexsha == pull["head"]["sha"]
    # The submitter authors and signs off; the bot is credited in AGENTS.md's trailer form.
    assert (commit.author.name, commit.author.email) == (SUBMITTER_NAME, SUBMITTER_EMAIL)
    assert (commit.committer.name, commit.committer.email) == (SUBMITTER_NAME, SUBMITTER_EMAIL)
    assert commit.message.rstrip().endswith(
        f"Co-authored-by: vllm-eagle3-bot\nSigned-off-by: {SUBMITTER_NAME} <{SUBMITTER_EMAIL}>"
    )
    assert commit.message.startswith(TITLE + "\n\n")
    assert [p.hexsha for p in commit.parents] == [read_plan_dir(plan_dir).plan.base_commit]
    diffs = commit.parents[0].diff(commit, create_patch=True)
    assert "+    SupportsEagle3," in "".join(d.diff.decode() for d in diffs)

    comments = github_standin.comments(UPSTREAM, 33329)
    assert len(comments) == 1
    assert f"#{pull['number']}" in comments[0]["body"]
    assert comments[0]["user"]["login"] == STANDIN_BOT_LOGIN

    writes_after_first = len(github_standin.writes())
    for _ in range(5):
        again = _publish(plan_dir, work_dir)
        assert again.action == "unchanged", again
        assert again.pr_number == pull["number"]
    assert len(github_standin.writes()) == writes_after_first
    assert len(github_standin.pulls(UPSTREAM)) == 1
    assert len(github_standin.comments(UPSTREAM, 33329)) == 1
    assert _fork_branch(github_standin).hexsha == commit.hexsha

    _assert_token_nowhere(capsys, caplog, tmp_path)


def test_a_plan_other_than_the_approved_one_is_refused(seed, github_standin):
    plan_dir, work_dir = seed
    planned = read_plan_dir(plan_dir)
    approved = review_hash(planned.patch, planned.pr_markdown, planned.plan)
    (plan_dir / "pr.md").write_text(planned.pr_markdown + "\nOne more line.\n", encoding="utf-8")
    with pytest.raises(BotError, match="not what the maintainer approved"):
        publish_plan(
            plan_dir,
            reviewer="maintainer1",
            work_dir=work_dir,
            approved_hash=approved,
            attest=READS,
        )
    assert github_standin.writes() == [] and _fork_branch(github_standin) is None


def test_closed_unmerged_pr_is_never_reopened(seed, github_standin):
    plan_dir, work_dir = seed
    opened = _publish(plan_dir, work_dir)
    github_standin.close_pull(UPSTREAM, opened.pr_number)
    result = _publish(plan_dir, work_dir)
    assert result.action == "closed-by-maintainer"
    assert "maintainer said no" in result.message
    assert len(github_standin.pulls(UPSTREAM)) == 1

    github_standin.close_pull(UPSTREAM, opened.pr_number, merged=True)
    assert _publish(plan_dir, work_dir).action == "merged"


def _successful_gpu_run(standin, monkeypatch, plan_dir: Path) -> dict:
    """A gpu-verify run on the bot's repository for the pushed head, with the recipe's tests
    and smoke target, dispatched and finished with success, as `bot verify --gpu dispatch`
    records it."""
    from tests.test_publish_gpu_runs import _head, _honest_inputs, _run, titled_like_the_workflow

    monkeypatch.setenv("BOT_REPO", BOT_REPO)
    titled_like_the_workflow(standin)
    return _run(standin, "success", **_honest_inputs(plan_dir, _head(standin)))


def test_body_change_updates_in_place_and_verification_marks_ready(
    seed, github_standin, monkeypatch
):
    plan_dir, work_dir = seed
    opened = _publish(plan_dir, work_dir)

    # A passed verification alone is the plan's word: the PR stays a draft.
    plan = read_plan_dir(plan_dir).plan
    plan.verification = claimed(plan.verification, passed=True)
    update_plan(plan_dir, plan)
    assert _publish(plan_dir, work_dir).action == "unchanged"
    assert github_standin.pulls(UPSTREAM)[0]["draft"] is True
    # The GPU run it names, finished with success on the bot's repository, makes it ready.
    gpu = _successful_gpu_run(github_standin, monkeypatch, plan_dir)
    plan.verification = claimed(plan.verification, gpu=gpu)
    update_plan(plan_dir, plan)
    ready = _publish(plan_dir, work_dir)
    assert ready.action == "updated"
    assert github_standin.pulls(UPSTREAM)[0]["draft"] is False
    assert (
        "run confirmed on GitHub: a passed gpu-verify run"
        in github_standin.pulls(UPSTREAM)[0]["body"]
    )
    assert "ready for review" in github_standin.comments(UPSTREAM, 33329)[0]["body"]
    assert len(github_standin.comments(UPSTREAM, 33329)) == 1
    assert _publish(plan_dir, work_dir).action == "unchanged"

    # An approving maintainer's attestation (the dashboard's) is named in the body, in their
    # name, not the submitter's voice; the plan's search record is the current answer.
    refresh_duplicate_search(plan_dir)
    planned = read_plan_dir(plan_dir)
    approved = review_hash(planned.patch, planned.pr_markdown, planned.plan)
    github_standin.add_user("maintainer2", "Maintainer Two")
    signer = Signer("Maintainer Two", "maintainer2@users.noreply.github.com")
    attestation = Attestation(
        "maintainer2", APPROVER, DASHBOARD, True, patch_hash(planned.patch), signer=signer
    )
    changed = publish_plan(
        plan_dir,
        reviewer="maintainer2",
        work_dir=work_dir,
        approved_hash=approved,
        attest=given(attestation),
    )
    assert changed.action == "updated" and changed.pr_number == opened.pr_number
    body = github_standin.pulls(UPSTREAM)[0]["body"]
    assert "@maintainer2 read every changed line of the patch" in body
    assert "I read every changed line" not in body
    # The branch already held this change, signed off by the submitter: kept, and said so.
    head = _fork_branch(github_standin)
    assert (head.author.email, head.committer.email) == (SUBMITTER_EMAIL, SUBMITTER_EMAIL)
    assert "signed the commit off as its author" not in body
    assert "its commit keeps the sign-off it was pushed with" in body


@pytest.mark.parametrize(
    ("method", "path", "status", "headers"),
    [
        ("POST", r"/pulls$", 502, {}),
        ("GET", r"/pulls$", 500, {}),
        ("POST", r"/pulls$", 429, {"Retry-After": "1"}),
        ("POST", r"/comments$", 403, {"Retry-After": "1"}),
    ],
)
def test_transient_faults_end_with_one_pr(
    seed, github_standin, method, path, status, headers, monkeypatch
):
    plan_dir, work_dir = seed
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "4")  # two Retry-After: 1 waits fit
    github_standin.inject(method, path, status, headers, times=2)
    assert _publish(plan_dir, work_dir).action == "opened"
    assert len(github_standin.pulls(UPSTREAM)) == 1
    assert len(github_standin.comments(UPSTREAM, 33329)) == 1
    assert not [f for f in github_standin.state.faults if f.times]  # both faults were hit


def test_crash_after_push_is_picked_up_without_duplicates(seed, github_standin, monkeypatch):
    plan_dir, work_dir = seed
    monkeypatch.setenv("BOT_GITHUB_RETRIES", "1")
    github_standin.inject("POST", r"/pulls$", 500, times=5)
    with pytest.raises(BotError):
        _publish(plan_dir, work_dir)
    pushed = _fork_branch(github_standin)
    assert pushed is not None and github_standin.pulls(UPSTREAM) == []

    github_standin.state.faults.clear()
    result = _publish(plan_dir, work_dir)
    assert result.action == "opened"
    assert len(github_standin.pulls(UPSTREAM)) == 1
    assert _fork_branch(github_standin).hexsha == pushed.hexsha  # the pushed commit is reused


def test_human_commit_on_branch_stops_the_bot_pushing(seed, github_standin, tmp_path):
    plan_dir, work_dir = seed
    _publish(plan_dir, work_dir)
    fork = git.Repo(github_standin.state.repos[FORK].git_dir)
    tip = fork.commit(f"refs/heads/{BRANCH}")
    human = git.Actor("A Human", "human@example.com")
    amended = fork.git.commit_tree(
        tip.tree.hexsha, "-p", tip.hexsha, "-m", "tweak", env=_actor_env(human)
    )
    fork.git.update_ref(f"refs/heads/{BRANCH}", amended)

    result = _publish(plan_dir, work_dir, reviewer="maintainer2")
    assert "someone else has committed" in result.message
    assert _fork_branch(github_standin).hexsha == amended


def _actor_env(actor: git.Actor) -> dict[str, str]:
    return {
        "GIT_AUTHOR_NAME": actor.name,
        "GIT_AUTHOR_EMAIL": actor.email,
        "GIT_COMMITTER_NAME": actor.name,
        "GIT_COMMITTER_EMAIL": actor.email,
    }


def test_pr_caps_per_run_and_per_hour(seed, github_standin, monkeypatch):
    plan_dir, work_dir = seed
    monkeypatch.setenv("BOT_MAX_PRS_PER_HOUR", "0")
    result = _publish(plan_dir, work_dir)
    assert result.action == "rate-limited"
    assert github_standin.pulls(UPSTREAM) == [] and _fork_branch(github_standin) is None

    monkeypatch.setenv("BOT_MAX_PRS_PER_HOUR", "5")
    monkeypatch.setenv("BOT_MAX_PRS_PER_RUN", "1")
    from bot.config import github_settings

    budget = PublishBudget(github_settings())
    assert publish_plan(
        plan_dir, reviewer=None, work_dir=work_dir, budget=budget, attest=READS
    ).action == ("opened")
    assert budget.refusal() is not None


def test_needs_info_posts_one_escaped_question(seed, github_standin):
    plan_dir, _ = seed
    planned = read_plan_dir(plan_dir)
    plan = planned.plan
    plan.status = NEEDS_INFO
    plan.questions = ["Which model class fails? You wrote <img src=x onerror=alert(1)>"]
    write_plan_dir(plan_dir, plan, "", planned.pr_markdown)
    for _ in range(2):
        result = publish_plan(plan_dir, reviewer=None)
        assert result.action == "needs-info-commented"
    comments = github_standin.comments(UPSTREAM, 33329)
    assert len(comments) == 1
    assert "&lt;img src=x" in comments[0]["body"] and "<img" not in comments[0]["body"]
    assert github_standin.pulls(UPSTREAM) == []


def _assert_token_nowhere(capsys, caplog, root: Path) -> None:
    captured = capsys.readouterr()
    assert STANDIN_TOKEN not in captured.out + captured.err
    assert STANDIN_TOKEN not in caplog.text
    for path in root.rglob("*"):
        if path.is_file() and path.stat().st_size < 5_000_000:
            assert STANDIN_TOKEN.encode() not in path.read_bytes(), path
