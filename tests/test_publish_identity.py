"""A fix's identity on GitHub survives the upstream moving.

The bot's plans are made on the upstream's current commit, and its fingerprint names that base.
When the upstream moves and the fix is planned again, the bot must still find its own earlier PR
for the same fix (same recipe, class and shape): a closed, unmerged one is a maintainer's "no" on
any base (with its branch deleted or still there), a merged one means done, and its own open one
is refreshed, rebased onto the new base and edited, never refused as someone else's duplicate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.plan import read_plan_dir
from tests.publish_world import World

BRANCH = "bot/eagle3-interface/bar-for-causal-lm"


def _published(world: World) -> tuple[Path, dict]:
    plan = world.plan("Bar")
    done = world.run("publish", str(plan))
    assert done.returncode == 0 and done.stdout.startswith("opened:"), done
    (pull,) = world.pulls()
    return plan, pull


def _replanned_after_upstream_moved(world: World, plan: Path) -> Path:
    old_base = world.base_of(plan)
    new_base = world.move_upstream()
    replanned = world.plan("Bar", world.root / "plans" / "Bar-again")
    assert world.base_of(replanned) == new_base != old_base
    return replanned


@pytest.mark.parametrize("branch", ["deleted", "kept"])
def test_a_closed_fix_stays_closed_when_the_upstream_moves(world: World, branch: str) -> None:
    plan, pull = _published(world)
    world.standin.close_pull("vllm-project/vllm", pull["number"])
    if branch == "deleted":
        world.delete_fork_branch(BRANCH)
    replanned = _replanned_after_upstream_moved(world, plan)
    writes = len(world.writes())
    tip = world.fork_head(BRANCH)

    again = world.run("publish", str(replanned))

    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("closed-by-maintainer:"), again.stdout
    assert f"PR #{pull['number']} was closed without merging" in again.stdout
    assert len(world.pulls()) == 1 and len(world.comments("Bar")) == 1
    assert len(world.writes()) == writes  # nothing sent
    assert world.fork_head(BRANCH) == tip  # nothing pushed, nothing deleted


def test_a_merged_fix_is_done_when_the_upstream_moves(world: World) -> None:
    plan, pull = _published(world)
    world.standin.close_pull("vllm-project/vllm", pull["number"], merged=True)
    replanned = _replanned_after_upstream_moved(world, plan)
    writes = len(world.writes())

    again = world.run("publish", str(replanned))

    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("merged:"), again.stdout
    assert len(world.pulls()) == 1 and len(world.writes()) == writes


def test_the_bots_own_open_pr_is_rebased_and_edited_when_the_upstream_moves(
    world: World,
) -> None:
    plan, pull = _published(world)
    old_head = world.fork_head(BRANCH)
    assert old_head is not None and old_head.parents[0].hexsha == world.base_of(plan)
    replanned = _replanned_after_upstream_moved(world, plan)
    new_base = world.base_of(replanned)

    again = world.run("publish", str(replanned))

    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("updated:"), again.stdout
    assert f"PR #{pull['number']}" in again.stdout
    assert "pushed a new commit" in again.stdout and "updated title/body" in again.stdout
    (now,) = world.pulls()
    head = world.fork_head(BRANCH)
    assert head is not None and [p.hexsha for p in head.parents] == [new_base]
    assert now["head"]["sha"] == head.hexsha
    assert head.tree.hexsha != old_head.tree.hexsha or head.hexsha != old_head.hexsha
    assert f"eagle3-interface:BarForCausalLM:{new_base[:12]}" in now["body"]
    assert len(world.comments("Bar")) == 1

    # And a rerun of the refreshed plan sends nothing.
    writes = len(world.writes())
    rerun = world.run("publish", str(replanned))
    assert rerun.stdout.startswith("unchanged:"), rerun.stdout
    assert len(world.writes()) == writes and world.fork_head(BRANCH) == head


def test_a_pr_the_bot_did_not_open_blocks_nothing_with_its_label_and_markers(
    world: World,
) -> None:
    """Issue 36's L9: someone else's PR (closed, from their own fork) that a maintainer gave
    the bot's label and whose body carries the bot's markers for the class is not the bot's."""
    from bot.github.identity import fingerprint_marker, member_marker

    plan = world.plan("Bar")
    fingerprint = read_plan_dir(plan).plan.fingerprint or ""
    theirs = world.standin.add_pull(
        "vllm-project/vllm",
        "someone:eagle3-things",
        user="someone",
        state="closed",
        labels=["bot:eagle3"],
        body=f"{member_marker(fingerprint)}\n{fingerprint_marker('group:x:0123456789ab:abc')}\n",
    )

    done = world.run("publish", str(plan))

    assert done.returncode == 0 and done.stdout.startswith("opened:"), done
    assert f"PR #{theirs}" not in done.stdout
    assert len(world.pulls()) == 2 and len(world.comments("Bar")) == 1
