"""The HTTP API over real loopback HTTP: reports, lists, auth and bad input."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..conftest import make_settings
from ..support.live_server import LiveServer, live_server


@pytest.fixture
def api(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    settings = make_settings(tmp_path, store.url)
    runtime = Runtime.open(settings, store=store, notifier=OpsNotifier(settings.ops))
    with live_server(runtime) as server:
        yield server
    runtime.sweeper.close()


def push_run_count(server: LiveServer) -> int:
    from sqlalchemy import func, select

    from watchkeeper.store.schema import push_runs

    with server.runtime.store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(push_runs)).scalar_one())


def test_report_a_run_through_its_life(api: LiveServer) -> None:
    with api.client("reporter") as http:
        started = http.post(
            "/api/v1/runs",
            json={
                "kind": "chat_turn",
                "run_id": "turn-1",
                "title": "answer the user",
                "origin": {"platform": "slack", "chat_id": "C1", "thread_id": "1700000000.1"},
                "effects": "none",
                "lease_s": 60,
            },
        )
        assert started.status_code == 201, started.text
        body = started.json()
        assert body["status"] == "running"
        assert body["origin"] == {"platform": "slack", "chat_id": "C1", "thread_id": "1700000000.1"}
        token0 = body["state_token"]

        again = http.post(
            "/api/v1/runs", json={"kind": "chat_turn", "run_id": "turn-1", "title": "x"}
        )
        assert again.status_code == 200
        assert again.json()["state_token"] == token0

        moved = http.post("/api/v1/runs/chat_turn/turn-1/progress", json={"step": "tool call"})
        assert moved.json()["step"] == "tool call"
        assert moved.json()["state_token"] != token0
        beat = http.post("/api/v1/runs/chat_turn/turn-1/heartbeat")
        assert beat.json()["state_token"] == moved.json()["state_token"]
        assert (
            http.post("/api/v1/runs/chat_turn/turn-1/waiting", json={"reason": "approve?"}).json()[
                "status"
            ]
            == "waiting"
        )
        assert http.post("/api/v1/runs/chat_turn/turn-1/progress").json()["status"] == "running"
        failed = http.post(
            "/api/v1/runs/chat_turn/turn-1/fail",
            json={"reason": "model refused", "detail": "x" * 100},
        )
        assert failed.json()["failure"]["reason"] == "model refused"
        assert failed.json()["failure"]["fingerprint"]

    asyncio.run(api.runtime.sweeper.sweep())
    with api.client("viewer") as http:
        listing = http.get("/api/v1/runs").json()
        assert [i["run_id"] for i in listing["attention"]] == ["turn-1"]
        assert listing["attention"][0]["verdict"]["condition"] == "failed"
        incident_id = listing["attention"][0]["incident_id"]
        incident = http.get(f"/api/v1/incidents/{incident_id}").json()
        assert incident["condition"] == "failed"
        assert incident["origin"]["chat_id"] == "C1"
        assert [e["type"] for e in incident["events"]] == ["opened"]
        assert (
            http.get("/api/v1/incidents", params={"status": "open"}).json()["incidents"][0]["id"]
            == incident_id
        )
        assert http.get("/api/v1/runs/chat_turn/turn-1").json()["status"] == "failed"


def test_all_lists_what_finished_in_the_last_day(api: LiveServer) -> None:
    with api.client("reporter") as http:
        http.post("/api/v1/runs", json={"kind": "crawl", "run_id": "done-1", "title": "t"})
        http.post("/api/v1/runs/crawl/done-1/finish")
        http.post("/api/v1/runs", json={"kind": "crawl", "run_id": "busy-1", "title": "t"})
        plain = http.get("/api/v1/runs").json()
        everything = http.get("/api/v1/runs", params={"all": 1}).json()
    assert [i["run_id"] for i in plain["running"]] == ["busy-1"]
    assert plain["finished"] == []
    assert [i["run_id"] for i in everything["finished"]] == ["done-1"]


def test_auth_roles_and_json_errors(api: LiveServer) -> None:
    with api.client(None) as anonymous:
        missing = anonymous.get("/api/v1/runs")
        assert missing.status_code == 401
        assert missing.json()["error"]["code"] == "unauthorized"
        assert missing.headers["www-authenticate"] == "Bearer"
        forged = anonymous.get("/api/v1/runs", headers={"Authorization": "Bearer wk_forged"})
        assert forged.status_code == 401
        assert forged.json()["error"]["message"] == "unknown or revoked token"
        assert anonymous.get("/healthz").status_code == 200
    with api.client("viewer") as viewer:
        refused = viewer.post("/api/v1/runs", json={"kind": "crawl", "title": "t"})
        assert refused.status_code == 403
        assert "reporter role" in refused.json()["error"]["message"]
    with api.client("reporter") as reporter:
        assert reporter.post("/api/v1/tokens", json={"role": "admin"}).status_code == 403
    with api.client("admin") as admin:
        created = admin.post("/api/v1/tokens", json={"role": "viewer", "name": "dash"})
        assert created.status_code == 201
        secret = created.json()["token"]
    with api.client(None) as fresh:
        fresh.headers["Authorization"] = f"Bearer {secret}"
        assert fresh.get("/api/v1/runs").status_code == 200
    stored = [t.name for t in api.runtime.store.tokens.list()]
    assert "dash" in stored
    assert all(secret not in str(t) for t in api.runtime.store.tokens.list())


@pytest.mark.parametrize(
    ("path", "body", "status", "needle"),
    [
        ("/api/v1/runs", {"kind": "nope", "title": "t"}, 404, "unknown kind 'nope'"),
        (
            "/api/v1/runs",
            {"kind": "crawl", "title": "t" * 501},
            422,
            "title is too long: at most 500",
        ),
        (
            "/api/v1/runs",
            {"kind": "crawl", "title": "t", "colour": 1},
            422,
            "unknown field 'colour'",
        ),
        ("/api/v1/runs", {"kind": "crawl"}, 422, "title is required"),
        ("/api/v1/runs", {"kind": "crawl", "title": "t", "run_id": "a/b"}, 422, "run_id"),
        ("/api/v1/runs", {"kind": "crawl", "title": "t", "budget_s": -1}, 422, "budget_s"),
        (
            "/api/v1/runs",
            {"kind": "crawl", "title": "t", "started_at": "2999-01-01T00:00:00Z"},
            422,
            "is in the future",
        ),
        (
            "/api/v1/runs",
            {"kind": "crawl", "title": "t", "started_at": "2026-01-01T00:00:00"},
            422,
            "timezone",
        ),
    ],
)
def test_bad_starts_are_refused_and_store_nothing(
    api: LiveServer, path: str, body: dict[str, object], status: int, needle: str
) -> None:
    with api.client("reporter") as http:
        response = http.post(path, json=body)
    assert response.status_code == status, response.text
    assert needle in response.json()["error"]["message"]
    assert push_run_count(api) == 0


def test_bad_moves_are_refused_and_change_nothing(api: LiveServer) -> None:
    with api.client("reporter") as http:
        original = http.post(
            "/api/v1/runs", json={"kind": "crawl", "run_id": "r1", "title": "t"}
        ).json()
        cases = [
            ("/api/v1/runs/crawl/r1/progress", {"step": "s" * 2001}, 422, "at most 2000"),
            (
                "/api/v1/runs/crawl/r1/fail",
                {"reason": "x", "detail": "d" * (64 * 1024 + 1)},
                422,
                "at most 65536",
            ),
            (
                "/api/v1/runs/crawl/r1/progress",
                {"at": (datetime.now(UTC) + timedelta(hours=1)).isoformat()},
                422,
                "in the future",
            ),
            ("/api/v1/runs/crawl/nope/progress", {}, 404, "no crawl run 'nope'"),
            ("/api/v1/runs/chat_turn/r1/progress", {}, 409, "already belongs to kind 'crawl'"),
            ("/api/v1/runs/nokind/r1/progress", {}, 404, "unknown kind"),
            ("/api/v1/runs/crawl/r1/fail", {}, 422, "reason is required"),
        ]
        for path, body, status, needle in cases:
            response = http.post(path, json=body)
            assert response.status_code == status, (path, response.text)
            assert needle in response.json()["error"]["message"], (path, response.text)
        reused = http.post("/api/v1/runs", json={"kind": "chat_turn", "run_id": "r1", "title": "t"})
        assert reused.status_code == 409
        assert "already belongs to kind 'crawl'" in reused.json()["error"]["message"]
        after = http.get("/api/v1/runs/crawl/r1").json()
    assert after["state_token"] == original["state_token"]
    assert after["step"] is None


def test_malformed_and_oversized_bodies(api: LiveServer) -> None:
    with api.client("reporter") as http:
        malformed = http.post(
            "/api/v1/runs",
            content=b'{"kind": "crawl", ',
            headers={"Content-Type": "application/json"},
        )
        assert malformed.status_code == 400
        assert malformed.json()["error"]["code"] == "malformed_json"
        huge = http.post(
            "/api/v1/runs",
            content=b'{"kind": "crawl", "title": "' + b"x" * 300_000 + b'"}',
            headers={"Content-Type": "application/json"},
        )
        assert huge.status_code == 413
        assert "larger than" in huge.json()["error"]["message"]
        ended = http.post("/api/v1/runs", json={"kind": "crawl", "run_id": "e1", "title": "t"})
        assert ended.status_code == 201
        http.post("/api/v1/runs/crawl/e1/finish")
        late = http.post("/api/v1/runs/crawl/e1/progress")
        assert late.status_code == 409
        assert "has already ended (succeeded)" in late.json()["error"]["message"]
        assert http.get("/api/v1/incidents/999999").status_code == 404
        assert http.get("/api/v1/nothing-here").json()["error"]["code"] == "not_found"
    assert push_run_count(api) == 1


def test_health_and_metrics(api: LiveServer) -> None:
    with api.client("reporter") as http:
        http.post("/api/v1/runs", json={"kind": "crawl", "run_id": "m1", "title": "t"})
        http.post("/api/v1/runs/crawl/m1/fail", json={"reason": "boom"})
    asyncio.run(api.runtime.sweeper.sweep())
    with api.client(None) as http:
        health = http.get("/healthz")
        assert health.status_code == 200
        assert health.json()["supervision"]["working"] is True
        metrics = http.get("/metrics").text
    assert 'watchkeeper_runs{kind="crawl",verdict="failed"} 1.0' in metrics
    assert "watchkeeper_sweep_duration_seconds_count 1.0" in metrics
    assert 'watchkeeper_kind_unreadable{kind="crawl"} 0.0' in metrics
