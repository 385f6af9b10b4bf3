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
from pathlib import Path
from urllib.parse import urlsplit

from bot.errors import BotError

EXTRA_HOSTS = "BOT_INDEX_HOSTS"
SOCKET_NAME = "index-proxy.sock"
_HEAD_LIMIT = 16 * 1024
_CONNECT = re.compile(rb"^CONNECT ([A-Za-z0-9.-]+):(\d{1,5}) HTTP/1\.[01]\r\n")
_CONFIG_LINE = re.compile(r"^[^.=]*\.(index-url|extra-index-url|find-links)='(.*)'$")
_TIMEOUT = 60.0


def index_hosts() -> frozenset[tuple[str, int]]:
    """``(host, port)`` of every package index pip is configured to use here. BotError when
    one of them carries a credential: pip would hand it to the build step (inside TLS, where
    the proxy cannot add it), and the step runs code from the index."""
    urls: list[str] = []
    indexed = False
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    for line in listing.stdout.splitlines():
        match = _CONFIG_LINE.match(line.strip())
        if match:
            indexed = indexed or match.group(1) == "index-url"
            urls += match.group(2).split()
            if any(urlsplit(url).password or urlsplit(url).username for url in urls):
                where = line.split("=", 1)[0]
                raise BotError(
                    f"a build step runs code from the package index, and pip's {where} gives "
                    "it an index credential; build with an index that needs none"
                )
    if not indexed:
        urls += _default_index_urls()
    hosts = {_host_port(url) for url in urls}
    for item in os.environ.get(EXTRA_HOSTS, "").split(","):
        if item.strip():
            hosts.add(_host_port("https://" + item.strip()))
    return frozenset(h for h in hosts if h is not None)


def _default_index_urls() -> list[str]:
    """The default index and the host it serves files from, as pip itself names them."""
    from pip._internal.models.index import PyPI

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


def _upstream_proxy() -> tuple[str, int] | None:
    """The operator's own HTTPS proxy, through which the tunnels go, if one is set."""
    for name in ("HTTPS_PROXY", "https_proxy"):
        if os.environ.get(name):
            return _host_port(os.environ[name])
    return None


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    allowed: frozenset[tuple[str, int]] = frozenset()
    upstream: tuple[str, int] | None = None


class _Tunnel(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        client = self.request
        client.settimeout(_TIMEOUT)
        head = _read_head(client)
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
            remote = _open(target, self.server.upstream)
        except OSError:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        with remote:
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            relay(client, remote)


def _read_head(connection: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data and len(data) < _HEAD_LIMIT:
        chunk = connection.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def _open(target: tuple[str, int], upstream: tuple[str, int] | None) -> socket.socket:
    if upstream is None:
        return socket.create_connection(target, timeout=_TIMEOUT)
    remote = socket.create_connection(upstream, timeout=_TIMEOUT)
    host, port = target
    remote.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    reply = _read_head(remote)
    if not re.match(rb"^HTTP/1\.[01] 200", reply):
        remote.close()
        raise OSError("the upstream proxy refused the tunnel")
    return remote


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
