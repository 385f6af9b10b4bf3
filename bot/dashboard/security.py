"""HTTP hardening around the app, as plain ASGI middleware.

- Only the host names the dashboard is served under are answered (DNS rebinding: a page on
  evil.example that resolves to 127.0.0.1 sends ``Host: evil.example`` and gets 400).
- Every response says: no framing (click-jacking), no MIME sniffing, nothing loaded from
  elsewhere, no script at all (the pages need none), forms post only back here.
- A cross-site request never sets a cookie. With ``SameSite=Strict`` the browser leaves the
  maintainer's session cookie at home on a cross-site link, so the app sees a stranger and
  would otherwise answer with a fresh, signed-out session that overwrites the real one.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.errors import BotError

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "style-src 'self'",
        "img-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)
_HEADERS: dict[bytes, bytes] = {
    b"content-security-policy": CONTENT_SECURITY_POLICY.encode(),
    b"x-content-type-options": b"nosniff",
    b"x-frame-options": b"DENY",  # for browsers that predate frame-ancestors
    b"referrer-policy": b"no-referrer",
    b"cross-origin-opener-policy": b"same-origin",
    b"cross-origin-resource-policy": b"same-origin",
}


def hosts_from_env() -> tuple[str, ...]:
    """Extra host names from ``BOT_DASHBOARD_HOSTS`` (comma-separated), for a reverse proxy."""
    names = tuple(
        name.strip().lower()
        for name in os.environ.get("BOT_DASHBOARD_HOSTS", "").split(",")
        if name.strip()
    )
    for name in names:
        if "*" in name or "/" in name or ":" in name:
            raise BotError(f"BOT_DASHBOARD_HOSTS: {name!r} is not a host name (no port, no *)")
    return names


def host_name(host_header: str) -> str | None:
    """``Host`` without its port, lower-cased (``[::1]:8765`` -> ``::1``); None if malformed."""
    if not host_header or any(c in host_header for c in "/?#@\\ "):
        return None
    try:
        return urlsplit("//" + host_header).hostname
    except ValueError:
        return None


class AllowedHosts:
    """Answers 400 to a request whose ``Host`` is not one of ``hosts``."""

    def __init__(self, app: ASGIApp, hosts: tuple[str, ...]) -> None:
        self.app = app
        self.hosts = frozenset(name.lower() for name in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            if host_name(host) not in self.hosts:
                response = PlainTextResponse("Invalid host header", status_code=400)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class SecurityHeaders:
    """Adds the headers above to every response; drops Set-Cookie on cross-site requests."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cross_site = dict(scope.get("headers") or []).get(b"sec-fetch-site") == b"cross-site"

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (name, value)
                    for name, value in message.get("headers") or []
                    if name.lower() not in _HEADERS
                    and not (cross_site and name.lower() == b"set-cookie")
                ]
                headers += list(_HEADERS.items())
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
