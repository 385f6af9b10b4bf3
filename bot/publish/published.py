"""What GitHub already holds: each class the bot's pull requests name, and in which PR.

A PR names its classes by markers (:mod:`bot.github.identity`): a single-class PR by its
fingerprint, a group by one member marker per class. A class found in any PR, open, merged or
closed, is not proposed again: open means it is under review, merged means done, closed unmerged
means a maintainer said no. Matching ignores the base commit, so a class proposed on an older
release counts too. PRs are found by the bot's label (every state, every page) with their head on
the fork, and when a token is set also by the bot's own login, so no token is needed to read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.github.client import GitHubClient
from bot.github.identity import (
    class_key,
    fingerprints_in,
    is_group_fingerprint,
    plan_fingerprint_in,
)


@dataclass(frozen=True)
class PublishedPull:
    number: int
    state: str  # open | merged | closed
    url: str | None
    plan_fingerprint: str | None  # the fingerprint of the plan the PR was opened for

    @property
    def is_group(self) -> bool:
        return is_group_fingerprint(self.plan_fingerprint or "")

    def describe(self) -> str:
        return {"open": "open", "merged": "merged", "closed": "closed unmerged"}[self.state]


def pulls_by_class(client: GitHubClient, upstream: str) -> dict[str, list[PublishedPull]]:
    """``recipe:Class[@variant]`` -> every PR of the bot naming it, newest first."""
    found: dict[str, list[PublishedPull]] = {}
    for item in sorted(_bot_pulls(client, upstream), key=lambda i: i["number"], reverse=True):
        body = item.get("body") or ""
        pull = PublishedPull(
            int(item["number"]), pull_state(item), item.get("html_url"), plan_fingerprint_in(body)
        )
        for value in fingerprints_in(body):
            key = class_key(value)
            if key is not None:
                found.setdefault(key, []).append(pull)
    return found


def published_classes(client: GitHubClient, upstream: str) -> dict[str, PublishedPull]:
    """``recipe:Class[@variant]`` -> the newest PR naming it."""
    return {key: pulls[0] for key, pulls in pulls_by_class(client, upstream).items()}


def pull_state(item: dict[str, Any]) -> str:
    """open / merged / closed, from an issue object of a PR or a PR object."""
    if item.get("state") == "open":
        return "open"
    merged = item.get("merged") or item.get("merged_at")
    merged = merged or (item.get("pull_request") or {}).get("merged_at")
    return "merged" if merged else "closed"


def _bot_pulls(client: GitHubClient, upstream: str) -> list[dict[str, Any]]:
    """The bot's PRs: those the token's login opened, and those carrying the bot's label whose
    head is on the fork. The label and the markers alone do not make a PR the bot's (a
    maintainer may label another PR, anyone may write the markers), and such a PR must not
    keep a class from ever being proposed. Without a fork configured, the label is taken."""
    labelled = {i["number"]: i for i in client.own_pulls(upstream, label=client.settings.label)}
    ours = {i["number"]: i for i in client.own_pulls(upstream)} if client.authenticated else {}
    fork_owner = client.settings.fork_owner
    for number, item in labelled.items():
        if number not in ours and (
            not fork_owner or _head_owner(client, upstream, number) == fork_owner
        ):
            ours[number] = item
    return list(ours.values())


def _head_owner(client: GitHubClient, upstream: str, number: int) -> str | None:
    head = client.get_pull(number, repo=upstream).get("head") or {}
    return (head.get("user") or {}).get("login") or (
        (head.get("repo") or {}).get("owner") or {}
    ).get("login")
