"""A rerun of triage reads what people wrote in the issue's thread, never the bot's own
comments: its sticky status comment (by the ``bot:status`` marker, whoever's token wrote it) and
anything the token's login wrote are skipped (issue 33). Read through the GitHub stand-in, as
``bot propose --issue N`` reads an issue without ``--issue-file``."""

from __future__ import annotations

import json

from bot.github.client import GitHubClient
from bot.github.identity import status_marker
from tests.conftest import UPSTREAM
from tests.github_standin import STANDIN_BOT_LOGIN
from tests.publish_world import World

NUMBER = 150
ERROR = "ValueError: the model does not support EAGLE3 interface"


def _thread(world: World, *, bot_comments: bool = True) -> None:
    """An issue whose body names no model; the bot asked (its status comment names two other
    classes), wrote once more without a marker, and the reporter answered FooForCausalLM."""
    world.standin.add_issue(UPSTREAM, NUMBER, "[Bug]: EAGLE-3 fails at load time", ERROR)
    if bot_comments:
        GitHubClient().upsert_issue_comment(
            NUMBER,
            status_marker(NUMBER),
            f"{status_marker(NUMBER)}\nWhich model is this about: `BarForCausalLM` (Bar) or "
            "`BazForCausalLM` (Baz)?",
            repo=UPSTREAM,
        )
        world.standin.add_comment(
            UPSTREAM, NUMBER, "Still waiting: BazForCausalLM or BarForCausalLM?", STANDIN_BOT_LOGIN
        )
    world.standin.add_comment(UPSTREAM, NUMBER, "It is FooForCausalLM.", "reporter")
    # Someone else's comment carrying the bot's marker is the bot's words too (a quote of it).
    world.standin.add_comment(
        UPSTREAM, NUMBER, f"> {status_marker(NUMBER)} BazForCausalLM?", "someone"
    )


def _propose(world: World) -> dict:
    out = world.root / "plan"
    done = world.bot(
        "propose", "--issue", str(NUMBER), "--repo", str(world.checkout), "--dry-run",
        "--no-dedupe", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads((out / "plan.json").read_text())


def test_a_rerun_reads_the_reporters_answer_and_not_the_bots_own_comments(world: World) -> None:
    _thread(world)
    plan = _propose(world)
    triage = plan["triage"]
    assert triage["architecture"] == "FooForCausalLM", triage
    assert plan["status"] == "ready", plan["reason"]
    assert "3 of the bot's own comments were not read" in triage["reasons"]
    said = json.dumps(triage)
    assert "Bar" not in said and "Baz" not in said, said


def test_the_bots_login_alone_marks_its_comments(world: World) -> None:
    """A comment of the token's login without any marker is the bot's too."""
    world.standin.add_issue(UPSTREAM, NUMBER, "[Bug]: EAGLE-3 fails at load time", ERROR)
    world.standin.add_comment(UPSTREAM, NUMBER, "It is FooForCausalLM.", "reporter")
    world.standin.add_comment(UPSTREAM, NUMBER, "Is it BazForCausalLM?", STANDIN_BOT_LOGIN)
    triage = _propose(world)["triage"]
    assert triage["architecture"] == "FooForCausalLM", triage
    assert "1 of the bot's own comments were not read" in triage["reasons"]
