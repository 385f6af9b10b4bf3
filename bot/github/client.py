"""The GitHub edge: every REST/GraphQL call the bot makes goes through :class:`GitHubClient`.

It wraps PyGithub. Results come back as plain dicts shaped like GitHub's REST objects, so the
rest of the bot never holds a PyGithub object. Failures, of any library on the way (PyGithub,
requests, urllib3, http.client, socket, ssl), become one-line :class:`BotError`s with the
token redacted.

Retries. Reads (GET) are retried on 5xx and dropped connections inside PyGithub's urllib3
layer. Writes are never re-sent blind: GitHub may have acted on a POST/PATCH whose answer was a
5xx, a reset, a timeout or a cut-off body. Only a refusal that GitHub makes *before* acting
(429, a rate-limit 403) is retried by urllib3; any other failure of a write is followed by a
look at GitHub (the comments, the pulls, the labels...) and what is there is adopted before
anything is written again (:meth:`GitHubClient._write`). Every wait, Retry-After, a primary
limit's reset, a secondary limit's pause or backoff, comes out of one budget per client,
``BOT_GITHUB_MAX_WAIT`` seconds; a wait that does not fit is a one-line error (exit 2), and
since nothing was written the next run resumes cleanly.
"""

from __future__ import annotations

import http.client
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, TypeVar
from urllib.parse import quote

import requests
import urllib3.exceptions
from github import Auth, Github, GithubException, GithubRetry, UnknownObjectException
from requests.adapters import HTTPAdapter

from bot.config import GitHubSettings, github_settings
from bot.errors import BotError
from bot.redact import detach_library_handlers, redact

detach_library_handlers("github")  # PyGithub's own stderr handler, added when it was imported

_SEARCH_LIMIT = 100
_RUNS_LIMIT = 100  # runs of one workflow read when matching a marker
_NO_THROTTLE: dict[str, Any] = {"seconds_between_requests": None, "seconds_between_writes": None}


T = TypeVar("T")

# Failures after which a write may or may not have happened on GitHub.
NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    requests.RequestException,  # ConnectionError, Timeout, ChunkedEncodingError, ...
    urllib3.exceptions.HTTPError,  # ProtocolError, ReadTimeoutError, IncompleteRead, ...
    http.client.HTTPException,  # RemoteDisconnected, IncompleteRead, BadStatusLine
    ConnectionError,  # the socket's: reset, refused, aborted, broken pipe
    TimeoutError,  # socket.timeout
    socket.gaierror,  # name resolution
    ssl.SSLError,
)
_WRITE_ATTEMPTS = 3  # a write, then at most two more, each after a look at GitHub
_SECONDARY_RATE_WAIT = 60.0  # GitHub: wait at least a minute after a secondary limit


class GitHubWaitTooLong(BotError):
    """GitHub asked for a wait that does not fit in ``BOT_GITHUB_MAX_WAIT``."""


class WaitBudget:
    """Seconds this client may still spend waiting on GitHub (shared by all its requests)."""

    def __init__(self, seconds: float) -> None:
        self.left = seconds
        self._lock = threading.Lock()

    def spend(self, seconds: float, why: str) -> None:
        with self._lock:
            if seconds > self.left:
                raise GitHubWaitTooLong(
                    f"GitHub asked the bot to wait {seconds:.0f}s ({why}), more than is left of "
                    f"BOT_GITHUB_MAX_WAIT ({self.left:.0f}s); stopped before writing anything "
                    "more, run again later"
                )
            self.left -= seconds


