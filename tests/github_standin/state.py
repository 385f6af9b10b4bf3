"""The stand-in's memory: repositories, issues, pull requests, comments, workflow runs.

Everything is plain dicts shaped like GitHub's REST objects, built on demand by the
``*_json`` functions so that every ``url`` points back at the stand-in itself.
"""

from __future__ import annotations

import itertools
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import git


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Fault:
    method: str
    path_regex: re.Pattern[str]
    status: int
    headers: dict[str, str]
    message: str
    times: int
    when: str = "before"  # "before" the request takes effect, or "after" it did
    kind: str = "status"  # status | reset | timeout | truncate
    delay: float = 0.0  # for "timeout": how long the reply is held back


@dataclass
class Repo:
    owner: str
    name: str
    default_branch: str = "main"
    git_dir: Path | None = None  # a bare repository standing in for the git remote

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class Run:
    id: int
    repo: str
    workflow_file: str
    ref: str
    inputs: dict[str, str]
    display_title: str
    created_at: str
    status: str = "queued"
    conclusion: str | None = None
    artifacts: dict[str, bytes] = field(default_factory=dict)
    artifact_ids: dict[str, int] = field(default_factory=dict)
    head_sha: str = "0" * 40  # the commit ``ref`` pointed at when the run was dispatched


