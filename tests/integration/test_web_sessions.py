"""Dashboard sessions live on the server: logging out, revoking the token or idling ends them.

Real server on loopback, real HTTP with cookies, both stores; time rules run on
the runtime's injected clock.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import httpx
import pytest
from sqlalchemy import func, select

from tests.support.waiting import TIMEOUT_S
from watchkeeper.clock import ManualClock
from watchkeeper.runtime import Runtime
from watchkeeper.server.web import session as web_session
from watchkeeper.store.schema import metadata

from ..support.live_server import LiveServer, live_server
from ..support.web_login import csrf_of, log_in

RUNBOOK = "/web/runbooks/retry_out_of_attempts"


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


@contextmanager
def _login(server: LiveServer, role: str = "admin") -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT_S) as web:
        log_in(web, server.tokens[role])
        yield web


def _with_cookie(server: LiveServer, cookie: str) -> httpx.Client:
    """A browser that kept the old cookie (logging out cannot make a copy forget it)."""
    client = httpx.Client(base_url=server.url, timeout=TIMEOUT_S)
    client.cookies.set(web_session.COOKIE, cookie)
    return client


def _logged_in(web: httpx.Client) -> bool:
    answer = web.get("/web/")
    if answer.status_code == 200:
        return True
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/web/login")
    return False


def _switch(web: httpx.Client, csrf: str) -> httpx.Response:
    return web.post(
        RUNBOOK,
        data={"enabled": "1", "csrf": csrf},
        headers={"accept": "application/json", "x-csrf-token": csrf},
    )


def _switched_on(server: LiveServer) -> bool:
    switches = server.runtime.runbooks.switches()
    return next(s for s in switches if s.runbook.name == "retry_out_of_attempts").enabled


def _rows(server: LiveServer) -> int:
    table = metadata.tables["web_sessions"]
    with server.runtime.store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def test_after_logout_the_old_cookie_reads_nothing_and_acts_on_nothing(
    server: LiveServer,
) -> None:
    with _login(server) as web:
        csrf = csrf_of(web)
        cookie = web.cookies[web_session.COOKIE]
        assert web.post("/web/logout", data={"csrf": csrf}).status_code == 303
    with _with_cookie(server, cookie) as kept:
        assert not _logged_in(kept)
        asked = kept.get("/web/", headers={"accept": "application/json"})
        assert asked.status_code == 401
        assert asked.json()["error"]["code"] == "unauthorized"
        refused = _switch(kept, csrf)
        assert refused.status_code == 401
    assert not _switched_on(server)


def test_a_revoked_token_ends_its_sessions(server: LiveServer, clock: ManualClock) -> None:
    store = server.runtime.store
    with _login(server) as web, _login(server, "viewer") as other:
        csrf = csrf_of(web)
        admin = next(t for t in store.tokens.list() if t.name == "test admin")
        store.tokens.revoke(admin.id, clock())
        # Another process revoked it: this one sees it once its short cache lapses.
        clock.advance(web_session.CACHE_S + 1)
        assert not _logged_in(web)
        assert _switch(web, csrf).status_code == 401
        assert _logged_in(other)
    assert not _switched_on(server)


def test_a_session_left_idle_ends_and_one_in_use_ends_at_its_lifetime(
    server: LiveServer, clock: ManualClock
) -> None:
    with _login(server) as idle:
        clock.advance(web_session.IDLE_S + 1)
        assert not _logged_in(idle)
    with _login(server) as busy:
        step = web_session.IDLE_S - 60
        used = 0.0
        while used + step < web_session.SESSION_S:
            clock.advance(step)
            used += step
            assert _logged_in(busy), f"ended after {used} s of use"
        clock.advance(web_session.SESSION_S - used + 1)
        assert not _logged_in(busy)


def test_ended_sessions_are_pruned(server: LiveServer, clock: ManualClock) -> None:
    with _login(server) as first:
        assert web_session.COOKIE in first.cookies
    with _login(server) as second:
        second.post("/web/logout", data={"csrf": csrf_of(second)})
    assert _rows(server) == 2
    clock.advance(web_session.IDLE_S + 1)
    with _login(server) as third:
        assert _logged_in(third)
    assert _rows(server) == 1


#: Random tokens of ours that happen to look like credentials (an OpenAI key's prefix, an
#: AWS access key id's shape, our own API tokens' prefix): about 1 in 28,000 CSRF tokens
#: and 1 in 25,000 login nonces does. Pages redact what they print, and printed masked,
#: every post of that session was refused as out of date.
LOOK_LIKE_SECRETS = ("sk-P8dRtrHwYt8pKRYxFmSTYz5LoHJUT", "AKChM5Q6ztFuXSfy15XDII366k8Qqrb6")


@pytest.mark.parametrize("csrf", LOOK_LIKE_SECRETS)
def test_a_csrf_token_that_looks_like_a_secret_is_printed_as_it_is_and_accepted(
    server: LiveServer, csrf: str
) -> None:
    table = metadata.tables["web_sessions"]
    with _login(server) as web:
        with server.runtime.store.engine.begin() as conn:
            conn.execute(table.update().values(csrf=csrf))
        server.runtime.sessions.forget()
        assert csrf_of(web) == csrf
        fields = re.findall(r'name="csrf" value="([^"]+)"', web.get("/web/").text)
        assert fields and {html.unescape(f) for f in fields} == {csrf}  # the forms' too
        assert _switch(web, csrf).json()["ok"] is True
    assert _switched_on(server)


@pytest.mark.parametrize("nonce", LOOK_LIKE_SECRETS)
def test_a_login_nonce_that_looks_like_a_secret_still_logs_in(
    server: LiveServer, nonce: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = SimpleNamespace(token_urlsafe=lambda _size: nonce)
    monkeypatch.setattr(web_session, "secrets", made)
    with _login(server) as web:
        assert _logged_in(web)
