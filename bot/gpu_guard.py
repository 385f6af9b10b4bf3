"""`bot gpu-guard`: the GPU runner checks out only a commit the bot pushed for this plan.

``gpu-verify.yml`` is dispatched with a repository, the branch the plan publishes and a ref.
Before anything is checked out on the self-hosted runner, the guard asks GitHub (not the
dispatch inputs) what that one branch on the bot's fork points at, and answers with the commit
to check out:

- the branch name itself: its head on the fork;
- a full commit sha: accepted when it is that branch's head, or the head's parent (the
  upstream commit the fix was built on, which the fail-before run tests); the first parent only,
  never a merge's other parents.

Everything else is refused: another repository (upstream included), a branch that is not
``bot/<recipe>/<class-slug>``, ``refs/pull/*`` and any other ref, a short sha, the head of any
other bot branch, a commit that branch does not point at.
"""

from __future__ import annotations

import re
from typing import Protocol

from bot.config import GitHubSettings
from bot.errors import BotError
from bot.github.identity import BOT_BRANCH

_SHA = re.compile(r"^[0-9a-f]{40}$")


class BranchReader(Protocol):
    def branch_heads(self, repo: str, prefix: str) -> dict[str, str]: ...

    def commit_parents(self, repo: str, sha: str) -> list[str]: ...


def bot_fork(settings: GitHubSettings) -> str:
    if not settings.fork_owner:
        raise BotError("the GPU guard needs the bot's fork: set BOT_FORK_OWNER")
    return f"{settings.fork_owner}/{settings.upstream.split('/', 1)[-1]}"


def guarded_commit(
    repository: str, branch: str, ref: str, client: BranchReader, settings: GitHubSettings
) -> str:
    """The sha the GPU runner may check out for (``repository``, ``branch``, ``ref``), or
    BotError."""
    fork = bot_fork(settings)
    if repository != fork:
        raise BotError(f"refused: the GPU runner only tests the bot's fork {fork}")
    if not BOT_BRANCH.match(branch) or ".." in branch:
        raise BotError("refused: the branch is not a bot/<recipe>/<class> branch")
    if ref.startswith("refs/") or ".." in ref:
        raise BotError("refused: pass the bot/ branch or a full commit sha, never a ref")
    if ref != branch and not _SHA.match(ref):
        raise BotError("refused: neither the plan's branch nor a full commit sha")
    # A prefix listing (GitHub matches refs by prefix): only the exact name counts.
    head = client.branch_heads(fork, branch).get(branch)
    if head is None:
        raise BotError(f"refused: {branch} is not a branch on {fork}")
    if ref in (branch, head):
        return head
    # Only the first parent: the upstream commit the fix was built on. A merge's second parent
    # could be any commit someone merged into the branch.
    parents = client.commit_parents(fork, head)
    if parents and ref == parents[0]:
        return ref
    raise BotError(
        f"refused: {ref[:60]} is neither the head of {branch} on {fork} nor its first parent"
    )
