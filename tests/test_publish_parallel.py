"""Publishes at once in one BOT_HOME share its work repository (BOT_HOME/work/<upstream>) safely.

Three `bot publish` processes started together, with no work repository yet, each for its own
plan: before the lock they failed with false errors ("base commit ... is in neither the upstream
nor the fork", "remote upstream already exists"). The dashboard's two approvals at once are the
same race in threads (tests/test_publish_dashboard.py).
"""

from __future__ import annotations

import threading
from pathlib import Path

from tests.publish_world import World

NAMES = ("Foo", "Bar", "Baz")


def _all_at_once(world: World, plans: list[Path], **env: str) -> list[tuple[int, str, str]]:
    runs = [world.bot_async("publish", str(plan), **env) for plan in plans]
    outputs = [run.communicate(timeout=600) for run in runs]
    return [(run.returncode, out, err) for run, (out, err) in zip(runs, outputs, strict=True)]


def test_three_publishes_at_once_in_one_home_open_three_prs(world: World) -> None:
    plans = [world.plan(name) for name in NAMES]
    results = _all_at_once(world, plans, BOT_GITHUB_MAX_WAIT="60")

    assert [(code, err) for code, _, err in results] == [(0, "")] * 3, results
    assert sorted(out.split(":", 1)[0] for _, out, _ in results) == ["opened"] * 3
    # The fork's publish lock was released by each.
    assert "bot-publish-lock" not in world.fork_branches()
    world.assert_settled(*plans)


def test_with_an_hourly_cap_of_one_three_at_once_open_one(world: World, monkeypatch) -> None:
    plans = [world.plan(name) for name in NAMES]
    monkeypatch.setenv("BOT_MAX_PRS_PER_HOUR", "1")
    results = _all_at_once(world, plans, BOT_GITHUB_MAX_WAIT="60")

    assert [(code, err) for code, _, err in results] == [(0, "")] * 3, results
    actions = [out.split(":", 1)[0] for _, out, _ in results]
    assert sorted(actions) == ["opened", "rate-limited", "rate-limited"], results
    world.assert_settled(plans[actions.index("opened")])


def test_a_publish_waits_while_another_holds_the_work_repository(world: World) -> None:
    """The lock itself, without a race to win: held here, a publish waits, having asked
    GitHub nothing; released, it completes."""
    from bot.config import github_settings
    from bot.github.git import default_work_dir, work_repo_lock

    plan = world.plan("Bar")
    asked_before = len(world.standin.request_log())  # propose's duplicate search
    done: dict[str, object] = {}
    publish = threading.Thread(target=lambda: done.update(run=world.run("publish", str(plan))))
    with work_repo_lock(default_work_dir(github_settings())):
        publish.start()
        publish.join(timeout=3)
        assert publish.is_alive() and world.standin.request_log()[asked_before:] == []
    publish.join(timeout=300)
    assert not publish.is_alive()
    assert str(getattr(done["run"], "stdout", "")).startswith("opened:"), done
    world.assert_settled(plan)