class State:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url  # e.g. http://127.0.0.1:PORT/api/v3
        self.web_url = base_url.rsplit("/api/", 1)[0]
        self.lock = threading.RLock()
        self.ids = itertools.count(1000)
        self.repos: dict[str, Repo] = {}
        self.tokens: dict[str, str] = {}  # token -> login
        # login -> {"name", "email" (public), "emails" ([{email, verified, primary}])}
        self.profiles: dict[str, dict[str, Any]] = {}
        self.numbers: dict[str, itertools.count[int]] = {}
        self.issues: dict[tuple[str, int], dict[str, Any]] = {}  # issues and PRs share numbers
        self.comments: dict[int, dict[str, Any]] = {}
        self.label_ids: dict[str, int] = {}
        self.forbidden_labels: set[str] = set()
        self.runs: dict[int, Run] = {}
        self.unlisted_run_listings = 0  # listings that show no run yet (GitHub's delay)
        # Deployment reviews of a run (GitHub's "approvals"): run id -> [{user, state, env}].
        self.approvals: dict[int, list[dict[str, Any]]] = {}
        self.run_name_templates: dict[tuple[str, str], str] = {}
        self.faults: list[Fault] = []
        self.page_size: int | None = None  # caps per_page on list endpoints, like GitHub's 100
        self.requests: list[dict[str, Any]] = []

    def branch_sha(self, full_name: str, branch: str) -> str | None:
        git_dir = self.repos[full_name].git_dir
        if git_dir is None:
            return None
        try:
            return git.Repo(git_dir).commit(f"refs/heads/{branch}").hexsha
        except (git.BadName, ValueError):
            return None

    def dispatched_sha(self, full_name: str, ref: str) -> str | None:
        """What a dispatch on ``ref`` runs (GitHub: the branch's or tag's commit); None when
        the repository has commits but not that ref (GitHub answers 422). A repository
        without commits stands in for one whose content no test looks at."""
        git_dir = self.repos[full_name].git_dir
        if git_dir is None:
            return "0" * 40
        repo = git.Repo(git_dir)
        for name in (ref, f"refs/heads/{ref}", f"refs/tags/{ref}"):
            try:
                return repo.commit(name).hexsha
            except (git.BadName, ValueError):
                continue
        return None if repo.git.for_each_ref("refs") else "0" * 40

    def compare_status(self, full_name: str, base: str, head: str) -> str | None:
        """GitHub's ``compare`` status of ``head`` against ``base``, None for an unknown rev."""
        git_dir = self.repos[full_name].git_dir
        if git_dir is None:
            return None
        repo = git.Repo(git_dir)
        try:
            base_sha, head_sha = repo.commit(base).hexsha, repo.commit(head).hexsha
        except (git.BadName, ValueError):
            return None
        if base_sha == head_sha:
            return "identical"
        if repo.is_ancestor(base_sha, head_sha):
            return "ahead"
        return "behind" if repo.is_ancestor(head_sha, base_sha) else "diverged"

    def refs_json(self, full_name: str) -> list[dict[str, Any]]:
        git_dir = self.repos[full_name].git_dir
        if git_dir is None:
            return []
        listing = git.Repo(git_dir).git.for_each_ref(
            "--format=%(refname) %(objectname)", "refs/heads"
        )
        refs = [line.split(" ") for line in listing.splitlines() if line]
        return [
            {
                "ref": name,
                "node_id": f"REF_{sha[:12]}",
                "url": f"{self.base_url}/repos/{full_name}/git/{name}",
                "object": {
                    "type": "commit",
                    "sha": sha,
                    "url": f"{self.base_url}/repos/{full_name}/git/commits/{sha}",
                },
            }
            for name, sha in sorted(refs)
        ]

    def commit_json(self, full_name: str, ref: str) -> dict[str, Any] | None:
        git_dir = self.repos[full_name].git_dir
        if git_dir is None:
            return None
        try:
            commit = git.Repo(git_dir).commit(ref)
        except (git.BadName, ValueError):
            return None

        def link(sha: str) -> dict[str, str]:
            return {
                "sha": sha,
                "url": f"{self.base_url}/repos/{full_name}/commits/{sha}",
                "html_url": f"{self.web_url}/{full_name}/commit/{sha}",
            }

        person = {"name": commit.author.name, "email": commit.author.email, "date": now_iso()}
        return {
            **link(commit.hexsha),
            "node_id": f"C_{commit.hexsha[:12]}",
            "commit": {"message": commit.message, "author": person, "committer": person},
            "parents": [link(p.hexsha) for p in commit.parents],
            "files": [],
        }

    # --- object shapes -------------------------------------------------------------------

    def user_json(self, login: str) -> dict[str, Any]:
        return {
            "login": login,
            "id": abs(hash(login)) % 10**8,
            "node_id": f"U_{login}",
            "type": "User",
            "url": f"{self.base_url}/users/{login}",
            "html_url": f"{self.web_url}/{login}",
        }

    def profile_json(self, login: str) -> dict[str, Any]:
        """``GET /users/{login}`` (and ``/user``): the user with its name and public e-mail."""
        profile = self.profiles.get(login, {})
        return {
            **self.user_json(login),
            "name": profile.get("name"),
            "email": profile.get("email"),
        }

    def repo_json(self, full_name: str) -> dict[str, Any]:
        repo = self.repos[full_name]
        return {
            "id": abs(hash(full_name)) % 10**8,
            "node_id": f"R_{full_name}",
            "name": repo.name,
            "full_name": full_name,
            "owner": self.user_json(repo.owner),
            "private": False,
            "fork": False,
            "url": f"{self.base_url}/repos/{full_name}",
            "html_url": f"{self.web_url}/{full_name}",
            "default_branch": repo.default_branch,
        }

    def label_json(self, repo: str, name: str) -> dict[str, Any]:
        label_id = self.label_ids.setdefault(name, next(self.ids))
        return {
            "id": label_id,
            "node_id": f"LA_{label_id}",
            "name": name,
            "color": "ededed",
            "url": f"{self.base_url}/repos/{repo}/labels/{name}",
        }

    def issue_json(self, repo: str, number: int) -> dict[str, Any]:
        item = self.issues[(repo, number)]
        data = {
            "id": item["id"],
            "node_id": f"I_{item['id']}",
            "number": number,
            "title": item["title"],
            "body": item["body"],
            "state": item["state"],
            "state_reason": item.get("state_reason"),
            "locked": False,
            "user": self.user_json(item["user"]),
            "labels": [self.label_json(repo, name) for name in item["labels"]],
            "comments": sum(1 for c in self.comments.values() if c["issue"] == (repo, number)),
            "url": f"{self.base_url}/repos/{repo}/issues/{number}",
            "html_url": f"{self.web_url}/{repo}/issues/{number}",
            "comments_url": f"{self.base_url}/repos/{repo}/issues/{number}/comments",
            "repository_url": f"{self.base_url}/repos/{repo}",
            "created_at": item["created_at"],
            "updated_at": item["updated_at"],
            "closed_at": item.get("closed_at"),
            "assignees": [],
        }
        if item.get("pull"):
            data["html_url"] = f"{self.web_url}/{repo}/pull/{number}"
            data["pull_request"] = {
                "url": f"{self.base_url}/repos/{repo}/pulls/{number}",
                "html_url": data["html_url"],
                "merged_at": item["pull"].get("merged_at"),
            }
        return data

    def pull_json(self, repo: str, number: int) -> dict[str, Any]:
        item = self.issues[(repo, number)]
        pull = item["pull"]
        head_repo = pull["head_repo"]
        base = self.repos[repo]
        return {
            "id": item["id"],
            "node_id": f"PR_{item['id']}",
            "number": number,
            "title": item["title"],
            "body": item["body"],
            "state": item["state"],
            "draft": pull["draft"],
            "merged": pull.get("merged_at") is not None,
            "merged_at": pull.get("merged_at"),
            "mergeable": True,
            "user": self.user_json(item["user"]),
            "labels": [self.label_json(repo, name) for name in item["labels"]],
            "url": f"{self.base_url}/repos/{repo}/pulls/{number}",
            "html_url": f"{self.web_url}/{repo}/pull/{number}",
            "issue_url": f"{self.base_url}/repos/{repo}/issues/{number}",
            "comments_url": f"{self.base_url}/repos/{repo}/issues/{number}/comments",
            "head": {
                "ref": pull["head_ref"],
                "label": f"{head_repo.split('/')[0]}:{pull['head_ref']}",
                "sha": (head_repo in self.repos and self.branch_sha(head_repo, pull["head_ref"]))
                or pull["head_sha"],
                "repo": self.repo_json(head_repo) if head_repo in self.repos else None,
                "user": self.user_json(head_repo.split("/")[0]),
            },
            "base": {
                "ref": pull["base_ref"],
                "label": f"{base.owner}:{pull['base_ref']}",
                "sha": "0" * 40,
                "repo": self.repo_json(repo),
                "user": self.user_json(base.owner),
            },
            "created_at": item["created_at"],
            "updated_at": item["updated_at"],
            "closed_at": item.get("closed_at"),
        }

    def comment_json(self, comment_id: int) -> dict[str, Any]:
        comment = self.comments[comment_id]
        repo, number = comment["issue"]
        return {
            "id": comment_id,
            "node_id": f"IC_{comment_id}",
            "body": comment["body"],
            "user": self.user_json(comment["user"]),
            "url": f"{self.base_url}/repos/{repo}/issues/comments/{comment_id}",
            "html_url": f"{self.web_url}/{repo}/issues/{number}#issuecomment-{comment_id}",
            "issue_url": f"{self.base_url}/repos/{repo}/issues/{number}",
            "created_at": comment["created_at"],
            "updated_at": comment["updated_at"],
        }

    def run_json(self, run: Run) -> dict[str, Any]:
        return {
            "id": run.id,
            "node_id": f"WFR_{run.id}",
            "name": run.workflow_file,
            "display_title": run.display_title,
            "path": f".github/workflows/{run.workflow_file}",
            "event": "workflow_dispatch",
            "status": run.status,
            "conclusion": run.conclusion,
            "head_branch": run.ref,
            "head_sha": run.head_sha,
            "run_number": run.id,
            "run_attempt": 1,
            "workflow_id": abs(hash(run.workflow_file)) % 10**6,
            "url": f"{self.base_url}/repos/{run.repo}/actions/runs/{run.id}",
            "html_url": f"{self.web_url}/{run.repo}/actions/runs/{run.id}",
            "artifacts_url": f"{self.base_url}/repos/{run.repo}/actions/runs/{run.id}/artifacts",
            "created_at": run.created_at,
            "updated_at": run.created_at,
            "run_started_at": run.created_at,
        }

    def artifact_json(self, run: Run, name: str) -> dict[str, Any]:
        artifact_id = run.artifact_ids[name]
        api = f"{self.base_url}/repos/{run.repo}/actions/artifacts/{artifact_id}"
        return {
            "id": artifact_id,
            "node_id": f"A_{artifact_id}",
            "name": name,
            "size_in_bytes": len(run.artifacts[name]),
            "url": api,
            "archive_download_url": f"{api}/zip",
            "expired": False,
            "created_at": run.created_at,
            "updated_at": run.created_at,
            "expires_at": "2999-01-01T00:00:00Z",
            "workflow_run": {"id": run.id, "head_branch": run.ref},
        }
