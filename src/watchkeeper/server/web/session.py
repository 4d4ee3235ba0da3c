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

Lookups are kept in this process for :data:`CACHE_S` (on the runtime's
clock). Logging out forgets the session here at once; another replica, or a
token revoked from the command line, is seen within that time. Ended rows are
deleted when someone logs in.

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
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from watchkeeper.decide.actors import Actor
from watchkeeper.errors import WatchkeeperError
from watchkeeper.runtime import Runtime
from watchkeeper.server.routes_timeline import record_key
from watchkeeper.store import Store
from watchkeeper.store.sessions import WebSession
from watchkeeper.store.tokens import Role, TokenInfo

COOKIE = "wk_session"
LOGIN_COOKIE = "wk_login"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
#: A session's absolute lifetime: it ends this long after login, however busy.
SESSION_S = 12 * 3600
#: A session not used for this long ends (the idle timeout).
IDLE_S = 2 * 3600
#: Use is written down at most this often per session (the idle timeout is this coarse).
TOUCH_EVERY_S = 60.0
#: How long a looked-up session is trusted in this process: a session logged out on
#: another replica, or a token revoked elsewhere, still works here for at most this long.
CACHE_S = 5.0
#: Most sessions kept in one process's cache; past it, the cache starts afresh.
MAX_CACHED = 4096
LOGIN_FORM_S = 3600


class LoginRequired(WatchkeeperError):
    """No valid session: the browser is sent to the login page (a script is told 401)."""

    http_status = 401
    code = "unauthorized"


class CsrfRejected(WatchkeeperError):
    """A POST without the session's CSRF token."""

    http_status = 403
    code = "forbidden"


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


class SessionCache:
    """Sessions looked up in the last :data:`CACHE_S` seconds, by session id."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[datetime, WebSession | None]] = {}
        self._lock = threading.Lock()

    def find(self, store: Store, session_id: str, now: datetime) -> WebSession | None:
        """The session's row as recently read, or read now (a blocking store read)."""
        with self._lock:
            kept = self._kept.get(session_id)
        # A clock that went back makes an entry stale too, so it never lives longer.
        if kept is not None and 0 <= (now - kept[0]).total_seconds() < CACHE_S:
            return kept[1]
        found = store.web_sessions.find(session_id)
        self.keep(session_id, now, found)
        return found

    def keep(self, session_id: str, read_at: datetime, found: WebSession | None) -> None:
        """Remember ``found`` as read at ``read_at``."""
        with self._lock:
            if len(self._kept) >= MAX_CACHED:
                self._kept.clear()
            self._kept[session_id] = (read_at, found)

    def touched(self, session_id: str, now: datetime) -> None:
        """The session was used at ``now``: keep that without reading again."""
        with self._lock:
            kept = self._kept.get(session_id)
            if kept is not None and kept[1] is not None:
                self._kept[session_id] = (kept[0], dataclasses.replace(kept[1], last_seen_at=now))

    def forget(self, session_id: str | None = None) -> None:
        """Read ``session_id`` (or every session) from the store on its next request."""
        with self._lock:
            if session_id is None:
                self._kept.clear()
            else:
                self._kept.pop(session_id, None)


def session_cache(request: Request) -> SessionCache:
    """The app's session cache, made on first use."""
    found = getattr(request.app.state, "web_sessions", None)
    if isinstance(found, SessionCache):
        return found
    made = SessionCache()
    request.app.state.web_sessions = made
    return made


def _ended(found: WebSession, now: datetime) -> bool:
    return now >= found.expires_at or (now - found.last_seen_at).total_seconds() >= IDLE_S


def read_session(request: Request) -> Session | None:
    """The request's session, if its cookie is valid and the session has not ended.

    Blocking (a store read now and then, a write at most every :data:`TOUCH_EVERY_S`):
    call it from a thread.
    """
    raw = request.cookies.get(COOKIE)
    payload = None if raw is None else unsign(_key(request), raw)
    session_id = None if payload is None else payload.get("s")
    if not isinstance(session_id, str) or not session_id:
        return None
    runtime: Runtime = request.app.state.runtime
    now = runtime.clock()
    cache = session_cache(request)
    found = cache.find(runtime.store, session_id, now)
    if found is None or _ended(found, now):
        return None
    try:
        role = Role(found.role)
    except ValueError:  # a token of a kind that has no dashboard
        return None
    if (now - found.last_seen_at).total_seconds() >= TOUCH_EVERY_S:
        runtime.store.web_sessions.touch(session_id, now)
        cache.touched(session_id, now)
    return Session(found.token_id, found.name, role, found.csrf, session_id, found.expires_at)


def session(request: Request) -> Session:
    """A dependency: the session, or a redirect to the login page."""
    found = read_session(request)
    if found is None:
        raise LoginRequired
    return found


def open_session(request: Request, response: Response, token: TokenInfo) -> None:
    """Open a session for ``token`` and set its cookie (blocking: call it from a thread).

    Sessions that have ended are pruned first, so the table holds only live ones
    and those not yet noticed.
    """
    runtime: Runtime = request.app.state.runtime
    store = runtime.store.web_sessions
    now = runtime.clock()
    store.prune(now, now - timedelta(seconds=IDLE_S))
    session_id = store.open(token.id, now, now + timedelta(seconds=SESSION_S))
    # The signed expiry only spares the store a read for a cookie long dead; the row decides.
    cookie = sign(_key(request), {"s": session_id, "e": time.time() + SESSION_S})
    _set(request, response, COOKIE, cookie, SESSION_S)
    response.delete_cookie(LOGIN_COOKIE, path="/web")


def close_session(request: Request, response: Response, current: Session) -> None:
    """End ``current`` on the server and forget its cookie (blocking: call it from a thread)."""
    runtime: Runtime = request.app.state.runtime
    runtime.store.web_sessions.revoke(current.session_id, runtime.clock())
    session_cache(request).forget(current.session_id)
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
