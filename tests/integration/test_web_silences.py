"""The dashboard's silences page and "I am on it" on an incident's page, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from watchkeeper.clock import ManualClock
from watchkeeper.runtime import Runtime

from ..support import web_login
from ..support.live_server import LiveServer, live_server
from .helpers import start, sweep


@contextmanager
def logged_in(server: LiveServer, role: str = "admin") -> Iterator[tuple[httpx.Client, str]]:
    """A browser logged in with the ``role`` token, and its CSRF token."""
    with web_login.logged_in(server.url, server.tokens[role]) as (web, csrf):
        yield web, csrf


def act(web: httpx.Client, csrf: str, path: str, **fields: str) -> dict[str, object]:
    response = web.post(
        path,
        data={**fields, "csrf": csrf},
        headers={"accept": "application/json", "x-csrf-token": csrf},
    )
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_the_dashboard_adds_lists_and_expires_silences_and_acknowledges(
    runtime: Runtime, clock: ManualClock
) -> None:
    start(runtime, "c1", "crawl", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(runtime)
    (incident,) = runtime.store.incidents.list("live")
    with live_server(runtime) as server, logged_in(server) as (web, csrf):
        bad = act(web, csrf, "/web/silences", title="(", title_syntax="regex", duration="1h")
        added = act(web, csrf, "/web/silences", kind="crawl", duration="2h", comment="reindex")
        listed = web.get("/web/silences").text
        acked = act(web, csrf, f"/web/incidents/{incident.id}/ack")
        page = web.get(f"/web/incidents/{incident.id}").text
        expired = act(web, csrf, f"/web/silences/{added['silence_id']}/expire")
        with logged_in(server, "viewer") as (viewer, viewer_csrf):
            refused = act(viewer, viewer_csrf, "/web/silences", kind="crawl", duration="1h")
            shown = viewer.get("/web/silences").text
    assert bad["ok"] is False and "not a valid regular expression" in str(bad["message"])
    assert added["ok"] is True
    assert "kind=crawl" in listed and "reindex" in listed and ">Expire</button>" in listed
    assert acked == {"ok": True, "message": "noted: @test admin is on it"}
    assert f'by <a href="/web/silences">silence {added["silence_id"]}</a>' in page
    assert "@test admin on dashboard since" in page and ">I am on it</button>" in page
    assert expired["ok"] is True
    assert refused["ok"] is False and "only admins silence work" in str(refused["message"])
    assert ">Expire</button>" not in shown and "expired" in shown
    (made,) = runtime.silences.list()
    assert (made.created_by, made.created_via, made.expired_by) == (
        "@test admin",
        "dashboard",
        "@test admin",
    )
