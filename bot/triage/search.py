"""`bot triage`: find open upstream issues of the known class and record them as candidates.

Issues are found two ways: by the error messages the vLLM tree raises when a model lacks the
EAGLE-3 interface (read from the tree, see ``bot.tree.signatures``), and by the label the
GitHub Action applies. Each one found is then read by triage (:mod:`bot.triage.issue`, which treats
the text as data) and recorded in the journal with the class it names, if it names one clearly:
that is the demand ``bot scan`` orders its findings by (:mod:`bot.scan.priority`); the pipeline
records it (:func:`bot.pipeline.record_demand`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.config import GitHubSettings, github_settings, home_dir
from bot.fileio import write_atomic
from bot.github.client import GitHubClient, RetryPolicy
from bot.tree.signatures import error_signatures

if TYPE_CHECKING:
    pass

_MIN_SIGNATURE = 12  # shorter prefixes match too much unrelated text
# Triage is a read-only sweep that runs again on schedule: a GitHub that does not answer within
# a few short retries is reported (one line, exit 2) rather than waited out.
TRIAGE_RETRIES = 2
TRIAGE_MAX_WAIT = 5.0
TRIAGE_BACKOFF = 0.5


def triage_retry_policy() -> RetryPolicy:
    """The environment's policy (BOT_GITHUB_*), capped to triage's bounds."""
    policy = RetryPolicy.from_env()
    return RetryPolicy(
        retries=min(policy.retries, TRIAGE_RETRIES),
        backoff_factor=min(policy.backoff_factor, TRIAGE_BACKOFF),
        max_wait=min(policy.max_wait, TRIAGE_MAX_WAIT),
        throttle=policy.throttle,
    )


@dataclass(frozen=True)
class Candidate:
    number: int
    title: str
    html_url: str
    matched_by: tuple[str, ...]


def search_queries(tree: Path, settings: GitHubSettings) -> list[str]:
    scope = f"repo:{settings.upstream} is:issue is:open"
    prefixes = sorted(
        {
            s.message_prefix.replace('"', " ").strip()
            for s in error_signatures(tree)
            if len(s.message_prefix.strip()) >= _MIN_SIGNATURE
        }
    )
    return [f'{scope} "{prefix}"' for prefix in prefixes] + [f'{scope} label:"{settings.label}"']


def find_candidates(
    tree: Path, client: GitHubClient | None = None, settings: GitHubSettings | None = None
) -> list[Candidate]:
    return [candidate for candidate, _ in find_issues(tree, client, settings)]


def find_issues(
    tree: Path, client: GitHubClient | None = None, settings: GitHubSettings | None = None
) -> list[tuple[Candidate, dict[str, Any]]]:
    """Each open upstream issue the queries match, once, with the issue as GitHub returned it."""
    settings = settings or github_settings()
    client = client or GitHubClient(settings, retry=triage_retry_policy())
    found: dict[int, tuple[dict[str, Any], list[str]]] = {}
    for query in search_queries(tree, settings):
        for issue in client.search_issues(query):
            if "pull_request" in issue:
                continue
            found.setdefault(issue["number"], (issue, []))[1].append(query)
    return [
        (Candidate(number, issue["title"], issue["html_url"], tuple(queries)), issue)
        for number, (issue, queries) in sorted(found.items())
    ]


def demand(
    found: list[tuple[Candidate, dict[str, Any]]], tree: Path
) -> list[tuple[dict[str, Any], str | None]]:
    """Triage each issue: the class it clearly names (the ``propose`` outcome), or none (a
    question or an unrelated issue is no demand)."""
    from bot.drafts import load_catalogue
    from bot.hub import Hub
    from bot.triage.issue import PROPOSE, triage_issue

    catalogue = load_catalogue()
    hub = Hub()
    named = []
    for _, issue in found:
        triage = triage_issue(issue, tree, catalogue, checkpoints=hub)
        named.append((issue, triage.architecture if triage.outcome == PROPOSE else None))
    return named


def candidates_path() -> Path:
    """Where candidates are kept until the journal (bot/journal/store.py) takes over:
    re-point here."""
    return home_dir() / "triage-candidates.json"


def record_candidates(candidates: list[Candidate]) -> Path:
    """Merge into the candidates file by issue number; written atomically."""
    path = candidates_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        known = {c["number"]: c for c in json.loads(path.read_text(encoding="utf-8"))}
    except (OSError, ValueError, TypeError, KeyError):
        known = {}
    for candidate in candidates:
        known[candidate.number] = asdict(candidate) | {"matched_by": list(candidate.matched_by)}
    rows = [known[n] for n in sorted(known)]
    write_atomic(path, json.dumps(rows, indent=2, ensure_ascii=True) + "\n")
    return path
