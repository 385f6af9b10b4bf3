"""The ASGI app: HTML pages (no JavaScript needed) and a read-only JSON API under /api."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.sessions import SessionMiddleware

from bot.config import github_settings
from bot.dashboard import api, pages
from bot.dashboard.actions import Publisher
from bot.dashboard.auth import maintainers_from_env
from bot.dashboard.render import api_operations, diff_html, markdown_html, pygments_css, safe_url
from bot.dashboard.security import (
    LOOPBACK_HOSTS,
    AllowedHosts,
    SecurityHeaders,
    hosts_from_env,
)
from bot.journal.store import Journal

_HERE = Path(__file__).parent


@dataclass
class DashboardSettings:
    as_login: str | None = None
    maintainers: frozenset[str] = field(default_factory=maintainers_from_env)
    api_url: str = field(default_factory=lambda: github_settings().api_url)
    upstream: str = field(default_factory=lambda: github_settings().upstream)
    secret_key: str = field(
        default_factory=lambda: os.environ.get("BOT_DASHBOARD_SECRET") or secrets.token_hex(32)
    )
    # Host names answered besides 127.0.0.1 and localhost (BOT_DASHBOARD_HOSTS).
    allowed_hosts: tuple[str, ...] = field(default_factory=hosts_from_env)


def templates() -> Environment:
    env = Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=True,  # everywhere: issue text is hostile
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["markdown"] = markdown_html
    env.filters["diff"] = diff_html
    env.filters["safe_url"] = safe_url
    return env


def create_app(
    journal: Journal,
    settings: DashboardSettings | None = None,
    publish: Publisher | None = None,
) -> FastAPI:
    app = FastAPI(
        title="vLLM EAGLE-3 bot dashboard",
        description="Read-only JSON view of the bot's journal: findings, proposals, events.",
        version="1",
        docs_url=None,  # FastAPI's docs page loads Swagger UI from a CDN; ours is served here
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.journal = journal
    app.state.settings = settings or DashboardSettings()
    app.state.publish = publish
    app.state.templates = templates()
    app.add_middleware(
        SessionMiddleware,
        secret_key=app.state.settings.secret_key,
        session_cookie="bot_session",
        same_site="strict",
        https_only=False,  # served on localhost over plain HTTP
        max_age=12 * 3600,
    )
    app.add_middleware(AllowedHosts, hosts=(*LOOPBACK_HOSTS, *app.state.settings.allowed_hosts))
    app.add_middleware(SecurityHeaders)  # outermost: every answer carries the headers
    app.mount("/static", StaticFiles(directory=_HERE / "static"), name="static")
    css = pygments_css()

    @app.get("/static-gen/pygments.css", include_in_schema=False)
    def pygments_stylesheet() -> PlainTextResponse:
        return PlainTextResponse(css, media_type="text/css")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):  # type: ignore[no-untyped-def]
        if request.url.path.startswith("/api/"):
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)
        return pages.error_page(request, exc.status_code, str(exc.detail))

    @app.get("/api/docs", include_in_schema=False, response_class=HTMLResponse)
    def api_docs(request: Request) -> HTMLResponse:
        return pages.render(request, "api_docs.html", operations=api_operations(app.openapi()))

    app.include_router(api.router)
    app.include_router(pages.router)
    return app


def serve(host: str = "127.0.0.1", port: int = 8765, as_login: str | None = None) -> None:
    """Run the dashboard under uvicorn until interrupted."""
    import uvicorn

    from bot.dashboard.auth import is_loopback
    from bot.errors import BotError

    if as_login and not is_loopback(host):
        raise BotError("--as is for single-user local use: bind to 127.0.0.1 or drop --as")
    if port < 0 or port > 65535:
        raise BotError(f"--port {port} is not a TCP port")
    settings = DashboardSettings(as_login=as_login)
    if host not in ("0.0.0.0", "::", ""):
        settings.allowed_hosts = (*settings.allowed_hosts, host.lower())
    app = create_app(Journal(), settings)
    uvicorn.run(app, host=host, port=port, log_level="warning")
