"""The canvas's own posts over real HTTP: a session and its CSRF token, admins only, clear
4xx answers for bad input, and each post's effect read back from the services.

A real server on loopback running a program group (real processes) and host checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..conftest import make_settings
from ..support.live_server import LiveServer, live_server
from ..support.waiting import wait_for
from ..support.web_login import logged_in

PROGRAMS = {
    "crawler": {"command": ["sleep", "300"], "group": "crawl", "start_s": 0},
    "parser": {"command": ["sleep", "300"], "group": "crawl", "start_s": 0},
    "indexer": {"command": ["sleep", "300"], "start_s": 0},
    "mailer": {"command": ["sleep", "300"], "start_s": 0},
}


@pytest.fixture
def server(tmp_path: Path, store: Store, clock: ManualClock) -> Iterator[LiveServer]:
    checks = {"memory": {"kind": "memory", "min_available_mb": 1, "pauses": ["crawl"]}}
    settings = make_settings(
        tmp_path, store.url, programs=PROGRAMS, groups={"crawl": {}}, host_checks=checks
    )
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    try:
        with live_server(runtime) as live:
            yield live
    finally:
        for run in runtime.procs.runs():
            runtime.procs.abort(run.run_id, grace_s=0)
        runtime.sweeper.close()


@contextmanager
def _session(server: LiveServer, role: str = "admin") -> Iterator[tuple[httpx.Client, str]]:
    """A logged-in browser and its CSRF token."""
    with logged_in(server.url, server.tokens[role]) as (web, csrf):
        yield web, csrf


def _post(web: httpx.Client, csrf: str | None, path: str, body: Any) -> httpx.Response:
    headers = {"accept": "application/json"}
    if csrf is not None:
        headers["x-csrf-token"] = csrf
    return web.post(path, json=body, headers=headers)


def test_every_canvas_post_wants_the_sessions_csrf_token(server: LiveServer) -> None:
    with _session(server) as (web, _csrf):
        for path, body in (
            ("/web/canvas/runs", {"program": "crawler"}),
            ("/web/canvas/health-flag", {"healthy": False}),
            ("/web/canvas/supervisors/programs/crawl/strategy", {"strategy": "one_for_all"}),
            ("/web/canvas/host-checks/memory/floor", {"mb": 2}),
            ("/web/canvas/runs/p-nothing/reclaim", {}),
            ("/web/canvas/breakers/notify:log/probe", {}),
            ("/web/canvas/groups", {"name": "g", "programs": ["indexer", "mailer"]}),
        ):
            answer = _post(web, None, path, body)
            assert answer.status_code == 403, (path, answer.text)
            assert "CSRF" in answer.json()["message"]
    assert server.runtime.procs.runs() == []


def test_a_viewer_is_refused_every_canvas_action(server: LiveServer) -> None:
    with _session(server, "viewer") as (web, csrf):
        answer = _post(web, csrf, "/web/canvas/health-flag", {"healthy": False})
        assert answer.status_code == 403
        assert answer.json() == {
            "ok": False,
            "message": "only admins switch the healthy flag: @test viewer is not",
        }
        answer = _post(web, csrf, "/web/canvas/runs", {"program": "crawler"})
        assert answer.status_code == 403
    assert server.runtime.procs.runs() == []


@pytest.mark.parametrize(
    ("path", "body", "status", "says"),
    [
        ("/web/canvas/runs", {}, 400, "'program' is required"),
        ("/web/canvas/runs", [1, 2], 400, "must be a JSON object"),
        ("/web/canvas/runs", {"program": "nothing"}, 404, "no program 'nothing'"),
        ("/web/canvas/health-flag", {"healthy": "maybe"}, 400, "true or false"),
        ("/web/canvas/supervisors/programs/crawl/strategy", {"strategy": "all"}, 400, "not a"),
        ("/web/canvas/supervisors/elsewhere/strategy", {"strategy": "one_for_all"}, 404, "no"),
        ("/web/canvas/host-checks/memory/floor", {"mb": -1}, 400, "more than 0"),
        ("/web/canvas/host-checks/memory/floor", {"mb": "lots"}, 400, "a number"),
        ("/web/canvas/host-checks/memory/floor", {"mb": True}, 400, "a number"),
        ("/web/canvas/host-checks/disk/floor", {"mb": 5}, 404, "no host check 'disk'"),
        ("/web/canvas/runs/p-nothing/reclaim", {}, 404, "p-nothing"),
        ("/web/canvas/breakers/nothing/probe", {}, 404, "no circuit breaker 'nothing'"),
        ("/web/canvas/groups", {"name": "../g", "programs": ["indexer"]}, 400, "not a group"),
        ("/web/canvas/groups", {"name": "g", "programs": "indexer"}, 400, "a list"),
        ("/web/canvas/groups", {"name": "g", "programs": ["indexer"]}, 409, "two programs"),
        ("/web/canvas/groups", {"name": "crawl", "programs": ["indexer", "mailer"]}, 409, "taken"),
        ("/web/canvas/groups", {"name": "g", "programs": ["crawler", "mailer"]}, 409, "already"),
        ("/web/canvas/groups", {"name": "g", "programs": ["nobody", "mailer"]}, 404, "nobody"),
    ],
)
def test_bad_input_is_answered_4xx_with_the_reason(
    server: LiveServer, path: str, body: Any, status: int, says: str
) -> None:
    with _session(server) as (web, csrf):
        answer = _post(web, csrf, path, body)
    assert answer.status_code == status, answer.text
    assert answer.json()["ok"] is False
    assert says in answer.json()["message"]


def test_the_posts_change_what_the_server_holds(server: LiveServer) -> None:
    programs = server.runtime.programs
    wait_for(lambda: "crawl" in programs.groups, what="the group started")
    with _session(server) as (web, csrf):
        started = _post(web, csrf, "/web/canvas/runs", {"program": "crawler"}).json()
        assert started["ok"], started
        run = server.runtime.procs.get(started["run_id"])
        assert (run.argv, run.origin) == (("sleep", "300"), {"program": "crawler", "via": "canvas"})
        # A live run is not stale: reclaiming it is refused, and it goes on.
        refused = _post(web, csrf, f"/web/canvas/runs/{run.run_id}/reclaim", {})
        assert refused.status_code == 409
        assert not server.runtime.procs.get(run.run_id).status.ended

        switched = _post(
            web,
            csrf,
            "/web/canvas/supervisors/programs/crawl/strategy",
            {"strategy": "one_for_all"},
        ).json()
        assert "saved to the running configuration" in switched["message"]
        plan = next(g for g in programs.plans if g.name == "crawl")
        assert plan.strategy.value == "one_for_all"
        assert programs.groups["crawl"].supervisor.spec.strategy.value == "one_for_all"

        floor = _post(web, csrf, "/web/canvas/host-checks/memory/floor", {"mb": 3}).json()
        assert floor["ok"], floor
        assert programs.gates.gates[0].config.min_available_mb == 3

        flag = _post(web, csrf, "/web/canvas/health-flag", {"healthy": False}).json()
        assert flag["ok"], flag
        shown = web.get("/web/canvas.json").json()
        assert shown["endpoint"]["flag_healthy"] is False
        assert shown["monitor"]["status"] == "unhealthy"
        assert shown["endpoint"]["path"] == "/healthz"
        assert any(r["id"] == run.run_id for r in shown["runs"])
        # Switched off, the flag takes the process out of service where orchestrators look.
        health = web.get("/healthz")
        assert health.status_code == 503, health.text
        flagged = [c for c in health.json()["causes"] if c["check"] == "flag"]
        assert flagged and flagged[0]["status"] == "failing"
        assert "switched off (switched off on the canvas)" in flagged[0]["detail"]
        _post(web, csrf, "/web/canvas/health-flag", {"healthy": True})
        assert web.get("/web/canvas.json").json()["endpoint"]["flag_healthy"] is True
        assert all(c["check"] != "flag" for c in web.get("/healthz").json()["causes"])


def test_a_program_a_low_dial_pauses_gets_no_new_run(server: LiveServer) -> None:
    with _session(server) as (web, csrf):
        high = {"mb": 1e8}  # a hundred terabytes available: no host has it
        assert _post(web, csrf, "/web/canvas/host-checks/memory/floor", high).json()["ok"]
        answer = _post(web, csrf, "/web/canvas/runs", {"program": "crawler"})
    assert answer.status_code == 409
    assert "paused by host check memory" in answer.json()["message"]
    assert server.runtime.procs.runs() == []


def test_a_group_built_of_programs_alone_runs_them(server: LiveServer) -> None:
    programs = server.runtime.programs
    wait_for(lambda: "mailer" in programs.groups, what="the programs started")
    with _session(server) as (web, csrf):
        body = {"name": "mail", "programs": ["mailer", "indexer"]}
        built = _post(web, csrf, "/web/canvas/groups", body).json()
    assert built["ok"], built
    plan = next(g for g in programs.plans if g.name == "mail")
    # In the file's order, whatever order they were dropped in.
    assert [p.name for p in plan.programs] == ["indexer", "mailer"]
    assert {"indexer", "mailer"}.isdisjoint(g.name for g in programs.plans)
    members = {c.name for c in programs.groups["mail"].supervisor.children()}
    assert members == {"indexer", "mailer"}
    wait_for(
        lambda: all(c.state == "running" for c in programs.groups["mail"].supervisor.children()),
        what="both running under the new group",
    )


def test_a_program_node_is_restarted_and_stopped_by_its_canvas_id(server: LiveServer) -> None:
    programs = server.runtime.programs
    wait_for(lambda: "crawl" in programs.groups, what="the group started")
    crawler = programs.programs["crawler"]
    with _session(server) as (web, csrf):
        restarted = _post(web, csrf, "/web/supervision/children/programs/crawl/crawler/restart", {})
        assert restarted.status_code == 200, restarted.text
        assert restarted.json() == {"ok": True, "message": "crawler restarted"}
        assert crawler.restarts == 1
        stopped = _post(web, csrf, "/web/supervision/children/programs/mailer/stop", {})
        assert stopped.status_code == 200, stopped.text
        assert programs.programs["mailer"].wanted is False
        unknown = _post(web, csrf, "/web/supervision/children/programs/crawl/nobody/stop", {})
    assert unknown.status_code == 404
    assert "nobody" in unknown.json()["message"]
