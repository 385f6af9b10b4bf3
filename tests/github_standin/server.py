"""A small stateful GitHub on 127.0.0.1: real HTTP, GitHub's JSON shapes and status codes.

Tests drive the real PyGithub/GitPython against it. Python handles (``add_issue``,
``inject``, ``complete_run``, ``close_pull`` ...) set up and inspect its state.
"""

from __future__ import annotations

import io
import json
import re
import socket
import struct
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import git

from .routes import RAW_ROUTES, ROUTES, HttpError, Request, new_number
from .state import Fault, Repo, State, now_iso

API_PREFIX = "/api/v3"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, keep-alive clients wait
    # for a delayed ACK (~40-200 ms) on every request.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep quiet
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        state = self.server.state
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            self._send(400, {"message": "Problems parsing JSON"}, {})
            return
        auth = self.headers.get("Authorization", "")
        with state.lock:
            login = None
            if auth:
                token = auth.split(" ", 1)[-1]
                login = state.tokens.get(token)
                if login is None:
                    self._send(401, {"message": "Bad credentials"}, {})
                    return
            state.requests.append(
                {"method": method, "path": split.path, "query": split.query, "login": login}
            )
            fault = self._take_fault(state, method, split.path)
            response = None
            if fault is None or fault.when == "after":
                response = self._route(state, method, split.path, split.query, body, login)
                if method == "GET":
                    response = self._page(state, split.path, split.query, *response)
        if fault is None:
            assert response is not None
            self._send(*response)
        else:
            self._fail(fault, response)

    def _page(
        self, state: State, path: str, query: str, status: int, payload: Any, headers: dict
    ) -> tuple[int, Any, dict[str, str]]:
        """Lists come a page at a time, with GitHub's ``Link`` header to the next one."""
        if status != 200 or not isinstance(payload, list):
            return status, payload, headers
        params = dict(parse_qsl(query))
        size = min(int(params.get("per_page") or 30), state.page_size or 100)
        page = max(1, int(params.get("page") or 1))
        chunk = payload[(page - 1) * size : page * size]
        last = max(1, -(-len(payload) // size))
        links = []
        for rel, number in (("next", page + 1), ("last", last)):
            if number <= last and (rel == "last" or page < last):
                url = f"{self.server.state.web_url}{path}?{urlencode({**params, 'page': number})}"
                links.append(f'<{url}>; rel="{rel}"')
        return status, chunk, {**headers, **({"Link": ", ".join(links)} if links else {})}

    def _fail(self, fault: Fault, response: tuple[int, Any, dict[str, str]] | None) -> None:
        """Answer as a failing GitHub or network would, before or after the effect."""
        if fault.kind == "status":
            self._send(fault.status, {"message": fault.message}, fault.headers)
        elif fault.kind == "timeout":
            time.sleep(fault.delay)  # longer than the client's timeout: it has given up
            self._abort()
        elif fault.kind == "truncate" and response is not None:
            status, payload, headers = response
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"%x\r\n" % len(data) + data[: len(data) // 2])
            self.wfile.flush()
            self._abort()
        else:  # reset
            self._abort()

    def _abort(self) -> None:
        """Drop the connection with a TCP reset (SO_LINGER 0), as a failing proxy would."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    @staticmethod
    def _take_fault(state: State, method: str, path: str) -> Fault | None:
        for fault in state.faults:
            if fault.times > 0 and fault.method == method and fault.path_regex.search(path):
                fault.times -= 1
                return fault
        return None

    @staticmethod
    def _route(
        state: State, method: str, path: str, query: str, body: Any, login: str | None
    ) -> tuple[int, Any, dict[str, str]]:
        request = Request(method, path, dict(parse_qsl(query)), body, login)
        candidates = [(m, p, f) for m, p, f in RAW_ROUTES]
        api_path = path[len(API_PREFIX) :] if path.startswith(API_PREFIX + "/") else None
        if api_path is not None:
            candidates += [(m, p, f) for m, p, f in ROUTES]
        for route_method, pattern, handler in candidates:
            target = path if (route_method, pattern, handler) in RAW_ROUTES else api_path
            match = pattern.match(target or "")
            if match and route_method == method:
                try:
                    return handler(state, request, match)
                except HttpError as exc:
                    payload: dict[str, Any] = {"message": exc.message}
                    if exc.errors:
                        payload["errors"] = exc.errors
                    payload["documentation_url"] = "https://docs.github.com/rest"
                    return exc.status, payload, {}
        return 404, {"message": "Not Found"}, {}

    def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
        if isinstance(payload, bytes):
            data = payload
            content_type = headers.get("Content-Type", "application/octet-stream")
        elif payload is None:
            data, content_type = b"", "application/json; charset=utf-8"
        else:
            data = json.dumps(payload).encode()
            content_type = "application/json; charset=utf-8"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            if key != "Content-Type":
                self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: State

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # injected resets and timeouts break connections on purpose


class GitHubStandIn:
    """Start with ``GitHubStandIn(tmp_path)``, then ``.start()``; ``.stop()`` when done."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._server = _Server(("127.0.0.1", 0), _Handler)
        host, port = self._server.server_address[:2]
        self.web_url = f"http://{host}:{port}"
        self.api_url = self.web_url + API_PREFIX
        self.state = State(self.api_url)
        self._server.state = self.state
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> GitHubStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    # --- set-up -------------------------------------------------------------------------

    def add_token(self, token: str, login: str) -> None:
        with self.state.lock:
            self.state.tokens[token] = login

    def add_user(
        self,
        login: str,
        name: str = "",
        public_email: str | None = None,
        emails: list[tuple[str, bool]] | None = None,
    ) -> None:
        """A GitHub account's profile: its name, its public e-mail, and (``emails``: address,
        verified; the first is primary) the addresses its own token can list; None: its token
        may not list them."""
        listed = None
        if emails is not None:
            listed = [
                {"email": e, "verified": v, "primary": i == 0} for i, (e, v) in enumerate(emails)
            ]
        with self.state.lock:
            self.state.profiles[login] = {"name": name, "email": public_email, "emails": listed}

    def add_repo(
        self,
        full_name: str,
        *,
        default_branch: str = "main",
        seed_from: Path | None = None,
        fork_of: str | None = None,
    ) -> Path:
        """Create a repository with a bare git remote (sharing ``seed_from``'s objects).

        ``fork_of`` names a repository added before: like a fork on GitHub, which shares its
        network's object store, this one then holds every object that one holds now or gets
        later (a push of a branch built on the upstream's newest commit needs no history)."""
        owner, name = full_name.split("/")
        git_dir = self.root / "remotes" / owner / f"{name}.git"
        if seed_from is not None:
            git.Repo.clone_from(str(seed_from), str(git_dir), bare=True, shared=True)
        else:
            git.Repo.init(git_dir, bare=True)
        if fork_of is not None:
            network = self.state.repos[fork_of].git_dir
            assert network is not None
            alternates = git_dir / "objects" / "info" / "alternates"
            alternates.parent.mkdir(parents=True, exist_ok=True)
            known = alternates.read_text() if alternates.exists() else ""
            alternates.write_text(known + f"{network / 'objects'}\n")
        with self.state.lock:
            self.state.repos[full_name] = Repo(owner, name, default_branch, git_dir)
        return git_dir

    def add_issue(
        self,
        repo: str,
        number: int | None,
        title: str,
        body: str,
        *,
        user: str = "reporter",
        labels: list[str] | None = None,
        state: str = "open",
    ) -> int:
        with self.state.lock:
            number = number or new_number(self.state, repo)
            self.state.issues[(repo, number)] = {
                "id": self.state.ids.__next__(),
                "title": title,
                "body": body,
                "state": state,
                "user": user,
                "labels": list(labels or []),
                "created_at": now_iso(),
                "updated_at": now_iso(),
            }
        return number

    def add_comment(self, repo: str, number: int, body: str, user: str) -> int:
        """A comment ``user`` wrote on issue (or PR) ``number``."""
        with self.state.lock:
            comment_id = next(self.state.ids)
            self.state.comments[comment_id] = {
                "issue": (repo, number),
                "body": body,
                "user": user,
                "created_at": now_iso(),
                "updated_at": now_iso(),
            }
        return comment_id

    def add_pull(
        self,
        repo: str,
        head: str,
        *,
        user: str,
        created_at: str | None = None,
        state: str = "open",
        title: str | None = None,
        body: str = "",
        labels: list[str] | None = None,
    ) -> int:
        """A pull request opened earlier (e.g. by another run), from ``head`` = owner:branch."""
        owner, _, ref = head.partition(":")
        with self.state.lock:
            number = new_number(self.state, repo)
            self.state.issues[(repo, number)] = {
                "id": next(self.state.ids),
                "title": title or f"earlier PR from {head}",
                "body": body,
                "state": state,
                "user": user,
                "labels": list(labels or []),
                "created_at": created_at or now_iso(),
                "updated_at": created_at or now_iso(),
                "pull": {
                    "head_repo": f"{owner}/{self.state.repos[repo].name}",
                    "head_ref": ref,
                    "head_sha": "0" * 40,
                    "base_ref": self.state.repos[repo].default_branch,
                    "draft": False,
                    "merged_at": None,
                },
            }
        return number

    def approve_environment(
        self,
        run_id: int,
        login: str,
        environment: str = "publish",
        state: str = "approved",
        comment: str = "",
    ) -> None:
        """A required reviewer's decision on a run's deployment to ``environment``, with the
        comment GitHub's review dialog lets them write."""
        with self.state.lock:
            self.state.approvals.setdefault(run_id, []).append(
                {"user": login, "environment": environment, "state": state, "comment": comment}
            )

    def forbid_label(self, name: str) -> None:
        """Adding this label answers 403, as for a token without triage rights."""
        with self.state.lock:
            self.state.forbidden_labels.add(name)

    def list_runs_late(self, listings: int = 1) -> None:
        """The next ``listings`` run listings show no run: GitHub lists a dispatched run some
        seconds after the dispatch."""
        with self.state.lock:
            self.state.unlisted_run_listings = listings

    def set_run_name(self, repo: str, workflow_file: str, template: str) -> None:
        """Like a workflow's ``run-name:``; ``{input}`` fields are filled from dispatch inputs."""
        with self.state.lock:
            self.state.run_name_templates[(repo, workflow_file)] = template

    # --- faults -------------------------------------------------------------------------

    def inject(
        self,
        method: str,
        path_regex: str,
        status: int,
        headers: dict[str, str] | None = None,
        times: int = 1,
        message: str | None = None,
        *,
        when: str = "before",
        kind: str = "status",
        delay: float = 0.0,
    ) -> None:
        """Fail the next ``times`` matching requests. ``kind``: ``status`` (answer ``status``
        with ``headers``), ``reset`` (drop the connection), ``timeout`` (hold the reply back
        ``delay`` seconds, then drop it) or ``truncate`` (cut the chunked body in half; after
        only). ``when``: ``before`` the request takes effect or ``after`` it did."""
        if kind == "truncate" and when != "after":
            raise ValueError("a truncated reply needs a reply: use when='after'")
        if message is None:
            message = {
                403: "You have exceeded a secondary rate limit. Please wait a few minutes.",
                429: "Too Many Requests",
            }.get(status, "Server Error")
        with self.state.lock:
            self.state.faults.append(
                Fault(
                    method,
                    re.compile(path_regex),
                    status,
                    dict(headers or {}),
                    message,
                    times,
                    when,
                    kind,
                    delay,
                )
            )

    # --- maintainers' and runners' actions ----------------------------------------------

    def close_pull(self, repo: str, number: int, *, merged: bool = False) -> None:
        with self.state.lock:
            item = self.state.issues[(repo, number)]
            item["state"] = "closed"
            item["closed_at"] = now_iso()
            if merged:
                item["pull"]["merged_at"] = now_iso()

    def complete_run(
        self, run_id: int, conclusion: str, artifacts: dict[str, bytes] | None = None
    ) -> None:
        """Finish a run; each artifact is given as file content and served zipped."""
        with self.state.lock:
            run = self.state.runs[run_id]
            run.status = "completed"
            run.conclusion = conclusion
            for name, content in (artifacts or {}).items():
                buffer = io.BytesIO()
                with zipfile.ZipFile(buffer, "w") as archive:
                    archive.writestr(name, content)
                run.artifacts[name] = buffer.getvalue()
                run.artifact_ids[name] = next(self.state.ids)

    def start_run(self, run_id: int) -> None:
        with self.state.lock:
            self.state.runs[run_id].status = "in_progress"

    # --- inspection ---------------------------------------------------------------------

    def pulls(self, repo: str) -> list[dict[str, Any]]:
        with self.state.lock:
            return [
                self.state.pull_json(r, n)
                for (r, n), item in sorted(self.state.issues.items())
                if r == repo and item.get("pull")
            ]

    def comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        with self.state.lock:
            return [
                self.state.comment_json(cid)
                for cid, c in sorted(self.state.comments.items())
                if c["issue"] == (repo, number)
            ]

    def issue(self, repo: str, number: int) -> dict[str, Any]:
        with self.state.lock:
            return self.state.issue_json(repo, number)

    def runs(self) -> list[dict[str, Any]]:
        with self.state.lock:
            return [self.state.run_json(run) for run in self.state.runs.values()]

    def run_inputs(self, run_id: int) -> dict[str, str]:
        with self.state.lock:
            return dict(self.state.runs[run_id].inputs)

    def writes(self) -> list[dict[str, Any]]:
        """Requests that could change state (anything but GET), in order."""
        with self.state.lock:
            return [r for r in self.state.requests if r["method"] != "GET"]

    def request_log(self) -> list[dict[str, Any]]:
        with self.state.lock:
            return list(self.state.requests)
