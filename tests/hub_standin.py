"""A Hugging Face Hub stand-in: an HTTP server on 127.0.0.1 speaking the routes the real
``huggingface_hub`` client uses, so tests drive the real client and never a mock of our code.

Routes (as the Hub answers them):
- ``GET /api/models?search=...&limit=...`` a model search, each item with ``cardData``;
- ``GET /api/models/<org>/<name>[/revision/<rev>]`` one model's info (``cardData`` included);
- ``HEAD``/``GET /<org>/<name>/resolve/<rev>/<file>`` a file, with ``X-Repo-Commit`` and
  ``ETag``. An unknown repository is ``401`` with ``X-Error-Code: RepoNotFound`` (the Hub does
  not say whether a private one exists), a missing file ``404`` with ``EntryNotFound``, a gated
  repository without a token ``401`` with ``GatedRepo``.

A repository is ``HubRepo(config=..., card=..., gated=...)``; ``requests`` lists every path asked.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HubRepo:
    config: dict[str, Any] | None = None  # config.json; None: the repository has none
    card: dict[str, Any] = field(default_factory=dict)  # the model card's metadata (cardData)
    gated: bool = False
    files: dict[str, bytes] = field(default_factory=dict)  # other files, by name


class HubStandIn:
    """``with HubStandIn(repos) as hub:`` serves ``repos`` at ``hub.url`` until the block ends."""

    def __init__(self, repos: dict[str, HubRepo] | None = None) -> None:
        self.repos: dict[str, HubRepo] = dict(repos or {})
        self.requests: list[str] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the stand-in is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> HubStandIn:
        standin = self

        class Handler(_Handler):
            hub = standin

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> HubStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def file_requests(self, repo_id: str, filename: str = "config.json") -> int:
        """How many times ``filename`` of ``repo_id`` was asked for (HEAD or GET)."""
        return sum(1 for path in self.requests if path == f"/{repo_id}/resolve/main/{filename}")


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens: bind a port, note it, close it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = server.server_address[1]
    server.server_close()
    return f"http://127.0.0.1:{port}"


def repos_from_file(path: Path) -> dict[str, HubRepo]:
    """``{"org/name": {"config": {...}, "card": {...}, "gated": false}}`` as stand-in repos."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {
        repo_id: HubRepo(
            config=entry.get("config"), card=entry.get("card", {}), gated=entry.get("gated", False)
        )
        for repo_id, entry in raw.items()
    }


class _Handler(BaseHTTPRequestHandler):
    hub: HubStandIn

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self._serve(send_body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._serve(send_body=True)

    def _serve(self, send_body: bool) -> None:
        url = urlparse(self.path)
        path = unquote(url.path)
        self.hub.requests.append(path)
        if path == "/api/models":
            return self._search(parse_qs(url.query), send_body)
        if path.startswith("/api/models/") and "/tree/" in path:
            return self._tree(path.removeprefix("/api/models/").split("/tree/", 1)[0], send_body)
        if path.startswith("/api/models/"):
            return self._model_info(path.removeprefix("/api/models/"), send_body)
        if "/resolve/" in path:
            repo_id, _, rest = path.lstrip("/").partition("/resolve/")
            return self._file(repo_id, rest.split("/", 1)[-1], send_body)
        self._reply(404, {"error": "not found"}, send_body)

    def _search(self, query: dict[str, list[str]], send_body: bool) -> None:
        search = query.get("search", [""])[0].lower()
        found = [
            {"id": repo_id, "modelId": repo_id, "cardData": repo.card}
            for repo_id, repo in sorted(self.hub.repos.items())
            if search in repo_id.lower() and not repo.gated
        ]
        limit = int(query.get("limit", ["1000"])[0])
        self._reply(200, found[:limit], send_body)

    def _model_info(self, rest: str, send_body: bool) -> None:
        repo_id = rest.split("/revision/", 1)[0]
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._error(401, "RepoNotFound", "Repository not found", send_body)
        names = sorted({*repo.files, *(["config.json"] if repo.config is not None else [])})
        info = {
            "id": repo_id,
            "modelId": repo_id,
            "sha": COMMIT,
            "cardData": repo.card,
            "siblings": [{"rfilename": name} for name in names],  # what snapshot_download fetches
        }
        self._reply(200, info, send_body, commit=True)

    def _tree(self, repo_id: str, send_body: bool) -> None:
        """The repository's files, as ``list_repo_tree`` (and so ``snapshot_download``) asks."""
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._error(401, "RepoNotFound", "Repository not found", send_body)
        files = dict(repo.files)
        if repo.config is not None:
            files.setdefault("config.json", json.dumps(repo.config).encode())
        entries = [
            {"type": "file", "path": name, "size": len(body), "oid": hashlib.sha1(body).hexdigest()}
            for name, body in sorted(files.items())
        ]
        self._reply(200, entries, send_body)

    def _file(self, repo_id: str, filename: str, send_body: bool) -> None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._error(401, "RepoNotFound", "Repository not found", send_body)
        if repo.gated and self.headers.get("authorization") is None:
            return self._error(401, "GatedRepo", "Access to this model is restricted", send_body)
        body = repo.files.get(filename)
        if body is None and filename == "config.json" and repo.config is not None:
            body = json.dumps(repo.config).encode()
        if body is None:
            return self._error(404, "EntryNotFound", "Entry not found", send_body, commit=True)
        self._send(200, body, send_body, commit=True, etag=hashlib.sha1(body).hexdigest())

    def _error(self, status: int, code: str, message: str, send_body: bool, **kw: bool) -> None:
        body = json.dumps({"error": message}).encode()
        headers = {"X-Error-Code": code, "X-Error-Message": message}
        self._send(status, body, send_body, headers=headers, **kw)

    def _reply(self, status: int, data: object, send_body: bool, commit: bool = False) -> None:
        self._send(status, json.dumps(data).encode(), send_body, commit=commit)

    def _send(
        self,
        status: int,
        body: bytes,
        send_body: bool,
        *,
        commit: bool = False,
        etag: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if commit:
            self.send_header("X-Repo-Commit", COMMIT)
        if etag:
            self.send_header("ETag", f'"{etag}"')
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(body)
