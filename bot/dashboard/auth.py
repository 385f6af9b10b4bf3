"""Who is looking: a maintainer (may act) or an anonymous viewer (read-only); CSRF tokens."""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request

from bot.errors import BotError


@dataclass(frozen=True)
class Viewer:
    login: str | None
    maintainer: bool

    @property
    def anonymous(self) -> bool:
        return self.login is None


ANONYMOUS = Viewer(login=None, maintainer=False)


def maintainers_from_env() -> frozenset[str]:
    raw = os.environ.get("BOT_MAINTAINERS", "")
    return frozenset(login.strip().lower() for login in raw.split(",") if login.strip())


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def viewer_of(request: Request) -> Viewer:
    settings = request.app.state.settings
    if settings.as_login:
        return Viewer(login=settings.as_login, maintainer=True)
    login = request.session.get("login")
    if not isinstance(login, str) or not login or not _live(request):
        return ANONYMOUS
    return Viewer(login=login, maintainer=login.lower() in settings.maintainers)


# The session cookie is signed, not stored: a copy taken before a logout would stay valid for
# its whole max_age. So each sign-in also gets a random id, kept here while it is signed in;
# logging out (or restarting the dashboard) forgets it, and every copy of the cookie with it.
def start_session(request: Request, account: GitHubAccount) -> None:
    sid = secrets.token_urlsafe(32)
    _live_sessions(request).add(sid)
    request.session.clear()
    request.session["login"] = account.login
    request.session["sid"] = sid
    # What the approve form offers to sign off with, and the addresses GitHub vouched for.
    request.session["name"] = account.name
    request.session["email"] = account.email
    request.session["verified"] = list(account.verified)


def end_session(request: Request) -> None:
    _live_sessions(request).discard(str(request.session.get("sid")))
    request.session.clear()


def _live(request: Request) -> bool:
    sid = request.session.get("sid")
    return isinstance(sid, str) and sid in _live_sessions(request)


def _live_sessions(request: Request) -> set[str]:
    state = request.app.state
    if not hasattr(state, "live_sessions"):
        state.live_sessions = set()
    return state.live_sessions


def csrf_token(request: Request) -> str:
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


def check_csrf(request: Request, submitted: str) -> None:
    # The session cookie is signed, so the token in it cannot be forged; comparing it with
    # the form's copy proves the form came from a page we served to this session.
    expected = request.session.get("csrf")
    if not isinstance(expected, str) or not hmac.compare_digest(expected, submitted or ""):
        raise HTTPException(status_code=403, detail="missing or stale CSRF token; reload the page")


def require_maintainer(request: Request) -> Viewer:
    viewer = viewer_of(request)
    if not viewer.maintainer:
        raise HTTPException(status_code=403, detail="only maintainers may act on proposals")
    return viewer


@dataclass(frozen=True)
class GitHubAccount:
    """Whose token signed in: the login, the profile's name, and the e-mail addresses GitHub
    lists as verified for the account (empty when the token may not read them)."""

    login: str
    name: str = ""
    noreply: str = ""  # ID+login@users.noreply.github.com
    verified: tuple[str, ...] = ()
    primary: str | None = None

    @property
    def email(self) -> str:
        """The address the approve form offers: the primary verified one, else the noreply."""
        return self.primary or self.noreply


def signoff_of(request: Request) -> dict[str, Any]:
    """The signed-in account's name and address for the approve form, and the addresses
    GitHub listed as verified for it (nothing is known in ``--as`` mode)."""
    session = request.session
    verified = session.get("verified")
    return {
        "name": str(session.get("name") or ""),
        "email": str(session.get("email") or ""),
        "verified": tuple(str(v) for v in verified) if isinstance(verified, list) else (),
    }


def login_for_token(api_url: str, token: str) -> GitHubAccount:
    """Ask GitHub whose token this is, with the account's name and verified e-mail addresses
    (when the token may read them). The token is used for these calls and then dropped."""
    from github import Auth, Github, GithubException

    from bot.redact import detach_library_handlers

    detach_library_handlers("github")  # PyGithub's own stderr handler: unredacted
    client = Github(auth=Auth.Token(token), base_url=api_url, timeout=15, retry=None)
    try:
        user = client.get_user()
        login = str(user.login)
        name, user_id = str(user.name or ""), user.id
        try:
            emails = [e for e in user.get_emails() if e.verified]
        except GithubException:  # a token without the e-mail scope: the noreply address
            emails = []
    except GithubException as exc:
        raise BotError(f"GitHub did not accept that token (HTTP {exc.status})") from None
    except Exception as exc:  # noqa: BLE001 - network errors must not leak the token
        raise BotError(
            f"could not reach GitHub to check the token ({type(exc).__name__})"
        ) from None
    finally:
        client.close()
    primary = next((e.email for e in emails if e.primary), None)
    return GitHubAccount(
        login=login,
        name=name,
        noreply=f"{user_id}+{login}@users.noreply.github.com" if user_id else "",
        verified=tuple(e.email for e in emails),
        primary=primary,
    )
