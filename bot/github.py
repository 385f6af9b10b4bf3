"""The GitHub edge: every REST/GraphQL call the bot makes goes through :class:`GitHubClient`.

It wraps PyGithub. Results come back as plain dicts shaped like GitHub's REST objects, so the
rest of the bot never holds a PyGithub object. Failures become one-line :class:`BotError`s
with the token redacted. Transient faults (5xx, 429, 403 secondary rate limits with
``Retry-After``) are retried inside PyGithub's urllib3 layer with backoff, within a bound
set by ``BOT_GITHUB_RETRIES`` and ``BOT_GITHUB_MAX_WAIT``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

import requests
from github import Auth, Github, GithubException, GithubRetry, UnknownObjectException
from requests.adapters import HTTPAdapter

from bot.config import GitHubSettings, github_settings
from bot.errors import BotError
from bot.redact import redact

_SEARCH_LIMIT = 100
_NO_THROTTLE: dict[str, Any] = {"seconds_between_requests": None, "seconds_between_writes": None}


@dataclass(frozen=True)
class RetryPolicy:
    retries: int
    backoff_factor: float
    max_wait: float  # seconds; caps Retry-After, secondary-rate-limit waits and backoff
    throttle: bool = True  # PyGithub's pacing (0.25 s between requests, 1 s between writes)

    @classmethod
    def from_env(cls) -> RetryPolicy:
        env = os.environ.get
        try:
            return cls(
                retries=int(env("BOT_GITHUB_RETRIES", "6")),
                backoff_factor=float(env("BOT_GITHUB_BACKOFF", "2")),
                max_wait=float(env("BOT_GITHUB_MAX_WAIT", "120")),
                throttle=env("BOT_GITHUB_THROTTLE", "1") != "0",
            )
        except ValueError:
            raise BotError("BOT_GITHUB_RETRIES/BACKOFF/MAX_WAIT must be numbers") from None

    def urllib3_retry(self) -> GithubRetry:
        return GithubRetry(
            total=self.retries,
            backoff_factor=self.backoff_factor,
            backoff_max=self.max_wait,
            retry_after_max=int(self.max_wait),
            secondary_rate_wait=min(60.0, self.max_wait),
            status_forcelist=[*range(500, 600), 429],
            raise_on_status=False,
        )


@dataclass(frozen=True)
class BodyRevision:
    """One revision of an issue body (GraphQL ``UserContentEdit``)."""

    editor: str | None  # None when GitHub no longer knows the account
    edited_at: str
    body: str | None  # the whole body after this edit; None when GitHub withholds it


_ISSUE_BODY_HISTORY = """
query($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    issue(number: $number) {
      body
      userContentEdits(first: 100) {
        totalCount
        nodes { editedAt deletedAt diff editor { login } }
      }
    }
  }
}
"""


class PullRequestExists(BotError):
    """GitHub answered 422: an open pull request from this head already exists."""


class GitHubClient:
    def __init__(
        self,
        settings: GitHubSettings | None = None,
        *,
        token: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.settings = settings or github_settings()
        token = token if token is not None else self.settings.token
        self._auth = Auth.Token(token) if token else None
        self._retry = retry or RetryPolicy.from_env()
        self._gh = Github(
            base_url=self.settings.api_url,
            auth=self._auth,
            retry=self._retry.urllib3_retry(),
            timeout=30,
            per_page=100,
            lazy=True,  # objects are fetched when read, so no GET just to reach a sub-resource
            **({} if self._retry.throttle else _NO_THROTTLE),
        )

    def __repr__(self) -> str:
        return f"GitHubClient(api_url={self.settings.api_url!r})"

    @property
    def authenticated(self) -> bool:
        return self._auth is not None

    def _require_token(self, action: str) -> None:
        if self._auth is None:
            raise BotError(f"{action} needs a token: set GITHUB_TOKEN")

    def _repo(self, repo: str | None = None) -> Any:
        return self._gh.get_repo(repo or self.settings.upstream)

    @cached_property
    def login(self) -> str:
        self._require_token("finding the bot's own login")
        with _github_errors("reading the authenticated user"):
            return self._gh.get_user().login

    # --- issues -------------------------------------------------------------------------

    def get_issue(self, number: int, repo: str | None = None) -> dict[str, Any]:
        """The issue as GitHub's REST object, plus ``comments_list`` (each a REST comment)."""
        with _github_errors(f"reading issue #{number}"):
            issue = self._repo(repo).get_issue(number)
            data = dict(issue.raw_data)
            data["comments_list"] = [c.raw_data for c in issue.get_comments()]
        return data

    def create_issue(
        self, repo: str, title: str, body: str, labels: list[str] | None = None
    ) -> dict[str, Any]:
        self._require_token("creating an issue")
        with _github_errors(f"creating an issue in {repo}"):
            issue = self._repo(repo).create_issue(title=title, body=body, labels=labels or [])
            return issue.raw_data

    def edit_issue(
        self,
        repo: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: str | None = None,
    ) -> dict[str, Any]:
        self._require_token("editing an issue")
        changes = {k: v for k, v in {"title": title, "body": body, "state": state}.items() if v}
        with _github_errors(f"editing issue #{number} in {repo}"):
            self._repo(repo).get_issue(number).edit(**changes)
        with _github_errors(f"reading issue #{number} in {repo}"):
            return self._repo(repo).get_issue(number).raw_data

    def list_issues(
        self,
        repo: str,
        *,
        creator: str | None = None,
        labels: list[str] | None = None,
        state: str = "open",
    ) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {"state": state}
        if creator:
            kwargs["creator"] = creator
        if labels:
            kwargs["labels"] = labels
        with _github_errors(f"listing issues in {repo}"):
            return [i.raw_data for i in self._repo(repo).get_issues(**kwargs)]

    def issue_body_history(self, repo: str, number: int) -> tuple[str, list[BodyRevision]]:
        """The issue's body and its revisions, newest first (at most the last 100).

        REST does not say who edited a body; GraphQL's ``userContentEdits`` does. GitHub
        returns one node per revision, newest first, ``diff`` holding the whole body at that
        revision (observed behaviour; callers must fail closed when a revision is missing).
        """
        owner, _, name = repo.partition("/")
        variables = {"owner": owner, "name": name, "number": number}
        with _github_errors(f"reading the edit history of #{number} in {repo}"):
            _, data = self._gh.requester.graphql_query(_ISSUE_BODY_HISTORY, variables)
        issue = ((data.get("data") or {}).get("repository") or {}).get("issue")
        if not isinstance(issue, dict):
            raise BotError(f"reading the edit history of #{number} in {repo}: no such issue")
        nodes = ((issue.get("userContentEdits") or {}).get("nodes")) or []
        revisions = [
            BodyRevision(
                editor=(node.get("editor") or {}).get("login"),
                edited_at=str(node.get("editedAt") or ""),
                body=None if node.get("deletedAt") else node.get("diff"),
            )
            for node in nodes
            if isinstance(node, dict)
        ]
        return str(issue.get("body") or ""), revisions

    def search_issues(self, query: str) -> list[dict[str, Any]]:
        with _github_errors("searching issues"):
            found = []
            for issue in self._gh.search_issues(query):
                found.append(issue.raw_data)
                if len(found) >= _SEARCH_LIMIT:
                    break
            return found

    def upsert_issue_comment(
        self, number: int, marker: str, body: str, repo: str | None = None
    ) -> tuple[str, str]:
        """The one comment of ours carrying ``marker``: created, edited, or left alone.

        Returns ``(html_url, "created" | "updated" | "unchanged")``. Only comments written by
        the bot's own login count, so a quoted marker in someone else's comment is ignored.
        """
        self._require_token("commenting")
        me = self.login
        with _github_errors(f"commenting on #{number}"):
            issue = self._repo(repo).get_issue(number)
            for comment in issue.get_comments():
                if comment.user.login == me and marker in (comment.body or ""):
                    if comment.body == body:
                        return comment.html_url, "unchanged"
                    comment.edit(body)
                    return comment.html_url, "updated"
            return issue.create_comment(body).html_url, "created"

    def add_labels(self, number: int, labels: list[str], repo: str | None = None) -> bool:
        """Labels where the token allows: False (not an error) when GitHub refuses."""
        self._require_token("labelling")
        try:
            self._repo(repo).get_issue(number).add_to_labels(*labels)
        except GithubException as exc:
            if exc.status in (403, 404, 422):
                return False
            raise _as_bot_error(f"labelling #{number}", exc) from None
        return True

    # --- branches (the GPU runner's guard) -----------------------------------------------

    def branch_heads(self, repo: str, prefix: str) -> dict[str, str]:
        """Branch name -> head sha, for ``repo``'s branches whose names start with ``prefix``."""
        with _github_errors(f"listing the {prefix} branches of {repo}"):
            refs = self._repo(repo).get_git_matching_refs(f"heads/{prefix}")
            return {ref.ref.removeprefix("refs/heads/"): ref.object.sha for ref in refs}

    def commit_parents(self, repo: str, sha: str) -> list[str]:
        with _github_errors(f"reading commit {sha[:12]} of {repo}"):
            return [parent.sha for parent in self._repo(repo).get_commit(sha).parents]

    # --- pull requests ------------------------------------------------------------------

    def default_branch(self, repo: str | None = None) -> str:
        with _github_errors(f"reading {repo or self.settings.upstream}"):
            return self._gh.get_repo(repo or self.settings.upstream).default_branch

    def find_pulls(self, head: str, repo: str | None = None) -> list[dict[str, Any]]:
        """Pull requests in any state from ``head`` (``owner:branch``)."""
        with _github_errors(f"listing pull requests from {head}"):
            return [p.raw_data for p in self._repo(repo).get_pulls(state="all", head=head)]

    def pulls_created_since(
        self,
        since: datetime,
        *,
        head_owner: str | None,
        author: str | None,
        repo: str | None = None,
    ) -> list[dict[str, Any]]:
        """Pull requests (any state) created at or after ``since`` whose head is on
        ``head_owner``'s fork or whose author is ``author``, newest first."""
        found = []
        with _github_errors("listing recent pull requests"):
            pulls = self._repo(repo).get_pulls(state="all", sort="created", direction="desc")
            for pull in pulls:
                data = pull.raw_data
                if _timestamp(data.get("created_at")) < since:
                    break  # newest first: everything after is older
                head_label = str((data.get("head") or {}).get("label") or "")
                by_author = author is not None and (data.get("user") or {}).get("login") == author
                if (head_owner and head_label.startswith(f"{head_owner}:")) or by_author:
                    found.append(data)
        return found

    def get_pull(self, number: int, repo: str | None = None) -> dict[str, Any]:
        with _github_errors(f"reading pull request #{number}"):
            return self._repo(repo).get_pull(number).raw_data

    def create_pull(
        self, *, title: str, body: str, head: str, base: str, draft: bool, repo: str | None = None
    ) -> dict[str, Any]:
        self._require_token("opening a pull request")
        try:
            pull = self._repo(repo).create_pull(
                title=title, body=body, head=head, base=base, draft=draft
            )
        except GithubException as exc:
            if exc.status == 422 and "already exists" in str(exc.data):
                raise PullRequestExists(f"a pull request from {head} already exists") from None
            raise _as_bot_error(f"opening a pull request from {head}", exc) from None
        return pull.raw_data

    def edit_pull(
        self, number: int, *, title: str, body: str, repo: str | None = None
    ) -> dict[str, Any]:
        self._require_token("editing a pull request")
        with _github_errors(f"editing pull request #{number}"):
            self._repo(repo).get_pull(number).edit(title=title, body=body)
        return self.get_pull(number, repo)

    def mark_ready_for_review(self, number: int, repo: str | None = None) -> None:
        """Draft -> ready. REST cannot do this; it is GraphQL's markPullRequestReadyForReview."""
        self._require_token("marking a pull request ready")
        with _github_errors(f"marking pull request #{number} ready for review"):
            self._repo(repo).get_pull(number).mark_ready_for_review()

    # --- actions ------------------------------------------------------------------------

    def dispatch_workflow(
        self, repo: str, workflow_file: str, ref: str, inputs: dict[str, str]
    ) -> None:
        self._require_token("dispatching a workflow")
        with _github_errors(f"dispatching {workflow_file} in {repo}"):
            workflow = self._repo(repo).get_workflow(workflow_file)
            workflow.create_dispatch(ref=ref, inputs=inputs, throw=True)

    def find_workflow_run(
        self, repo: str, workflow_file: str, created_after: datetime, marker: str | None
    ) -> dict[str, Any] | None:
        """The newest ``workflow_dispatch`` run created at or after ``created_after`` whose
        display title contains ``marker`` (any such run when ``marker`` is None)."""
        since = created_after.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with _github_errors(f"listing runs of {workflow_file} in {repo}"):
            workflow = self._repo(repo).get_workflow(workflow_file)
            for run in workflow.get_runs(event="workflow_dispatch", created=f">={since}"):
                data = run.raw_data
                if marker is None or marker in (data.get("display_title") or ""):
                    return data
        return None

    def get_workflow_run(self, repo: str, run_id: int) -> dict[str, Any]:
        with _github_errors(f"reading run {run_id} in {repo}"):
            return self._repo(repo).get_workflow_run(run_id).raw_data

    def download_run_artifact(self, repo: str, run_id: int, name: str) -> bytes:
        """The artifact's zip archive, as bytes."""
        self._require_token("downloading artifacts")
        with _github_errors(f"listing artifacts of run {run_id}"):
            artifacts = list(self._repo(repo).get_workflow_run(run_id).get_artifacts())
        wanted = next((a for a in artifacts if a.name == name), None)
        if wanted is None:
            raise BotError(f"run {run_id} has no artifact named {name!r}")
        return self._download(wanted.archive_download_url)

    def _download(self, url: str) -> bytes:
        # PyGithub decodes bodies as text, so binary downloads go through requests, with the
        # same retry policy. The API answers with a redirect to blob storage; the token is
        # only sent to the API host (requests drops Authorization on a cross-host redirect,
        # and we follow the redirect ourselves without it).
        assert self._auth is not None
        session = requests.Session()
        session.mount("http://", HTTPAdapter(max_retries=self._retry.urllib3_retry()))
        session.mount("https://", HTTPAdapter(max_retries=self._retry.urllib3_retry()))
        headers = {"Accept": "application/vnd.github+json"}
        auth_headers = {**headers, "Authorization": f"{self._auth.token_type} {self._auth.token}"}
        try:
            response = session.get(url, headers=auth_headers, allow_redirects=False, timeout=60)
            if response.status_code in (301, 302, 303, 307, 308):
                location = response.headers["Location"]
                response = session.get(location, headers=headers, timeout=300)
            if response.status_code != 200:
                raise BotError(f"downloading an artifact failed: HTTP {response.status_code}")
            return response.content
        except requests.RequestException as exc:
            detail = redact(f"{exc.__class__.__name__}: {exc}").splitlines()[0][:200]
            raise BotError(f"downloading an artifact failed: {detail}") from None
        finally:
            session.close()


def _timestamp(value: object) -> datetime:
    """GitHub's ``2026-01-02T03:04:05Z``; anything unreadable counts as the epoch."""
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return datetime.fromtimestamp(0, UTC)


@contextmanager
def _github_errors(action: str) -> Iterator[None]:
    try:
        yield
    except UnknownObjectException:
        raise BotError(f"{action}: not found on GitHub") from None
    except GithubException as exc:
        raise _as_bot_error(action, exc) from None
    except requests.RequestException as exc:
        detail = redact(f"{exc.__class__.__name__}: {exc}").splitlines()[0][:200]
        raise BotError(f"{action}: GitHub unreachable or kept failing ({detail})") from None


def _as_bot_error(action: str, exc: GithubException) -> BotError:
    message = ""
    if isinstance(exc.data, dict):
        message = str(exc.data.get("message") or "")
    elif exc.data:
        message = str(exc.data)
    detail = redact(f"{exc.status} {message}".strip()).splitlines()[0][:200] if message else ""
    return BotError(f"{action} failed: GitHub answered {detail or exc.status}")
