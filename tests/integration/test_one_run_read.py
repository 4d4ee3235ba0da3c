"""Reading one run reads that run: ``GET /api/v1/runs/{kind}/{id}`` costs what one row costs.

Guards that are not timed: the statements one read sends are the same however many runs
the store holds, and on SQLite none of them scans a whole table of runs or incidents.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from watchkeeper.clock import utcnow
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.server.app import create_app
from watchkeeper.store import Store
from watchkeeper.store.runs import NewRun
from watchkeeper.store.tokens import Role

from ..conftest import make_settings

KIND = "crawl"
WHOLE_TABLES = ("push_runs", "incidents")


@pytest.fixture
def http(tmp_path: Path, store: Store) -> Iterator[TestClient]:
    settings = make_settings(tmp_path, store.url)
    runtime = Runtime.open(settings, clock=utcnow, store=store, notifier=OpsNotifier(settings.ops))
    _, token = store.tokens.create(Role.VIEWER, "one run", utcnow())
    with TestClient(create_app(runtime, run_sweeper=False)) as client:
        client.headers["Authorization"] = f"Bearer {token}"
        yield client
    runtime.close()


def _add_runs(store: Store, first: int, count: int) -> None:
    now = utcnow()
    for number in range(first, first + count):
        store.runs.start(
            NewRun(KIND, f"r-{number}", f"crawl {number}", None, "none", None, None, 90), now
        )


@contextmanager
def _statements(store: Store) -> Iterator[list[tuple[str, Any]]]:
    sent: list[tuple[str, Any]] = []

    def note(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        sent.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", note)
    try:
        yield sent
    finally:
        event.remove(store.engine, "before_cursor_execute", note)


def _read(http: TestClient, store: Store, run_id: str) -> tuple[int, list[tuple[str, Any]]]:
    with _statements(store) as sent:
        answer = http.get(f"/api/v1/runs/{KIND}/{run_id}")
    return answer.status_code, sent


def _shapes(sent: list[tuple[str, Any]]) -> list[str]:
    return [statement for statement, _ in sent]


def test_one_run_is_read_alone_at_any_number_of_runs(http: TestClient, store: Store) -> None:
    _add_runs(store, 0, 20)
    http.get(f"/api/v1/runs/{KIND}/r-0")  # what the app reads once, on its first request
    status, few = _read(http, store, "r-7")
    assert status == 200
    missing_status, missing_few = _read(http, store, "nowhere")
    assert missing_status == 404
    _add_runs(store, 20, 400)
    status, many = _read(http, store, "r-7")
    assert status == 200
    assert http.get(f"/api/v1/runs/{KIND}/r-7").json()["run_id"] == "r-7"
    missing_status, missing_many = _read(http, store, "nowhere")
    assert missing_status == 404
    # The same statements, whether the store holds 20 runs or 420.
    assert _shapes(many) == _shapes(few)
    assert _shapes(missing_many) == _shapes(missing_few)
    if store.is_sqlite:
        for statement, parameters in [*many, *missing_many]:
            if not statement.lstrip().upper().startswith("SELECT"):
                continue
            with store.engine.connect() as conn:
                plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
            scans = [row[-1] for row in plan if str(row[-1]).startswith("SCAN")]
            whole = [s for s in scans if any(s.split()[1] == table for table in WHOLE_TABLES)]
            assert not whole, f"{statement}\n reads a whole table: {whole}"
