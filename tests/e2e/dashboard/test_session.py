"""Login, the session cookie and CSRF, over plain HTTP (no browser needed)."""

from __future__ import annotations

import httpx

from watchkeeper.store.tokens import Role

from ...support.web_login import csrf_of, page_value
from .conftest import Dashboard


def _login(dashboard: Dashboard, web: httpx.Client, token: str) -> httpx.Response:
    nonce = page_value(r'name="nonce" value="([^"]+)"', web.get("/web/login").text)
    return web.post("/web/login", data={"token": token, "nonce": nonce})


def _csrf(web: httpx.Client) -> str:
    return csrf_of(web)


def test_the_session_cookie_is_signed_http_only_strict_and_never_holds_the_token(
    dashboard: Dashboard,
) -> None:
    secret = dashboard.token("ana")
    with httpx.Client(base_url=dashboard.url) as web:
        assert web.get("/web/jobs?fleet=gpu").headers["location"] == (
            "/web/login?next=%2Fweb%2Fjobs%3Ffleet%3Dgpu"
        )
        refused = _login(dashboard, web, "wk_not_a_token")
        assert refused.status_code == 401
        assert "unknown or revoked token" in refused.text
        answer = _login(dashboard, web, secret)
        assert answer.status_code == 303
        cookie = next(c for c in answer.headers.get_list("set-cookie") if "wk_session=" in c)
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        assert secret not in cookie
        assert web.get("/web/").status_code == 200

        web.cookies.set("wk_session", web.cookies["wk_session"][:-2] + "xx")
        assert web.get("/web/").status_code == 303  # a forged signature is no session


def test_every_acting_post_needs_the_sessions_csrf_token(dashboard: Dashboard) -> None:
    with httpx.Client(base_url=dashboard.url) as web:
        _login(dashboard, web, dashboard.token("ana"))
        csrf = _csrf(web)
        posts = [
            "/web/incidents/1/press",
            "/web/jobs/j-00/cancel",
            "/web/procs/p1/abort",
            "/web/runbooks/retry_out_of_attempts",
            "/web/logout",
        ]
        for path in posts:
            refused = web.post(
                path, data={"action": "retry"}, headers={"accept": "application/json"}
            )
            assert refused.status_code == 403, path
            assert "CSRF" in refused.json()["message"]
        switched = web.post(
            "/web/runbooks/retry_out_of_attempts",
            data={"enabled": "1"},
            headers={"accept": "application/json", "x-csrf-token": csrf},
        )
        assert switched.json() == {"ok": True, "message": "retry_out_of_attempts is now on"}
        # Without the login page's nonce, a login form is refused too.
        with httpx.Client(base_url=dashboard.url) as other:
            forged = other.post("/web/login", data={"token": dashboard.token("ana"), "nonce": "x"})
            assert forged.headers["location"].startswith("/web/login?notice=")


def test_viewers_are_refused_when_they_act_and_a_revoked_token_ends_its_sessions(
    dashboard: Dashboard,
) -> None:
    with httpx.Client(base_url=dashboard.url) as web:
        _login(dashboard, web, dashboard.token("vic", Role.VIEWER))
        answer = web.post(
            "/web/jobs/j-00/cancel",
            data={"csrf": _csrf(web)},
            headers={"accept": "application/json"},
        )
        assert answer.json() == {"ok": False, "message": "only admins cancel jobs: @vic is not"}
        token = next(t for t in dashboard.runtime.store.tokens.list() if t.name == "vic")
        dashboard.runtime.store.tokens.revoke(token.id, dashboard.runtime.clock())
        # Another process's revocation is read within CACHE_S; forget to read it at once.
        dashboard.runtime.sessions.forget()
        assert web.get("/web/").headers["location"] == "/web/login?next=%2Fweb%2F"
