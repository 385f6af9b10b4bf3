"""Runs inside a build step's sandbox, which has no network: ``python net_relay.py SOCKET --
COMMAND...`` listens on loopback as the command's HTTP(S) proxy and passes every connection over
the Unix socket ``SOCKET`` to the index proxy outside (:mod:`bot.index_proxy`), which tunnels to
the package index only. Self-contained (run as a file, imports nothing of the bot).
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading

_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "PIP_PROXY")


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: net_relay.py SOCKET -- COMMAND...", file=sys.stderr)
        return 2
    path, command = argv[0], argv[2:]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    proxy = f"http://127.0.0.1:{listener.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if k not in ("NO_PROXY", "no_proxy")}
    env.update(dict.fromkeys(_PROXY_VARIABLES, proxy))
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    try:
        return subprocess.call(command, env=env)
    except OSError as exc:
        print(f"net_relay: cannot start {command[0]}: {exc}", file=sys.stderr)
        return 127


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=_pass, args=(connection, path), daemon=True).start()


def _pass(connection: socket.socket, path: str) -> None:
    with connection, socket.socket(socket.AF_UNIX) as outside:
        try:
            outside.connect(path)
        except OSError:
            return
        pair = {connection: outside, outside: connection}
        while True:
            ready, _, _ = select.select(list(pair), [], [], 300)
            if not ready:
                return
            for source in ready:
                try:
                    data = source.recv(65536)
                    if not data:
                        return
                    pair[source].sendall(data)
                except OSError:
                    return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