class BoundedRetry(GithubRetry):
    """PyGithub's retry, with two changes that make it safe for writes and bounded in time.

    * 5xx and dropped connections are retried for reads only (``allowed_methods``); 429 and
      403 are retried for every method, because GitHub refuses those before acting (a 403
      that is not a rate limit still raises: ``GithubRetry.increment`` looks at the body).
    * Every sleep, Retry-After, a primary limit's ``X-RateLimit-Reset`` (also on a 429, which
      ``GithubRetry`` does not look at), a secondary limit's pause, backoff, is charged to the
      client's :class:`WaitBudget` first, and raises when it does not fit.
    """

    def __init__(self, *, wait_budget: WaitBudget, **kwargs: Any) -> None:
        self.wait_budget = wait_budget
        super().__init__(**kwargs)

    def new(self, **kw: Any) -> BoundedRetry:
        kw["wait_budget"] = self.wait_budget
        return super().new(**kw)  # type: ignore[return-value]

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if status_code in (403, 429):
            return bool(self.total)
        return super().is_retry(method, status_code, has_retry_after)

    def increment(self, *args: Any, **kwargs: Any) -> BoundedRetry:
        # Nobody at the other end (the name does not resolve, the port refuses): retrying
        # only makes the user wait, so the first such failure is the answer.
        error = kwargs.get("error") if "error" in kwargs else (args[3] if len(args) > 3 else None)
        if error is not None and unreachable(error):
            raise urllib3.exceptions.MaxRetryError(kwargs.get("_pool"), kwargs.get("url"), error)
        return super().increment(*args, **kwargs)

    def sleep(self, response: Any = None) -> None:
        wait, why = self.get_backoff_time(), "backoff"
        if response is not None:
            after = self.get_retry_after(response) if self.respect_retry_after_header else None
            if after is not None and after >= wait:
                wait, why = after, "Retry-After"
            reset = _reset_wait(response.headers)
            if reset is not None and reset >= wait:
                wait, why = reset, "primary rate limit until its reset"
        self.wait_budget.spend(wait, why)
        if wait > 0:
            time.sleep(wait)


class GitHubUnreachable(BotError):
    """GitHub's name does not resolve or its port refuses the connection."""


