"""Errors are one line, whatever a library logs on the way.

PyGithub 2.x gives its logger a stderr handler of its own when it is imported, so every retry
notice printed twice, once past the bot's redaction filter: a secondary rate limit without
Retry-After, or a primary limit, gave five lines on stderr. The real `bot publish` runs here as
its own process (a library's handler is installed at import, which an in-process run of the
command does not show), against the GitHub stand-in.
"""

from __future__ import annotations

import time

import pytest

from tests.github_standin import STANDIN_TOKEN
from tests.publish_world import World


def _limits(world: World, kind: str) -> None:
    if kind == "secondary":  # 403, GitHub's message, no Retry-After: a minute's wait
        world.standin.inject("POST", r"/pulls$", 403, times=10)
    else:  # a primary limit: 403 with the reset an hour away
        reset = str(int(time.time()) + 3600)
        world.standin.inject(
            "POST",
            r"/pulls$",
            403,
            {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset},
            times=10,
            message=f"API rate limit exceeded for {STANDIN_TOKEN}.",
        )


@pytest.mark.parametrize("kind", ["secondary", "primary"])
def test_a_rate_limited_publish_says_one_line(world: World, kind: str) -> None:
    plan = world.plan("Bar")
    _limits(world, kind)

    done = world.bot("publish", str(plan), BOT_GITHUB_MAX_WAIT="3")

    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("bot: "), done.stderr
    assert "BOT_GITHUB_MAX_WAIT" in done.stderr and STANDIN_TOKEN not in done.stderr
    assert world.pulls() == []

    # The rerun after the limit completes with one PR and one comment.
    world.standin.state.faults.clear()
    again = world.bot("publish", str(plan))
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert len(world.pulls()) == 1 and len(world.comments("Bar")) == 1


def test_with_verbose_each_library_notice_prints_once_and_redacted(world: World) -> None:
    plan = world.plan("Bar")
    world.standin.inject("POST", r"/pulls$", 403, {"Retry-After": "1"}, times=1)

    done = world.bot("-v", "publish", str(plan), BOT_GITHUB_MAX_WAIT="3")

    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(line.startswith("bot: ") for line in lines), lines
    assert len(lines) == len(set(lines))  # no notice printed twice
    assert STANDIN_TOKEN not in done.stderr + done.stdout


def test_a_library_retry_notice_is_not_printed_on_a_run_that_succeeds(world: World) -> None:
    """A read whose connection dropped is retried inside urllib3, which logs a WARNING; the run
    succeeds, so nothing at all goes to stderr (with -v it would, once and redacted)."""
    plan = world.plan("Bar")
    world.standin.inject("GET", r"/pulls$", 0, kind="reset", times=1)

    done = world.bot("publish", str(plan))

    assert done.returncode == 0 and done.stdout.startswith("opened:"), done
    assert done.stderr == ""
    assert not [f for f in world.standin.state.faults if f.times]  # the reset happened
