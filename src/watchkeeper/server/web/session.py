"""Dashboard sessions: kept on the server, named by a signed, HTTP-only cookie.

Logging in posts an API token once; the server checks it and opens a row in
``web_sessions`` (see :mod:`watchkeeper.store.sessions`): the session id is
random and only its hash is stored, with the token it was opened with, the
session's CSRF token and its times. The cookie carries the session id, signed
with HMAC-SHA256 under a key derived from the server's record key, so a forged
cookie is refused without a database read. The raw API token is never stored.

Every request looks its session up. A session ends when:

- it is logged out (its row is revoked);
- the API token it was opened with is revoked;
- it has not been used for :data:`IDLE_S` (idle timeout);
- :data:`SESSION_S` has passed since login, however busy it is (lifetime).

The session rows, their time rules and the short cache in front of them
belong to :class:`watchkeeper.access.sessions.SessionService`; this module
holds what is HTTP: the cookies, their signatures and the CSRF checks. Every
time is read from the services' clock.

Every POST carries the session's CSRF token in a form field or the
``X-CSRF-Token`` header; the cookie is ``SameSite=Strict`` as a second line.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from watchkeeper.access.sessions import CACHE_S, IDLE_S, SESSION_S
from watchkeeper.access.tokens import Role, TokenInfo
from watchkeeper.decide.actors import Actor
from watchkeeper.errors import Unauthorized, WatchkeeperError
from watchkeeper.server.api.timeline import record_key
from watchkeeper.server.deps import services

__all__ = ["CACHE_S", "COOKIE", "IDLE_S", "LOGIN_COOKIE", "SESSION_S", "Session"]

COOKIE = "wk_session"
LOGIN_COOKIE = "wk_login"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
LOGIN_FORM_S = 3600


class LoginRequired(Unauthorized):
    """No valid session: the browser is sent to the login page (a script is told 401)."""


class CsrfRejected(WatchkeeperError, http_status=403, code="forbidden"):
    """A POST without the session's CSRF token."""


@dataclass(frozen=True, slots=True)
class Session:
    """Who is looking: the API token's id, name and role, and this session's CSRF token."""

    token_id: int
    name: str
    role: Role
    csrf: str = dataclasses.field(repr=False)
    session_id: str = dataclasses.field(repr=False)
    expires_at: datetime

    @property
    def is_admin(self) -> bool:
        """Only admins see buttons that act."""
        return self.role.allows(Role.ADMIN)

    def actor(self) -> Actor:
        """The presser, as every channel names one."""
        return Actor(f"@{self.name}", "dashboard", self.is_admin)


def _key(request: Request) -> bytes:
    key = getattr(request.app.state, "web_session_key", None)
    if isinstance(key, bytes):
        return key
    seed = bytes(record_key(request).signing)  # secret: the signing key never leaves the server
    derived = hmac.new(seed, b"watchkeeper dashboard session", "sha256").digest()
    request.app.state.web_session_key = derived
    return derived


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(key: bytes, payload: dict[str, Any]) -> str:
    """``payload`` as ``data.signature``."""
    data = _b64(json.dumps(payload, separators=(",", ":")).encode())
    mac = hmac.new(key, data.encode("ascii"), hashlib.sha256).digest()
    return f"{data}.{_b64(mac)}"


def unsign(key: bytes, value: str, now: float) -> dict[str, Any] | None:
    """The payload of a value :func:`sign` made with ``key``, unless it expired before ``now``."""
    data, _, mac = value.partition(".")
    expected = _b64(hmac.new(key, data.encode("ascii"), hashlib.sha256).digest())
    if not mac or not hmac.compare_digest(mac, expected):
        return None
    try:
        payload = json.loads(_unb64(data))
    except ValueError:
        return None
    if not isinstance(payload, dict) or float(payload.get("e", 0)) < now:
        return None
    return payload


def _now(request: Request) -> float:
    return services(request).clock().timestamp()


def _signed(request: Request, name: str) -> dict[str, Any] | None:
    raw = request.cookies.get(name)
    return None if raw is None else unsign(_key(request), raw, _now(request))


def read_session(request: Request) -> Session | None:
    """The request's session, if its cookie is valid and the session has not ended.

    Blocking (a store read now and then, a write at most every minute or so):
    call it from a thread.
    """
    payload = _signed(request, COOKIE)
    session_id = None if payload is None else payload.get("s")
    if not isinstance(session_id, str) or not session_id:
        return None
    found = services(request).sessions.find(session_id)
    if found is None:
        return None
    try:
        role = Role(found.role)
    except ValueError:  # a token of a kind that has no dashboard
        return None
    return Session(found.token_id, found.name, role, found.csrf, session_id, found.expires_at)


def session(request: Request) -> Session:
    """A dependency: the session, or a redirect to the login page."""
    found = read_session(request)
    if found is None:
        raise LoginRequired
    return found


def open_session(request: Request, response: Response, token: TokenInfo) -> None:
    """Open a session for ``token`` and set its cookie (blocking: call it from a thread)."""
    session_id, _expires_at = services(request).sessions.open(token)
    # The signed expiry only spares the store a read for a cookie long dead; the row decides.
    cookie = sign(_key(request), {"s": session_id, "e": _now(request) + SESSION_S})
    _set(request, response, COOKIE, cookie, SESSION_S)
    response.delete_cookie(LOGIN_COOKIE, path="/web")


def close_session(request: Request, response: Response, current: Session) -> None:
    """End ``current`` on the server and forget its cookie (blocking: call it from a thread)."""
    services(request).sessions.close(current.session_id)
    response.delete_cookie(COOKIE, path="/")


def login_nonce(request: Request) -> tuple[str, str]:
    """A nonce for the login form and the signed cookie it is bound to (login CSRF)."""
    nonce = secrets.token_urlsafe(18)
    return nonce, sign(_key(request), {"l": nonce, "e": _now(request) + LOGIN_FORM_S})


def set_login_cookie(request: Request, response: Response, value: str) -> None:
    """Bind the login form's nonce to this browser."""
    _set(request, response, LOGIN_COOKIE, value, LOGIN_FORM_S, path="/web")


def check_login_nonce(request: Request, given: str) -> None:
    """Refuse a login form that did not come from our login page."""
    payload = _signed(request, LOGIN_COOKIE)
    expected = "" if payload is None else str(payload.get("l", ""))
    if not expected or not hmac.compare_digest(expected, given):
        raise CsrfRejected


def check_csrf(request: Request, current: Session, form: dict[str, str]) -> None:
    """Refuse a POST that does not carry this session's CSRF token."""
    given = request.headers.get(CSRF_HEADER) or form.get(CSRF_FIELD, "")
    if not given or not hmac.compare_digest(given, current.csrf):
        raise CsrfRejected


def _set(
    request: Request, response: Response, name: str, value: str, max_age: int, path: str = "/"
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=path,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
