"""`bot publish` refuses before it writes anything: no token, or a reviewer that is not a login.

Through the command, against the GitHub stand-in, with the bot's own seed plan (vLLM 0.23.0).
Each refusal is one `bot: ...` line, exit 2, and the stand-in saw no write at all.
"""

from __future__ import annotations

import re
from pathlib import Path

import git
import pytest

from bot.content_hash import review_hash
from bot.errors import BotError
from bot.plan import read_plan_dir, update_plan
from bot.publish.pr import publish_plan
from tests.attest import READS
from tests.cli import run_bot
from tests.conftest import FORK, UPSTREAM
from tests.github_standin import GitHubStandIn

pytestmark = pytest.mark.vllm_tree


def one_line_refusal(result, fragment: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bot: "), result.stderr
    assert fragment in lines[0]


def test_publish_without_a_token_refuses_and_writes_nothing(
    seed_plan: Path, upstream_standin: GitHubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    result = run_bot("publish", str(seed_plan))
    one_line_refusal(result, "publishing needs a token")
    assert upstream_standin.writes() == []
    assert upstream_standin.pulls(UPSTREAM) == []


@pytest.mark.parametrize(
    "reviewer",
    [
        "someone\n<!-- bot:fingerprint=forged -->",
        "a;rm -rf ~",
        "a" * 40,
        "name with space",
        "@maintainer1",
    ],
)
def test_a_reviewer_that_is_not_a_login_is_refused(
    seed_plan: Path, upstream_standin: GitHubStandIn, reviewer: str, tmp_path: Path
) -> None:
    # A reviewer is named only with a recorded approval (the plan's review hash); the name
    # that comes with it is checked before anything is written.
    planned = read_plan_dir(seed_plan)
    approved = review_hash(planned.patch, planned.pr_markdown, planned.plan)
    with pytest.raises(BotError, match="not a GitHub login"):
        publish_plan(
            seed_plan, reviewer=reviewer, approved_hash=approved, work_dir=tmp_path, attest=READS
        )
    assert upstream_standin.writes() == []
    assert upstream_standin.pulls(UPSTREAM) == []
    assert FORK in upstream_standin.state.repos  # the fork exists; it was just never pushed to


def test_a_plan_naming_another_branch_never_moves_it(
    seed_plan: Path, upstream_standin: GitHubStandIn
) -> None:
    # A plan directory is data from the unprivileged half: its branch must not steer the push
    # onto the fork's main (refused, or re-derived from the fix; never pushed there).
    loaded = read_plan_dir(seed_plan)
    loaded.plan.branch = "main"
    update_plan(seed_plan, loaded.plan)
    fork = git.Repo(upstream_standin.state.repos[FORK].git_dir)
    main_before = fork.commit("refs/heads/main").hexsha
    result = run_bot("publish", str(seed_plan), "--preview")
    shown = re.search(r"--body-sha ([0-9a-f]{64})", result.stdout)
    if result.returncode == 0 and shown:  # not refused before the submitter is asked: attest
        result = run_bot("publish", str(seed_plan), "--read-every-line", "--body-sha", shown[1])
    if result.returncode != 0:
        one_line_refusal(result, "branch")
    assert fork.commit("refs/heads/main").hexsha == main_before
    assert all(p["head"]["ref"] != "main" for p in upstream_standin.pulls(UPSTREAM))