def unreachable(error: BaseException | None) -> bool:
    """Whether ``error`` (or an exception it wraps) is a name-resolution failure or a refused
    connection."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, (socket.gaierror, ConnectionRefusedError)):
            return True
        if isinstance(error, urllib3.exceptions.NameResolutionError):
            return True
        if isinstance(error, urllib3.exceptions.MaxRetryError):
            error = error.reason
        else:
            error = (
                error.__cause__
                or error.__context__
                or (
                    error.args[0]
                    if error.args and isinstance(error.args[0], BaseException)
                    else None
                )
            )
        seen += 1
    return False


def _name_error(exc: BaseException) -> bool:
    text = f"{exc!r} {exc}"
    return "NameResolutionError" in text or "gaierror" in text or "Name or service" in text


def _reset_wait(headers: Any) -> float | None:
    if str(headers.get("X-RateLimit-Remaining", "")).strip() != "0":
        return None
    reset = str(headers.get("X-RateLimit-Reset", "")).strip()
    if not reset.isdigit():
        return None
    return max(0.0, int(reset) - time.time() + 1)  # +1: the reset falls somewhere in that second


@dataclass(frozen=True)
class RetryPolicy:
    retries: int
    backoff_factor: float
    max_wait: float  # seconds; all waits of one client together (see WaitBudget)
    throttle: bool = True  # PyGithub's pacing (0.25 s between requests, 1 s between writes)
    timeout: int = 30  # seconds per request (connect and each read); PyGithub wants an int
    budget: WaitBudget = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "budget", WaitBudget(self.max_wait))

    @classmethod
    def from_env(cls) -> RetryPolicy:
        env = os.environ.get
        try:
            max_wait = float(env("BOT_GITHUB_MAX_WAIT", "120"))
            return cls(
                retries=int(env("BOT_GITHUB_RETRIES", "6")),
                backoff_factor=float(env("BOT_GITHUB_BACKOFF", "2")),
                max_wait=max_wait,
                throttle=env("BOT_GITHUB_THROTTLE", "1") != "0",
                timeout=max(1, int(env("BOT_GITHUB_TIMEOUT", "30"))),
            )
        except ValueError:
            raise BotError("BOT_GITHUB_RETRIES/BACKOFF/MAX_WAIT/TIMEOUT must be numbers") from None

    def urllib3_retry(self) -> BoundedRetry:
        return BoundedRetry(
            wait_budget=self.budget,
            total=self.retries,
            backoff_factor=self.backoff_factor,
            backoff_max=self.max_wait,
            # Retry-After is read uncapped so that the budget sees what GitHub asked for.
            retry_after_max=10**9,
            secondary_rate_wait=_SECONDARY_RATE_WAIT,
            status_forcelist=[*range(500, 600), 429],
            allowed_methods=frozenset({"GET", "HEAD", "OPTIONS"}),
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
            timeout=self._retry.timeout,
            per_page=100,
            lazy=True,  # objects are fetched when read, so no GET just to reach a sub-resource
            **({} if self._retry.throttle else _NO_THROTTLE),
        )

    def __repr__(self) -> str:
        return f"GitHubClient(api_url={self.settings.api_url!r})"

    def may_wait(self, seconds: float) -> bool:
        """Charge a wait outside any request (polling a lock) to the same budget as GitHub's
        waits; False, charging nothing, when it does not fit in ``BOT_GITHUB_MAX_WAIT``."""
        try:
            self._retry.budget.spend(seconds, "polling")
        except GitHubWaitTooLong:
            return False
        return True

    @property
    def authenticated(self) -> bool:
        return self._auth is not None

    def _write(
        self,
        action: str,
        write: Callable[[], T],
        look_again: Callable[[], T | None],
        *,
        refusals: tuple[int, ...] = (),
    ) -> T:
        """``write()``, never re-sent blind: after an answer that leaves unclear whether GitHub
        acted (5xx, reset, timeout, cut-off body), ``look_again()`` (reads only) and adopt
        what it finds; only when it finds nothing is the write sent again. A GitHub answer
        with a status in ``refusals`` raises :class:`_Refused` for the caller to judge."""
        detail = ""
        for _ in range(_WRITE_ATTEMPTS):
            try:
                with _unclear_or_raise(action, refusals):
                    return write()
            except _Unclear as unclear:
                detail = unclear.detail
            with _github_errors(f"{action}: looking again after {detail}"):
                found = look_again()
            if found is not None:
                return found
        raise _gave_up(action, detail)

    def _require_token(self, action: str) -> None:
        if self._auth is None:
            raise BotError(f"{action} needs a token: set GITHUB_TOKEN")

    def _repo(self, repo: str | None = None) -> Any:
        return self._gh.get_repo(repo or self.settings.upstream)

    @cached_property
    def login(self) -> str:
        # Actions' workflow token cannot read its own user: BOT_LOGIN names it instead.
        configured = os.environ.get("BOT_LOGIN", "").strip()
        if configured:
            return configured
        self._require_token("finding the bot's own login")
        with _github_errors("reading the authenticated user"):
            return self._gh.get_user().login

    def user_profile(self, login: str) -> dict[str, Any]:
        """``GET /users/{login}``: the account's public profile (id, name, public e-mail)."""
        with _github_errors(f"reading GitHub's profile of @{login}"):
            _, data = self._gh.requester.requestJsonAndCheck(
                "GET", f"/users/{quote(login, safe='')}"
            )
        return data if isinstance(data, dict) else {}

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
        me = self.login

        def created() -> dict[str, Any] | None:
            for issue in self._repo(repo).get_issues(state="open", creator=me):
                if issue.title == title and issue.body == body and not issue.pull_request:
                    return issue.raw_data
            return None

        return self._write(
            f"creating an issue in {repo}",
            lambda: (
                self._repo(repo).create_issue(title=title, body=body, labels=labels or []).raw_data
            ),
            created,
        )

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

        def edited() -> dict[str, Any] | None:
            now = self._repo(repo).get_issue(number).raw_data
            return now if all(now.get(k) == v for k, v in changes.items()) else None

        self._write(
            f"editing issue #{number} in {repo}",
            lambda: self._repo(repo).get_issue(number).edit(**changes) or True,
            edited,
        )
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
        action = f"reading the edit history of #{number} in {repo}"
        # GraphQL reads are POSTs, which urllib3 no longer re-sends; a query is safe to repeat.
        data = self._write(
            action,
            lambda: self._gh.requester.graphql_query(_ISSUE_BODY_HISTORY, variables)[1],
            lambda: None,
        )
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

    def search_issues(self, query: str, limit: int = _SEARCH_LIMIT) -> list[dict[str, Any]]:
        with _github_errors("searching issues"):
            found = []
            for issue in self._gh.search_issues(query):
                found.append(issue.raw_data)
                if len(found) >= limit:
                    break
            return found

    def search_count(self, query: str) -> int:
        """How many issues or PRs ``query`` finds (GitHub's total, one request)."""
        with _github_errors("searching issues"):
            return int(self._gh.search_issues(query).totalCount)

    def upsert_issue_comment(
        self, number: int, marker: str, body: str, repo: str | None = None
    ) -> tuple[str, str]:
        """The one comment of ours carrying ``marker``: created, edited, or left alone.

        Returns ``(html_url, "created" | "updated" | "unchanged")``. Only comments written by
        the bot's own login count, so a quoted marker in someone else's comment is ignored.
        """
        self._require_token("commenting")
        me = self.login
        action = f"commenting on #{number}"
        issue = self._repo(repo).get_issue(number)  # lazy: no request
        wrote, detail = "", ""
        # Each round looks first, so after an unclear answer the comment GitHub may have made
        # (or edited) is found and adopted instead of being written a second time.
        for _ in range(_WRITE_ATTEMPTS):
            with _github_errors(action):
                comment = next(
                    (
                        c
                        for c in issue.get_comments()
                        if c.user.login == me and marker in (c.body or "")
                    ),
                    None,
                )
            if comment is not None and comment.body == body:
                return comment.html_url, wrote or "unchanged"
            wrote = "created" if comment is None else "updated"
            try:
                with _unclear_or_raise(action):
                    if comment is None:
                        return issue.create_comment(body).html_url, wrote
                    comment.edit(body)
                    return comment.html_url, wrote
            except _Unclear as unclear:
                detail = unclear.detail
        raise _gave_up(action, detail)

    def add_labels(self, number: int, labels: list[str], repo: str | None = None) -> bool:
        """Labels where the token allows: False (not an error) when GitHub refuses."""
        self._require_token("labelling")

        def present() -> bool | None:
            names = {label.name for label in self._repo(repo).get_issue(number).labels}
            return True if set(labels) <= names else None

        try:
            return self._write(
                f"labelling #{number}",
                lambda: self._repo(repo).get_issue(number).add_to_labels(*labels) or True,
                present,
                refusals=(403, 404, 422),
            )
        except _Refused:
            return False

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

    def own_pulls(
        self, repo: str | None = None, *, state: str = "all", label: str | None = None
    ) -> list[dict[str, Any]]:
        """The bot's pull requests (author: the bot's login; or, with ``label``, carrying it),
        as issue objects (title, body, state, labels, ``pull_request``), every page read."""
        kwargs: dict[str, Any] = {"state": state}
        if label:
            kwargs["labels"] = [label]
        else:
            kwargs["creator"] = self.login
        with _github_errors("listing the bot's pull requests"):
            return [i.raw_data for i in self._repo(repo).get_issues(**kwargs) if i.pull_request]

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
        self,
        *,
        title: str,
        body: str,
        head: str,
        base: str,
        draft: bool,
        marker: str,
        repo: str | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """The open PR from ``head`` carrying ``marker`` in its body: ``(pull, adopted)``.

        ``adopted`` is True when the create request's answer was lost (5xx, reset, timeout,
        cut-off body) and the PR GitHub made anyway was found by looking again.
        """
        self._require_token("opening a pull request")
        action = f"opening a pull request from {head}"
        adopted = False

        def made() -> dict[str, Any] | None:
            nonlocal adopted
            found = [
                p
                for p in self.find_pulls(head, repo)
                if p.get("state") == "open" and marker in (p.get("body") or "")
            ]
            adopted = bool(found)
            return max(found, key=lambda p: p["number"]) if found else None

        try:
            pull = self._write(
                action,
                lambda: (
                    self._repo(repo)
                    .create_pull(title=title, body=body, head=head, base=base, draft=draft)
                    .raw_data
                ),
                made,
                refusals=(422,),
            )
        except _Refused as refused:
            if "already exists" in str(refused.exc.data):
                raise PullRequestExists(f"a pull request from {head} already exists") from None
            raise _as_bot_error(action, refused.exc) from None
        return pull, adopted

    def edit_pull(
        self, number: int, *, title: str, body: str, repo: str | None = None
    ) -> dict[str, Any]:
        self._require_token("editing a pull request")

        def edited() -> dict[str, Any] | None:
            now = self.get_pull(number, repo)
            return now if now.get("title") == title and now.get("body") == body else None

        self._write(
            f"editing pull request #{number}",
            lambda: self._repo(repo).get_pull(number).edit(title=title, body=body) or True,
            edited,
        )
        return self.get_pull(number, repo)

    def mark_ready_for_review(self, number: int, repo: str | None = None) -> None:
        """Draft -> ready. REST cannot do this; it is GraphQL's markPullRequestReadyForReview."""
        self._require_token("marking a pull request ready")

        def ready() -> bool | None:
            return True if not self.get_pull(number, repo).get("draft") else None

        self._write(
            f"marking pull request #{number} ready for review",
            lambda: self._repo(repo).get_pull(number).mark_ready_for_review() or True,
            ready,
        )

    def convert_to_draft(self, number: int, repo: str | None = None) -> None:
        """Ready -> draft: GraphQL's convertPullRequestToDraft (REST cannot do this either)."""
        self._require_token("marking a pull request as a draft")

        def draft() -> bool | None:
            return True if self.get_pull(number, repo).get("draft") else None

        self._write(
            f"marking pull request #{number} as a draft",
            lambda: self._repo(repo).get_pull(number).convert_to_draft() or True,
            draft,
        )

    # --- actions ------------------------------------------------------------------------

    def dispatch_workflow(
        self, repo: str, workflow_file: str, ref: str, inputs: dict[str, str]
    ) -> None:
        self._require_token("dispatching a workflow")
        action = f"dispatching {workflow_file} in {repo}"
        # Not re-sent after an unclear answer: a run appears some seconds after its dispatch,
        # so looking again cannot tell "not started" from "not listed yet".
        try:
            with _unclear_or_raise(action):
                workflow = self._repo(repo).get_workflow(workflow_file)
                workflow.create_dispatch(ref=ref, inputs=inputs, throw=True)
        except _Unclear as unclear:
            raise BotError(
                f"{action}: {unclear.detail}; the run may or may not have started, so it is "
                "not dispatched again"
            ) from None

    def find_workflow_run(
        self, repo: str, workflow_file: str, created_after: datetime, marker: str | None
    ) -> dict[str, Any] | None:
        """The newest ``workflow_dispatch`` run created at or after ``created_after`` whose
        display title contains ``marker`` (any such run when ``marker`` is None)."""
        runs = self.workflow_runs(repo, workflow_file, created_after, marker, limit=1)
        return runs[0] if runs else None

    def workflow_runs(
        self,
        repo: str,
        workflow_file: str,
        created_after: datetime,
        marker: str | None,
        limit: int = _RUNS_LIMIT,
    ) -> list[dict[str, Any]]:
        """The ``workflow_dispatch`` runs created at or after ``created_after`` whose display
        title contains ``marker`` (all when None), newest first, at most ``limit``."""
        since = created_after.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        found: list[dict[str, Any]] = []
        with _github_errors(f"listing runs of {workflow_file} in {repo}"):
            workflow = self._repo(repo).get_workflow(workflow_file)
            for run in workflow.get_runs(event="workflow_dispatch", created=f">={since}"):
                data = run.raw_data
                if marker is None or marker in (data.get("display_title") or ""):
                    found.append(data)
                    if len(found) >= limit:
                        break
        return found

    def branch_contains(self, repo: str, branch: str, sha: str) -> bool:
        """Whether ``sha`` is ``branch``'s head on ``repo`` or one of its ancestors."""
        with _github_errors(f"comparing {sha[:12]} with {branch} in {repo}"):
            _, data = self._gh.requester.requestJsonAndCheck(
                "GET", f"/repos/{repo}/compare/{quote(sha, safe='')}...{quote(branch, safe='/')}"
            )
        return isinstance(data, dict) and data.get("status") in ("identical", "ahead")

    def get_workflow_run(self, repo: str, run_id: int) -> dict[str, Any]:
        with _github_errors(f"reading run {run_id} in {repo}"):
            return self._repo(repo).get_workflow_run(run_id).raw_data

    def run_approvals(self, repo: str, run_id: int) -> list[dict[str, Any]]:
        """The deployment reviews of a workflow run (who approved which environment)."""
        url: str | None = f"/repos/{repo}/actions/runs/{int(run_id)}/approvals"
        found: list[dict[str, Any]] = []
        with _github_errors(f"reading the approvals of run {run_id} in {repo}"):
            while url and len(found) < _SEARCH_LIMIT:  # every page (GitHub's Link header)
                headers, data = self._gh.requester.requestJsonAndCheck("GET", url)
                found += [a for a in data or [] if isinstance(a, dict)]
                url = _next_page(headers)
        return found

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
        except NETWORK_ERRORS as exc:
            raise BotError(f"downloading an artifact failed: {network_detail(exc)}") from None
        finally:
            session.close()


