"""The canvas's post that routes a program's notices, over real HTTP: a session and its CSRF
token, admins only, clear 4xx answers, and the route read back from the program and its run.

The server of ``test_canvas_actions``: a group ``crawl`` (no ``notify`` of its own) of two
programs and two programs alone, real processes.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..support.live_server import LiveServer
from ..support.waiting import wait_for
from .test_canvas_actions import _post, _session, server

__all__ = ["server"]

TOML = "watchkeeper.toml still says what it said, so a restart of the server goes back to it"


def _notify(server: LiveServer, name: str) -> dict[str, Any]:
    with server.client("viewer") as api:
        found: dict[str, Any] = api.get(f"/api/v1/programs/{name}").json()["notify"]
    return found


def _run_origin(server: LiveServer, name: str) -> dict[str, str] | None:
    host = server.runtime.programs.host
    origin: dict[str, str] | None = server.runtime.store.runs.get(
        "program", f"{name}@{host}"
    ).origin
    return origin


def test_a_viewer_is_refused_and_nothing_moves(server: LiveServer) -> None:
    with _session(server, "viewer") as (web, csrf):
        answer = _post(web, csrf, "/web/canvas/programs/indexer/notify", {"to": "programs/crawl"})
    assert answer.status_code == 403
    assert answer.json() == {
        "ok": False,
        "message": "only admins route notices: @test viewer is not",
    }
    assert _notify(server, "indexer") == {"to": "ops", "set_by": "default"}


def test_the_post_wants_the_sessions_csrf_token(server: LiveServer) -> None:
    with _session(server) as (web, _csrf):
        answer = _post(web, None, "/web/canvas/programs/indexer/notify", {"to": "server"})
    assert answer.status_code == 403
    assert "CSRF" in answer.json()["message"]


@pytest.mark.parametrize(
    ("name", "body", "status", "says"),
    [
        ("indexer", {}, 400, "'to' is required"),
        ("indexer", {"to": "server/sweeper"}, 404, "no supervisor 'server/sweeper' to route to"),
        ("indexer", {"to": "programs/mailer"}, 404, "no program group 'mailer'"),
        ("indexer", {"to": "programs/crawl/parser"}, 404, "no supervisor"),
        ("crawl", {"to": "server"}, 409, "crawl is a group: only a program's notices are routed"),
        ("nobody", {"to": "server"}, 404, "no program or group 'nobody'"),
    ],
)
def test_bad_input_is_answered_4xx_with_the_reason(
    server: LiveServer, name: str, body: Any, status: int, says: str
) -> None:
    with _session(server) as (web, csrf):
        answer = _post(web, csrf, f"/web/canvas/programs/{name}/notify", body)
    assert answer.status_code == status, answer.text
    assert answer.json()["ok"] is False
    assert says in answer.json()["message"]


def test_an_edge_to_a_group_without_notify_routes_to_ops_and_says_so(server: LiveServer) -> None:
    programs = server.runtime.programs
    wait_for(lambda: programs.programs["indexer"].recorded, what="indexer's run recorded")
    with _session(server) as (web, csrf):
        to_group = _post(web, csrf, "/web/canvas/programs/indexer/notify", {"to": "programs/crawl"})
        assert to_group.json() == {
            "ok": True,
            "message": "indexer's notices go to the ops channels (log) now (group crawl has no "
            f"notify of its own, so it routes to ops): saved to the running configuration; {TOML}",
            "program": "indexer",
            "notify": {"to": "ops", "set_by": "program"},
        }
        # Back to its own group: it follows the group's notify again.
        own = _post(web, csrf, "/web/canvas/programs/crawler/notify", {"to": "programs/crawl"})
        assert own.json()["notify"] == {"to": "ops", "set_by": "default"}
    assert _notify(server, "indexer") == {"to": "ops", "set_by": "program"}
    assert _run_origin(server, "indexer") is None
