"""The sticky issue comment and the commit title are the recipe's words, carried by the plan."""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from bot.plan import read_plan_dir, update_plan
from bot.publish.pr import publish_plan
from tests.attest import READS
from tests.conftest import FORK, UPSTREAM
from tests.github_standin import GitHubStandIn

pytestmark = pytest.mark.vllm_tree


def _with(plan_dir: Path, **fields: object) -> None:
    """Change plan fields the way propose would write them: the plan's one member too."""
    plan = read_plan_dir(plan_dir).plan
    for name, value in fields.items():
        setattr(plan, name, value)
    plan.members = [plan.single_member()]
    update_plan(plan_dir, plan)


def test_the_issue_comment_says_what_the_recipe_wrote(
    seed_plan: Path, upstream_standin: GitHubStandIn, tmp_path: Path
) -> None:
    _with(seed_plan, issue_comment="it teaches `Qwen3NextForCausalLM` a new trick.")
    result = publish_plan(seed_plan, reviewer=None, work_dir=tmp_path / "work", attest=READS)
    [comment] = upstream_standin.comments(UPSTREAM, 33329)
    assert (
        f"A fix is proposed in #{result.pr_number}: it teaches `Qwen3NextForCausalLM` a new "
        "trick. The PR is a draft" in comment["body"]
    )
    assert "SupportsEagle3" not in comment["body"]


@pytest.mark.parametrize(
    "wording", ["", "cc @someone for review.", "<img src=x onerror=alert(1)>", "two\nlines."]
)
def test_unfit_wording_falls_back_to_a_plain_sentence(
    seed_plan: Path, upstream_standin: GitHubStandIn, tmp_path: Path, wording: str
) -> None:
    _with(seed_plan, issue_comment=wording)
    result = publish_plan(seed_plan, reviewer=None, work_dir=tmp_path / "work", attest=READS)
    [comment] = upstream_standin.comments(UPSTREAM, 33329)
    assert (
        f"A fix is proposed in #{result.pr_number}: it changes `Qwen3NextForCausalLM`. "
        in comment["body"]
    )
    assert "@someone" not in comment["body"] and "<img" not in comment["body"]


def test_the_commit_title_is_the_recipes(
    seed_plan: Path, upstream_standin: GitHubStandIn, tmp_path: Path
) -> None:
    title = read_plan_dir(seed_plan).plan.title
    assert title == "[Model][Spec Decode] Declare SupportsEagle3 on Qwen3NextForCausalLM"
    publish_plan(seed_plan, reviewer=None, work_dir=tmp_path / "work", attest=READS)
    fork = git.Repo(upstream_standin.state.repos[FORK].git_dir)
    branch = read_plan_dir(seed_plan).plan.branch
    assert fork.commit(f"refs/heads/{branch}").message.startswith(f"{title}\n\n")
    assert upstream_standin.pulls(UPSTREAM)[0]["title"] == title