_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


def _next_page(headers: Any) -> str | None:
    found = _NEXT.search(str((headers or {}).get("link") or ""))
    return found.group(1) if found else None


def _timestamp(value: object) -> datetime:
    """GitHub's ``2026-01-02T03:04:05Z``; anything unreadable counts as the epoch."""
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return datetime.fromtimestamp(0, UTC)


class _Unclear(Exception):
    """A write's answer was lost or was a 5xx: GitHub may or may not have acted."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class _Refused(Exception):
    def __init__(self, exc: GithubException) -> None:
        super().__init__(str(exc.status))
        self.exc = exc


@contextmanager
def _unclear_or_raise(action: str, refusals: tuple[int, ...] = ()) -> Iterator[None]:
    """Turn an ambiguous failure into :class:`_Unclear`, any other into a one-line error."""
    try:
        yield
    except GitHubWaitTooLong:
        raise
    except GithubException as exc:
        if exc.status in refusals:
            raise _Refused(exc) from None
        if exc.status >= 500 or exc.status < 0:
            raise _Unclear(f"GitHub answered {exc.status}") from None
        raise _one_line(action, exc) from None
    except NETWORK_ERRORS as exc:
        raise _Unclear(network_detail(exc)) from None


def _gave_up(action: str, detail: str) -> BotError:
    return BotError(f"{action} failed: {detail}, {_WRITE_ATTEMPTS} times; run again later")


def network_detail(exc: BaseException) -> str:
    """``ClassName: first line`` of a network error, token redacted, for a one-line message."""
    text = redact(f"{exc.__class__.__name__}: {exc}").splitlines()
    return (text[0] if text else exc.__class__.__name__)[:200]


@contextmanager
def _github_errors(action: str) -> Iterator[None]:
    try:
        yield
    except GitHubWaitTooLong:
        raise
    except GithubException as exc:
        raise _one_line(action, exc) from None
    except NETWORK_ERRORS as exc:
        if unreachable(exc):
            why = "its name does not resolve" if _name_error(exc) else "connection refused"
            raise GitHubUnreachable(f"{action}: GitHub is unreachable ({why})") from None
        raise BotError(
            f"{action}: GitHub unreachable or kept failing ({network_detail(exc)})"
        ) from None


def _one_line(action: str, exc: GithubException) -> BotError:
    if isinstance(exc, UnknownObjectException):
        return BotError(f"{action}: not found on GitHub")
    return _as_bot_error(action, exc)


def _as_bot_error(action: str, exc: GithubException) -> BotError:
    message = ""
    if isinstance(exc.data, dict):
        message = str(exc.data.get("message") or "")
    elif exc.data:
        message = str(exc.data)
    detail = redact(f"{exc.status} {message}".strip()).splitlines()[0][:200] if message else ""
    return BotError(f"{action} failed: GitHub answered {detail or exc.status}")
