"""Dashboard sessions: a signed, HTTP-only cookie and a CSRF token per session.

Logging in posts an API token once; the server checks it and keeps only the
token's id, name and role in a cookie signed with HMAC-SHA256 under a key
derived from the server's record key (so replicas sharing that key share
sessions). The raw API token is never stored. Every request checks that the
token has not been revoked since (within :data:`REVOKED_AFTER_S`). Every POST
carries the session's CSRF token in a form field or the ``X-CSRF-Token``
header; the cookie is ``SameSite=Strict`` as a second line.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from watchkeeper.decide.actors import Actor
from watchkeeper.runtime import Runtime
from watchkeeper.server.routes_timeline import record_key
from watchkeeper.store.tokens import Role, TokenInfo

COOKIE = "wk_session"
LOGIN_COOKIE = "wk_login"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
SESSION_S = 12 * 3600
LOGIN_FORM_S = 3600
#: A revoked token's sessions stop working within this time.
REVOKED_AFTER_S = 5.0


class LoginRequired(Exception):
    """No valid session: the browser is sent to the login page."""


class CsrfRejected(Exception):
    """A POST without the session's CSRF token."""


@dataclass(frozen=True, slots=True)
class Session:
    """Who is looking: the API token's id, name and role, and this session's CSRF token."""

    token_id: int
    name: str
    role: Role
    csrf: str
    expires: float

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
    derived = hmac.new(record_key(request), b"watchkeeper dashboard session", "sha256").digest()
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


def unsign(key: bytes, value: str) -> dict[str, Any] | None:
    """The payload of a value :func:`sign` made with ``key``, or ``None``."""
    data, _, mac = value.partition(".")
    expected = _b64(hmac.new(key, data.encode("ascii"), hashlib.sha256).digest())
    if not mac or not hmac.compare_digest(mac, expected):
        return None
    try:
        payload = json.loads(_unb64(data))
    except ValueError:
        return None
    if not isinstance(payload, dict) or float(payload.get("e", 0)) < time.time():
        return None
    return payload


class LiveTokens:
    """Ids of tokens not revoked, read at most every :data:`REVOKED_AFTER_S`."""

    def __init__(self) -> None:
        self._ids: frozenset[int] = frozenset()
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def alive(self, runtime: Runtime, token_id: int) -> bool:
        """Whether ``token_id`` still works (a blocking store read now and then)."""
        with self._lock:
            now = time.monotonic()
            if now - self._read_at > REVOKED_AFTER_S or token_id not in self._ids:
                tokens = runtime.store.tokens.list()
                self._ids = frozenset(t.id for t in tokens if t.revoked_at is None)
                self._read_at = now
            return token_id in self._ids

    def forget(self) -> None:
        """Read the store again on the next request (after a revocation in this process)."""
        with self._lock:
            self._read_at = float("-inf")


def _live_tokens(request: Request) -> LiveTokens:
    found = getattr(request.app.state, "web_live_tokens", None)
    if isinstance(found, LiveTokens):
        return found
    made = LiveTokens()
    request.app.state.web_live_tokens = made
    return made


def read_session(request: Request) -> Session | None:
    """The request's session, if its cookie is valid and its token not revoked."""
    raw = request.cookies.get(COOKIE)
    payload = None if raw is None else unsign(_key(request), raw)
    if payload is None:
        return None
    try:
        session = Session(
            int(payload["t"]),
            str(payload["n"]),
            Role(payload["r"]),
            str(payload["c"]),
            float(payload["e"]),
        )
    except (KeyError, ValueError):
        return None
    runtime: Runtime = request.app.state.runtime
    if not _live_tokens(request).alive(runtime, session.token_id):
        return None
    return session


def session(request: Request) -> Session:
    """A dependency: the session, or a redirect to the login page."""
    found = read_session(request)
    if found is None:
        raise LoginRequired
    return found


def open_session(request: Request, response: Response, token: TokenInfo) -> Session:
    """Set the session cookie for ``token``; a fresh CSRF token comes with it."""
    made = Session(
        token.id, token.name, token.role, secrets.token_urlsafe(24), time.time() + SESSION_S
    )
    payload = {
        "t": made.token_id,
        "n": made.name,
        "r": made.role.value,
        "c": made.csrf,
        "e": made.expires,
    }
    _set(request, response, COOKIE, sign(_key(request), payload), SESSION_S)
    response.delete_cookie(LOGIN_COOKIE, path="/web")
    return made


def close_session(response: Response) -> None:
    """Forget the session cookie."""
    response.delete_cookie(COOKIE, path="/")


def login_nonce(request: Request) -> tuple[str, str]:
    """A nonce for the login form and the signed cookie it is bound to (login CSRF)."""
    nonce = secrets.token_urlsafe(18)
    return nonce, sign(_key(request), {"l": nonce, "e": time.time() + LOGIN_FORM_S})


def set_login_cookie(request: Request, response: Response, value: str) -> None:
    """Bind the login form's nonce to this browser."""
    _set(request, response, LOGIN_COOKIE, value, LOGIN_FORM_S, path="/web")


def check_login_nonce(request: Request, given: str) -> None:
    """Refuse a login form that did not come from our login page."""
    raw = request.cookies.get(LOGIN_COOKIE)
    payload = None if raw is None else unsign(_key(request), raw)
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
