"""The only way out of a build step's sandbox: a proxy that reaches the package index alone.

A build step (pip installing a release's requirements, pip downloading its source distribution)
runs code from the package index, and needs the index. With the host's network it could reach
anything the machine can: a ``bot dashboard`` on 127.0.0.1, a cloud metadata address, the LAN.
So the step runs without a network (its own network namespace, loopback only), and
:mod:`bot.net_relay` inside it listens on loopback as pip's HTTP(S) proxy and passes each
connection over a Unix socket to :func:`index_proxy` here, outside, which opens a tunnel
(``CONNECT host:port``) only to the package index's hosts, through the operator's own proxy if
one is set, and answers anything else with 403.

The index's hosts are what pip's configuration names (``index-url``, ``extra-index-url``,
``find-links``; environment included), the default index's own hosts when no ``index-url`` is
configured (read from pip itself), and ``BOT_INDEX_HOSTS`` (``host[:port]``, comma-separated: a
mirror whose files live on another host).
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import select
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit
from urllib.request import proxy_bypass_environment

from bot.errors import BotError

EXTRA_HOSTS = "BOT_INDEX_HOSTS"
SOCKET_NAME = "index-proxy.sock"
_HEAD_LIMIT = 16 * 1024
_CONNECT = re.compile(rb"^CONNECT ([A-Za-z0-9.-]+):(\d{1,5}) HTTP/1\.[01]\r\n")
_CONFIG_LINE = re.compile(r"^[^.=]*\.([a-z-]+)='(.*)'$")
_TIMEOUT = 60.0


def index_hosts() -> frozenset[tuple[str, int]]:
    """``(host, port)`` of every package index pip is configured to use here. BotError when
    one of them carries a credential: pip would hand it to the build step (inside TLS, where
    the proxy cannot add it), and the step runs code from the index."""
    urls: list[str] = []
    indexed = False
    for key, value, where in _pip_config():
        if key not in ("index-url", "extra-index-url", "find-links"):
            continue
        indexed = indexed or key == "index-url"
        for url in value.split():
            if urlsplit(url).password or urlsplit(url).username:
                raise BotError(
                    f"a build step runs code from the package index, and pip's {where} gives "
                    "it an index credential; build with an index that needs none"
                )
            urls.append(url)
    if not indexed:
        urls += _default_index_urls()
    hosts = {_host_port(url) for url in urls}
    for item in os.environ.get(EXTRA_HOSTS, "").split(","):
        if item.strip():
            hosts.add(_host_port("https://" + item.strip()))
    return frozenset(h for h in hosts if h is not None)


def _pip_config() -> list[tuple[str, str, str]]:
    """``(key, value, where)`` of every setting pip's configuration holds here (its files and
    ``PIP_*`` variables), as ``pip config list`` shows them."""
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    settings = []
    for line in listing.stdout.splitlines():
        match = _CONFIG_LINE.match(line.strip())
        if match:
            settings.append((match.group(1), match.group(2), line.split("=", 1)[0]))
    return settings


def _default_index_urls() -> list[str]:
    """The default index and the host it serves files from, as pip itself names them."""
    try:
        from pip._internal.models.index import PyPI
    except ImportError as exc:  # the bot's interpreter always has pip; say so if it does not
        raise BotError(f"cannot read the default package index from pip: {exc}") from None
    return [PyPI.url, f"https://{PyPI.file_storage_domain}/"]


def _host_port(url: str) -> tuple[str, int] | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None  # a local directory or file:// index needs no network
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return parts.hostname.lower(), port


@contextlib.contextmanager
def index_proxy(allowed: frozenset[tuple[str, int]]) -> Iterator[Path]:
    """Serve the proxy on a Unix socket in a fresh directory (yielded) until the block ends."""
    with tempfile.TemporaryDirectory(prefix="bot-index-proxy-") as folder:
        path = Path(folder) / SOCKET_NAME
        server = _Server(str(path), _Tunnel)
        server.allowed = allowed
        server.upstream = _upstream_proxy()
        os.chmod(folder, 0o755)
        os.chmod(path, 0o666)  # the sandbox's uid connects to it
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield path
        finally:
            server.shutdown()
            server.server_close()


@dataclass(frozen=True)
class Upstream:
    """The operator's own proxy, through which the tunnels go."""

    host: str
    port: int
    authorization: str | None = None  # a ``Proxy-Authorization`` value, from the proxy's URL

    @classmethod
    def from_url(cls, url: str) -> Upstream | None:
        parts = urlsplit(url if "://" in url else "http://" + url)  # "host:port", as pip takes it
        if not parts.hostname:
            return None
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return None
        authorization = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            authorization = "Basic " + base64.b64encode(pair.encode()).decode()
        return cls(parts.hostname, port, authorization)


def _upstream_proxy() -> Upstream | None:
    """The proxy pip would use for the index outside the sandbox: pip's own ``proxy`` setting,
    else ``HTTPS_PROXY``. Its credential stays out here: the step never sees it."""
    configured = [value for key, value, _ in _pip_config() if key == "proxy" and value]
    for url in [*configured, os.environ.get("HTTPS_PROXY", ""), os.environ.get("https_proxy", "")]:
        if url:
            return Upstream.from_url(url)
    return None


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    allowed: frozenset[tuple[str, int]] = frozenset()
    upstream: Upstream | None = None


class _Tunnel(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        client = self.request
        client.settimeout(_TIMEOUT)
        head, early = _read_head(client)
        match = _CONNECT.match(head)
        target = (match.group(1).decode().lower(), int(match.group(2))) if match else None
        if target is None or target not in self.server.allowed:
            shown = f"{target[0]}:{target[1]}" if target else "anything but CONNECT"
            client.sendall(
                b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n"
                + f"X-Bot-Refused: {shown} is not the package index\r\n\r\n".encode()
            )
            return
        try:
            remote, answered = _open(target, self.server.upstream)
        except OSError:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        with remote:
            # Bytes either side sent right behind its head belong to the tunnel.
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n" + answered)
            if early:
                remote.sendall(early)
            relay(client, remote)


def _read_head(connection: socket.socket) -> tuple[bytes, bytes]:
    """An HTTP head (through its blank line), and whatever came after it in the same reads."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < _HEAD_LIMIT:
        chunk = connection.recv(4096)
        if not chunk:
            break
        data += chunk
    head, blank, rest = data.partition(b"\r\n\r\n")
    return head + blank, rest


def _open(target: tuple[str, int], upstream: Upstream | None) -> tuple[socket.socket, bytes]:
    """A connection to ``target`` (through ``upstream`` unless ``NO_PROXY`` names it, as pip
    would), and the bytes the far side already sent through it."""
    host, port = target
    if upstream is None or proxy_bypass_environment(host):
        return socket.create_connection(target, timeout=_TIMEOUT), b""
    remote = socket.create_connection((upstream.host, upstream.port), timeout=_TIMEOUT)
    head = f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n"
    if upstream.authorization:
        head += f"Proxy-Authorization: {upstream.authorization}\r\n"
    remote.sendall((head + "\r\n").encode())
    reply, answered = _read_head(remote)
    if not re.match(rb"^HTTP/1\.[01] 200", reply):
        remote.close()
        raise OSError("the upstream proxy refused the tunnel")
    return remote, answered


def relay(one: socket.socket, other: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    pair = {one: other, other: one}
    one.setblocking(True)
    other.setblocking(True)
    while True:
        ready, _, _ = select.select(list(pair), [], [], _TIMEOUT * 5)
        if not ready:
            return
        for source in ready:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            try:
                pair[source].sendall(data)
            except OSError:
                return
