"""The REST (and one GraphQL) endpoints the bot uses, answering in GitHub's shapes and codes.

Each route takes ``(state, request, match)`` and returns ``(status, json_body, headers)``.
Callers hold ``state.lock``.
"""

from __future__ import annotations

import collections
import re
import shlex
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import graphql_api
from .state import Run, State, now_iso

Response = tuple[int, Any, dict[str, str]]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    login: str | None


class HttpError(Exception):
    def __init__(self, status: int, message: str, errors: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors


def _issue(state: State, repo: str, number: int) -> dict[str, Any]:
    item = state.issues.get((repo, number))
    if item is None:
        raise HttpError(404, "Not Found")
    return item


def _repo_name(match: re.Match[str]) -> str:
    name = f"{match['owner']}/{match['repo']}"
    return name


def _require_repo(state: State, match: re.Match[str]) -> str:
    name = _repo_name(match)
    if name not in state.repos:
        raise HttpError(404, "Not Found")
    return name


def _require_login(request: Request) -> str:
    if request.login is None:
        raise HttpError(401, "Requires authentication")
    return request.login


def new_number(state: State, repo: str) -> int:
    counter = state.numbers.setdefault(repo, iter(range(1, 10**6)))  # type: ignore[arg-type]
    number = next(counter)
    while (repo, number) in state.issues:
        number = next(counter)
    return number


# --- users and repositories -----------------------------------------------------------------


def get_user(state: State, request: Request, match: re.Match[str]) -> Response:
    return 200, state.profile_json(_require_login(request)), {}


def get_named_user(state: State, request: Request, match: re.Match[str]) -> Response:
    login = match["login"]
    if login not in state.profiles and login not in state.tokens.values():
        raise HttpError(404, "Not Found")
    return 200, state.profile_json(login), {}


def get_user_emails(state: State, request: Request, match: re.Match[str]) -> Response:
    """The token user's addresses; 404 for a user whose token may not read them (GitHub
    answers 404 to a token without the ``user:email`` scope)."""
    emails = state.profiles.get(_require_login(request), {}).get("emails")
    if emails is None:
        raise HttpError(404, "Not Found")
    return 200, [{"visibility": None, **e} for e in emails], {}


def get_repo(state: State, request: Request, match: re.Match[str]) -> Response:
    return 200, state.repo_json(_require_repo(state, match)), {}


# --- issues ---------------------------------------------------------------------------------


def get_issue(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    _issue(state, repo, int(match["number"]))
    return 200, state.issue_json(repo, int(match["number"])), {}


def list_issues(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    wanted_state = request.query.get("state", "open")
    creator = request.query.get("creator")
    labels = [x for x in request.query.get("labels", "").split(",") if x]
    found = []
    for (item_repo, number), item in sorted(state.issues.items()):
        if item_repo != repo:
            continue
        if wanted_state != "all" and item["state"] != wanted_state:
            continue
        if creator and item["user"] != creator:
            continue
        if any(label not in item["labels"] for label in labels):
            continue
        found.append(state.issue_json(repo, number))
    return 200, found, {}


def create_issue(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    login = _require_login(request)
    body = request.body or {}
    if not body.get("title"):
        raise HttpError(422, "Validation Failed", [{"field": "title", "code": "missing_field"}])
    number = new_number(state, repo)
    state.issues[(repo, number)] = {
        "id": next(state.ids),
        "title": body["title"],
        "body": body.get("body"),
        "state": "open",
        "user": login,
        "labels": list(body.get("labels") or []),
        "created_at": now_iso(),
        "updated_at": now_iso(),
    }
    return 201, state.issue_json(repo, number), {}


def edit_issue(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    _require_login(request)
    item = _issue(state, repo, int(match["number"]))
    body = request.body or {}
    if "body" in body:
        graphql_api.record_body_edit(item, request.login or "", body["body"], now_iso())
    for key in ("title", "body", "state"):
        if key in body:
            item[key] = body[key]
    if "labels" in body:
        item["labels"] = list(body["labels"])
    item["updated_at"] = now_iso()
    return 200, state.issue_json(repo, int(match["number"])), {}


def add_labels(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    _require_login(request)
    item = _issue(state, repo, int(match["number"]))
    names = request.body if isinstance(request.body, list) else request.body.get("labels", [])
    if any(name in state.forbidden_labels for name in names):
        raise HttpError(403, "Resource not accessible by integration")
    for name in names:
        if name not in item["labels"]:
            item["labels"].append(name)
    return 200, [state.label_json(repo, name) for name in item["labels"]], {}


def list_comments(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    number = int(match["number"])
    _issue(state, repo, number)
    found = [
        state.comment_json(cid)
        for cid, comment in sorted(state.comments.items())
        if comment["issue"] == (repo, number)
    ]
    return 200, found, {}


def create_comment(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    login = _require_login(request)
    number = int(match["number"])
    _issue(state, repo, number)
    comment_id = next(state.ids)
    state.comments[comment_id] = {
        "issue": (repo, number),
        "body": (request.body or {}).get("body", ""),
        "user": login,
        "created_at": now_iso(),
        "updated_at": now_iso(),
    }
    return 201, state.comment_json(comment_id), {}


def get_comment(state: State, request: Request, match: re.Match[str]) -> Response:
    comment_id = int(match["id"])
    if comment_id not in state.comments:
        raise HttpError(404, "Not Found")
    return 200, state.comment_json(comment_id), {}


def edit_comment(state: State, request: Request, match: re.Match[str]) -> Response:
    login = _require_login(request)
    comment = state.comments.get(int(match["id"]))
    if comment is None:
        raise HttpError(404, "Not Found")
    if comment["user"] != login:
        raise HttpError(403, "Must have admin rights to Repository.")
    comment["body"] = (request.body or {}).get("body", comment["body"])
    comment["updated_at"] = now_iso()
    return 200, state.comment_json(int(match["id"])), {}


# --- pull requests --------------------------------------------------------------------------


def list_pulls(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    wanted_state = request.query.get("state", "open")
    head = request.query.get("head")
    found = []
    for (item_repo, number), item in sorted(state.issues.items()):
        pull = item.get("pull")
        if item_repo != repo or not pull:
            continue
        if wanted_state != "all" and item["state"] != wanted_state:
            continue
        if head and f"{pull['head_repo'].split('/')[0]}:{pull['head_ref']}" != head:
            continue
        found.append(state.pull_json(repo, number))
    if request.query.get("sort") == "created":
        found.sort(key=lambda p: (p["created_at"], p["number"]))
    if request.query.get("direction") == "desc":
        found.reverse()
    return 200, found, {}


# GitHub's limit on an issue or PR body, in characters.
BODY_LIMIT = 65536


def create_pull(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    login = _require_login(request)
    body = request.body or {}
    head = body.get("head", "")
    owner, _, ref = head.partition(":")
    if not ref:
        owner, ref = state.repos[repo].owner, head
    head_repo = f"{owner}/{state.repos[repo].name}"
    head_sha = state.branch_sha(head_repo, ref) if head_repo in state.repos else None
    if head_sha is None:
        raise HttpError(422, "Validation Failed", [{"field": "head", "code": "invalid"}])
    if len(str(body.get("body") or "")) > BODY_LIMIT:
        message = f"body is too long (maximum is {BODY_LIMIT} characters)"
        raise HttpError(
            422,
            "Validation Failed",
            [{"resource": "Issue", "field": "body", "code": "custom", "message": message}],
        )
    for (item_repo, _), item in state.issues.items():
        pull = item.get("pull")
        if (
            item_repo == repo
            and pull
            and item["state"] == "open"
            and pull["head_repo"] == head_repo
            and pull["head_ref"] == ref
        ):
            message = f"A pull request already exists for {owner}:{ref}."
            raise HttpError(
                422,
                "Validation Failed",
                [{"resource": "PullRequest", "code": "custom", "message": message}],
            )
    number = new_number(state, repo)
    state.issues[(repo, number)] = {
        "id": next(state.ids),
        "title": body.get("title", ""),
        "body": body.get("body"),
        "state": "open",
        "user": login,
        "labels": [],
        "created_at": now_iso(),
        "updated_at": now_iso(),
        "pull": {
            "head_repo": head_repo,
            "head_ref": ref,
            "head_sha": head_sha,
            "base_ref": body.get("base", state.repos[repo].default_branch),
            "draft": bool(body.get("draft", False)),
            "merged_at": None,
        },
    }
    return 201, state.pull_json(repo, number), {}


def _pull(state: State, match: re.Match[str]) -> tuple[str, int, dict[str, Any]]:
    repo = _require_repo(state, match)
    number = int(match["number"])
    item = _issue(state, repo, number)
    if not item.get("pull"):
        raise HttpError(404, "Not Found")
    return repo, number, item


def get_pull(state: State, request: Request, match: re.Match[str]) -> Response:
    repo, number, _ = _pull(state, match)
    return 200, state.pull_json(repo, number), {}


def edit_pull(state: State, request: Request, match: re.Match[str]) -> Response:
    _require_login(request)
    repo, number, item = _pull(state, match)
    body = request.body or {}
    if len(str(body.get("body") or "")) > BODY_LIMIT:
        message = f"body is too long (maximum is {BODY_LIMIT} characters)"
        raise HttpError(422, "Validation Failed", [{"field": "body", "message": message}])
    for key in ("title", "body", "state"):
        if key in body:
            item[key] = body[key]
    item["updated_at"] = now_iso()
    return 200, state.pull_json(repo, number), {}


_GRAPHQL_READY = re.compile(r"\b(markPullRequestReadyForReview|convertPullRequestToDraft)\s*\(")


def graphql(state: State, request: Request, match: re.Match[str]) -> Response:
    _require_login(request)
    query = (request.body or {}).get("query", "")
    mutation = _GRAPHQL_READY.search(query)
    if not mutation:
        return 200, graphql_api.execute(state, query, request.body.get("variables")), {}
    name = mutation.group(1)
    draft = name == "convertPullRequestToDraft"
    node_id = request.body["variables"]["input"]["pullRequestId"]
    for item in state.issues.values():
        if item.get("pull") and f"PR_{item['id']}" == node_id:
            item["pull"]["draft"] = draft
            result = {"clientMutationId": None, "pullRequest": {"isDraft": draft}}
            return 200, {"data": {name: result}}, {}
    error = {"type": "NOT_FOUND", "message": f"Could not resolve to a node with id {node_id}"}
    return 200, {"errors": [error]}, {}


# --- search ---------------------------------------------------------------------------------


def search_issues(state: State, request: Request, match: re.Match[str]) -> Response:
    """GitHub's issue search, as far as the bot uses it: qualifiers (``repo:``, ``is:``,
    ``label:``, ``author:``, ``state:``, ``in:``), and words that must all appear in the title
    or body, ``a OR b`` meaning either (``is:merged`` is a closed PR that was merged)."""
    terms = shlex.split(request.query.get("q", ""))
    filters: dict[str, list[str]] = {}
    groups: list[list[str]] = []
    joined = False
    for term in terms:
        key, sep, value = term.partition(":")
        if sep and key in {"repo", "is", "label", "author", "state", "in"}:
            filters.setdefault(key, []).append(value)
        elif term == "OR" and groups:
            joined = True
        elif joined:
            groups[-1].append(term.lower())
            joined = False
        else:
            groups.append([term.lower()])
    found = []
    for (repo, number), item in sorted(state.issues.items()):
        pull = item.get("pull")
        kinds = {"pr" if pull else "issue", item["state"]}
        if pull and pull.get("merged_at"):
            kinds.add("merged")
        if "repo" in filters and repo not in filters["repo"]:
            continue
        if any(kind not in kinds for kind in filters.get("is", [])):
            continue
        if any(s != item["state"] for s in filters.get("state", [])):
            continue
        if any(label not in item["labels"] for label in filters.get("label", [])):
            continue
        if any(author != item["user"] for author in filters.get("author", [])):
            continue
        text = f"{item['title']}\n{item['body'] or ''}".lower()
        if any(not any(word in text for word in group) for group in groups):
            continue
        found.append(state.issue_json(repo, number))
    return 200, {"total_count": len(found), "incomplete_results": False, "items": found}, {}


# --- actions --------------------------------------------------------------------------------


def get_workflow(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    file = match["file"]
    workflow_id = abs(hash(file)) % 10**6
    return (
        200,
        {
            "id": workflow_id,
            "node_id": f"W_{workflow_id}",
            "name": file,
            "path": f".github/workflows/{file}",
            "state": "active",
            "url": f"{state.base_url}/repos/{repo}/actions/workflows/{file}",
            "html_url": f"{state.web_url}/{repo}/actions/workflows/{file}",
            "badge_url": f"{state.web_url}/{repo}/workflows/{file}/badge.svg",
            "created_at": now_iso(),
            "updated_at": now_iso(),
        },
        {},
    )


def dispatch_workflow(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    _require_login(request)
    body = request.body or {}
    if not body.get("ref"):
        raise HttpError(422, "Invalid request: ref is required")
    inputs = {str(k): str(v) for k, v in (body.get("inputs") or {}).items()}
    file = match["file"]
    template = state.run_name_templates.get((repo, file))
    # An input the dispatch leaves out renders as its default ("" for the optional ones).
    title = template.format_map(collections.defaultdict(str, inputs)) if template else file
    head_sha = state.dispatched_sha(repo, body["ref"])
    if head_sha is None:
        raise HttpError(422, f"No ref found for: {body['ref']}")
    ref = body["ref"].removeprefix("refs/heads/").removeprefix("refs/tags/")
    run = Run(next(state.ids), repo, file, ref, inputs, title, now_iso(), head_sha=head_sha)
    state.runs[run.id] = run
    return 204, None, {}


def compare(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    status = state.compare_status(repo, match["base"], match["head"])
    if status is None:
        raise HttpError(404, "Not Found")
    return 200, {"status": status, "url": f"{state.base_url}/repos/{repo}/compare"}, {}


def list_runs(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    if state.unlisted_run_listings > 0:
        state.unlisted_run_listings -= 1
        return 200, {"total_count": 0, "workflow_runs": []}, {}
    event = request.query.get("event")
    created = request.query.get("created", "")
    after = created[2:] if created.startswith(">=") else ""
    runs = [
        state.run_json(run)
        for run in sorted(state.runs.values(), key=lambda r: -r.id)
        if run.repo == repo
        and (event in (None, "workflow_dispatch"))
        and (match.groupdict().get("file") in (None, run.workflow_file))
        and run.created_at >= after
    ]
    return 200, {"total_count": len(runs), "workflow_runs": runs}, {}


def _run(state: State, match: re.Match[str]) -> Run:
    repo = _require_repo(state, match)
    run = state.runs.get(int(match["id"]))
    if run is None or run.repo != repo:
        raise HttpError(404, "Not Found")
    return run


def get_run(state: State, request: Request, match: re.Match[str]) -> Response:
    return 200, state.run_json(_run(state, match)), {}


def run_approvals(state: State, request: Request, match: re.Match[str]) -> Response:
    _require_repo(state, match)
    found = state.approvals.get(int(match["id"]), [])
    return (
        200,
        [
            {
                "state": a["state"],
                "comment": a.get("comment", ""),
                "environments": [{"id": 1, "name": a["environment"]}],
                "user": {"login": a["user"], "id": 1, "type": "User"},
            }
            for a in found
        ],
        {},
    )


def list_artifacts(state: State, request: Request, match: re.Match[str]) -> Response:
    run = _run(state, match)
    artifacts = [state.artifact_json(run, name) for name in run.artifacts]
    return 200, {"total_count": len(artifacts), "artifacts": artifacts}, {}


def artifact_zip(state: State, request: Request, match: re.Match[str]) -> Response:
    _require_login(request)
    artifact_id = int(match["id"])
    for run in state.runs.values():
        if artifact_id in run.artifact_ids.values():
            # Like GitHub: a redirect to short-lived blob storage that needs no token.
            location = f"{state.web_url}/_blobs/artifacts/{artifact_id}.zip"
            return 302, None, {"Location": location}
    raise HttpError(404, "Not Found")


# --- git refs and commits (from the bare repository standing in for the remote) -------------


def matching_refs(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    prefix = "refs/" + urllib.parse.unquote(match["ref"])  # PyGithub sends heads%2Fbot%2F
    return 200, [r for r in state.refs_json(repo) if r["ref"].startswith(prefix)], {}


def get_commit(state: State, request: Request, match: re.Match[str]) -> Response:
    repo = _require_repo(state, match)
    found = state.commit_json(repo, match["sha"])
    if found is None:
        raise HttpError(422, f"No commit found for SHA: {match['sha']}")
    return 200, found, {}


def blob(state: State, request: Request, match: re.Match[str]) -> Response:
    artifact_id = int(match["id"])
    for run in state.runs.values():
        for name, known in run.artifact_ids.items():
            if known == artifact_id:
                return 200, run.artifacts[name], {"Content-Type": "application/zip"}
    raise HttpError(404, "Not Found")


_REPO = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
Route = tuple[str, re.Pattern[str], Callable[[State, Request, re.Match[str]], Response]]
ROUTES: list[Route] = [
    (m, re.compile(p + r"$"), f)
    for m, p, f in [
        ("GET", "/user", get_user),
        ("GET", "/user/emails", get_user_emails),
        ("GET", r"/users/(?P<login>[A-Za-z0-9-]+)", get_named_user),
        ("GET", _REPO, get_repo),
        ("GET", _REPO + r"/issues", list_issues),
        ("POST", _REPO + r"/issues", create_issue),
        ("GET", _REPO + r"/issues/comments/(?P<id>\d+)", get_comment),
        ("PATCH", _REPO + r"/issues/comments/(?P<id>\d+)", edit_comment),
        ("GET", _REPO + r"/issues/(?P<number>\d+)", get_issue),
        ("PATCH", _REPO + r"/issues/(?P<number>\d+)", edit_issue),
        ("POST", _REPO + r"/issues/(?P<number>\d+)/labels", add_labels),
        ("GET", _REPO + r"/issues/(?P<number>\d+)/comments", list_comments),
        ("POST", _REPO + r"/issues/(?P<number>\d+)/comments", create_comment),
        ("GET", _REPO + r"/pulls", list_pulls),
        ("POST", _REPO + r"/pulls", create_pull),
        ("GET", _REPO + r"/pulls/(?P<number>\d+)", get_pull),
        ("PATCH", _REPO + r"/pulls/(?P<number>\d+)", edit_pull),
        ("GET", _REPO + r"/git/matching-refs/(?P<ref>.*)", matching_refs),
        ("GET", _REPO + r"/commits/(?P<sha>[^/]+)", get_commit),
        ("GET", "/search/issues", search_issues),
        ("GET", _REPO + r"/actions/workflows/(?P<file>[^/]+)", get_workflow),
        ("POST", _REPO + r"/actions/workflows/(?P<file>[^/]+)/dispatches", dispatch_workflow),
        ("GET", _REPO + r"/actions/workflows/(?P<file>[^/]+)/runs", list_runs),
        ("GET", _REPO + r"/actions/runs", list_runs),
        ("GET", _REPO + r"/actions/runs/(?P<id>\d+)", get_run),
        ("GET", _REPO + r"/compare/(?P<base>[\w.-]+?)\.\.\.(?P<head>[\w./-]+)", compare),
        ("GET", _REPO + r"/actions/runs/(?P<id>\d+)/artifacts", list_artifacts),
        ("GET", _REPO + r"/actions/runs/(?P<id>\d+)/approvals", run_approvals),
        ("GET", _REPO + r"/actions/artifacts/(?P<id>\d+)/zip", artifact_zip),
    ]
]
# Outside the API prefix: GraphQL (as GitHub Enterprise lays it out) and blob storage.
RAW_ROUTES: list[Route] = [
    ("POST", re.compile(r"/api/graphql$"), graphql),
    ("GET", re.compile(r"/_blobs/artifacts/(?P<id>\d+)\.zip$"), blob),
]
