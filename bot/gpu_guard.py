"""`bot gpu-guard`: the GPU runner checks out only a commit the bot itself pushed.

``gpu-verify.yml`` is dispatched with a repository and a ref. Before anything is checked out
on the self-hosted runner, the guard asks GitHub (not the dispatch inputs) what the bot's
branches on its fork point at, and answers with the commit to check out:

- a ``bot/<recipe>/<class-slug>`` branch name: that branch's head on the fork;
- a full commit sha: accepted when it is the head of one of those branches, or the head's
  parent (the upstream commit the fix was built on, which the fail-before run tests).

Everything else is refused: another repository (upstream included), ``refs/pull/*`` and any
other ref, a short sha, a commit no bot branch points at.
"""

from __future__ import annotations

import re
from typing import Protocol

from bot.config import GitHubSettings
from bot.errors import BotError

BRANCH_PREFIX = "bot/"
_SHA = re.compile(r"^[0-9a-f]{40}$")
_BOT_BRANCH = re.compile(r"^bot/[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*$")


class BranchReader(Protocol):
    def branch_heads(self, repo: str, prefix: str) -> dict[str, str]: ...

    def commit_parents(self, repo: str, sha: str) -> list[str]: ...


def bot_fork(settings: GitHubSettings) -> str:
    if not settings.fork_owner:
        raise BotError("the GPU guard needs the bot's fork: set BOT_FORK_OWNER")
    return f"{settings.fork_owner}/{settings.upstream.split('/', 1)[-1]}"


def guarded_commit(
    repository: str, ref: str, client: BranchReader, settings: GitHubSettings
) -> str:
    """The sha the GPU runner may check out for (``repository``, ``ref``), or BotError."""
    fork = bot_fork(settings)
    if repository != fork:
        raise BotError(f"refused: the GPU runner only tests the bot's fork {fork}")
    if ref.startswith("refs/") or ".." in ref:
        raise BotError("refused: pass a bot/ branch or a full commit sha, never a ref")
    if not (_SHA.match(ref) or _BOT_BRANCH.match(ref)):
        raise BotError("refused: not a bot/<recipe>/<class> branch nor a full commit sha")
    heads = client.branch_heads(fork, BRANCH_PREFIX)
    if ref in heads:
        return heads[ref]
    if _SHA.match(ref):
        if ref in heads.values():
            return ref
        for head in sorted(set(heads.values())):
            if ref in client.commit_parents(fork, head):
                return ref
    raise BotError(f"refused: {ref[:60]} is not the head of a bot/ branch on {fork}")
