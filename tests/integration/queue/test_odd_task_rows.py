"""One task or job row that cannot be read spoils no listing, and is never the caller's fault.

A row is spoiled by hand, as an edit in a database shell or a bad restore would
leave it, with a value each store can really hold: SQLite keeps text or a huge
float in a number column and text that is no JSON in a JSON column; PostgreSQL
keeps NaN and infinity in its double columns and any JSON in a JSON column. Every
listing (the API, the dashboard's pages, ``watchkeeper jobs``) still answers and
shows the other rows; reading the odd row itself answers a 500 naming the table
and the row, and the row is logged once however often the pages are polled.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from tests.integration.queue.conftest import runner, submit
from tests.support.cli import wk
from tests.support.live_server import LiveServer, live_server
from tests.support.waiting import TIMEOUT_S
from tests.support.web_login import log_in
from watchkeeper.clock import utcnow
from watchkeeper.errors import ValueRefused
from watchkeeper.records.queue import Job, NewRunner
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store import unreadable as unreadable_rows
from watchkeeper.store.queue import QueueStore


@dataclass(frozen=True)
class Odd:
    """A value written into one column of a row; ``values`` per database that can hold it."""

    table: str
    column: str
    values: dict[str, Any]


ODD = {
    "time past any calendar": Odd("queue_tasks", "queued_at", {"sqlite": 1e20, "postgresql": 1e20}),
    "infinite time": Odd(
        "queue_tasks", "progress_at", {"sqlite": math.inf, "postgresql": math.inf}
    ),
    # SQLite turns NaN into NULL (a legal "never leased"), but keeps text in a REAL column.
    "time that is no number": Odd(
        "queue_tasks", "leased_at", {"sqlite": "never", "postgresql": math.nan}
    ),
    "status no one knows": Odd(
        "queue_tasks", "status", {"sqlite": "exploded", "postgresql": "exploded"}
    ),
    "float in an integer column": Odd("queue_tasks", "attempt", {"sqlite": 1e20}),
    "text in an integer column": Odd("queue_tasks", "seq", {"sqlite": "first"}),
    "payload that is no JSON": Odd("queue_tasks", "payload", {"sqlite": "{not json"}),
    "payload that is no object": Odd(
        "queue_tasks", "payload", {"sqlite": "[1, 2]", "postgresql": "[1, 2]"}
    ),
    "lease that never ends": Odd("queue_tasks", "lease_s", {"sqlite": 1e300, "postgresql": 1e300}),
    "job created past any calendar": Odd(
        "queue_jobs", "created_at", {"sqlite": 1e20, "postgresql": -1e20}
    ),
}
CASES = [
    pytest.param(dialect, name, id=f"{dialect}-{name.replace(' ', '-')}")
    for name, odd in ODD.items()
    for dialect in odd.values
]


def spoil(store: Store, odd: Odd, row_id: str, value: Any) -> None:
    """Write ``value`` straight into the row, as a hand edit or a bad restore would."""
    json_column = odd.column == "payload" and not store.url.startswith("sqlite")
    placeholder = "CAST(:v AS json)" if json_column else ":v"
    with store.engine.begin() as conn:
        conn.execute(
            text(f"UPDATE {odd.table} SET {odd.column} = {placeholder} WHERE id = :id"),
            {"v": value, "id": row_id},
        )


@dataclass(frozen=True)
class Scene:
    """Three jobs: one queued, one running, and the odd one (its task running too)."""

    good: Job
    busy: Job
    odd: Job

    @property
    def odd_task(self) -> str:
        return self.odd.tasks[0].id


def scene(runtime: Runtime, name: str, dialect: str) -> Scene:
    queue = runtime.queue
    worker = runner(queue, capacity=2)
    busy = submit(queue, title="busy-job")
    odd = submit(queue, title="odd-job")
    leased = {lease.task.job_id for lease in queue.lease(worker.id, 2)}
    assert leased == {busy.id, odd.id}
    good = submit(queue, title="good-job")
    spec = ODD[name]
    row_id = odd.id if spec.table == "queue_jobs" else odd.tasks[0].id
    spoil(runtime.store, spec, row_id, spec.values[dialect])
    return Scene(good, busy, odd)


@contextmanager
def logged_in(server: LiveServer) -> Iterator[httpx.Client]:
    """A browser logged in with the viewer token."""
    with httpx.Client(base_url=server.url, timeout=TIMEOUT_S) as web:
        log_in(web, server.tokens["viewer"])
        yield web


def told_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == unreadable_rows.__name__]


def check_api(http: httpx.Client, seen: Scene, job_row: bool) -> None:
    listed = http.get("/api/v1/jobs")
    assert listed.status_code == 200, listed.text
    jobs = {job["id"]: job for job in listed.json()["jobs"]}
    assert jobs[seen.good.id]["tasks"][0]["status"] == "queued"
    assert jobs[seen.busy.id]["tasks"][0]["status"] == "running"
    page = http.get(f"/api/v1/jobs/{seen.odd.id}")
    task = http.get(f"/api/v1/tasks/{seen.odd_task}")
    if job_row:
        assert seen.odd.id not in jobs
        refused = page
    else:
        assert jobs[seen.odd.id]["tasks"] == []
        assert jobs[seen.odd.id]["unreadable_tasks"] == [seen.odd_task]
        assert page.status_code == 200, page.text
        assert page.json()["unreadable_tasks"] == [seen.odd_task]
        refused = task
    assert refused.status_code == 500, refused.text
    error = refused.json()["error"]
    assert error["code"] == "stored_data_unreadable"
    table, row = ("queue_jobs", seen.odd.id) if job_row else ("queue_tasks", seen.odd_task)
    assert error["message"].startswith(f"stored data could not be read: {table} row {row}")
    for path in ("/api/v1/topology", "/api/v1/runs", "/api/v1/runners"):
        answer = http.get(path)
        assert answer.status_code == 200, (path, answer.text)
    shown = http.get("/api/v1/topology").json()["runners"][0]["tasks"]
    assert seen.busy.tasks[0].id in [task["id"] for task in shown]


def check_pages(web: httpx.Client, seen: Scene) -> None:
    for path in ("/web/", "/web/jobs", "/web/topology", "/web/spend", f"/web/jobs/{seen.busy.id}"):
        page = web.get(path)
        assert page.status_code == 200, (path, page.text[:500])
    jobs_page = web.get("/web/jobs").text
    assert "good-job" in jobs_page and "busy-job" in jobs_page
    assert "busy-job" in web.get("/web/").text


@pytest.mark.parametrize(("db_url", "name"), CASES, indirect=["db_url"])
def test_an_unreadable_row_is_left_out_of_every_listing_and_refused_alone(
    runtime: Runtime,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    db_url: str,
    name: str,
) -> None:
    monkeypatch.setattr(unreadable_rows, "_told", set())
    dialect = "sqlite" if db_url.startswith("sqlite") else "postgresql"
    seen = scene(runtime, name, dialect)
    job_row = ODD[name].table == "queue_jobs"
    with (
        caplog.at_level(logging.WARNING, logger=unreadable_rows.__name__),
        live_server(runtime) as server,
        server.client("viewer") as http,
        logged_in(server) as web,
    ):
        for _ in range(2):  # polled again: still answered, and not logged again
            check_api(http, seen, job_row)
            check_pages(web, seen)
    told = told_of(caplog)
    assert len(told) == 1, told
    row = seen.odd.id if job_row else seen.odd_task
    assert f"{ODD[name].table} row {row}" in told[0] and ODD[name].column in told[0]


@pytest.mark.parametrize(
    ("db_url", "name"),
    [("sqlite", "time past any calendar"), ("postgresql", "time that is no number")],
    indirect=["db_url"],
)
def test_watchkeeper_jobs_lists_the_readable_jobs(runtime: Runtime, db_url: str, name: str) -> None:
    seen = scene(runtime, name, "sqlite" if db_url.startswith("sqlite") else "postgresql")
    with live_server(runtime) as server:
        env = {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["viewer"]}
        table = wk("jobs", env=env, columns=250)
        as_json = wk("jobs", "--json", env=env, columns=250)
    assert table.returncode == 0, table.stderr
    assert seen.good.id in table.stdout and seen.busy.id in table.stdout
    assert as_json.returncode == 0, as_json.stderr
    listed = {job["id"]: job for job in json.loads(as_json.stdout)}
    assert {seen.good.id, seen.busy.id, seen.odd.id} <= set(listed)
    assert listed[seen.odd.id]["unreadable_tasks"] == [seen.odd_task]


def test_a_value_sent_that_no_column_holds_is_still_the_callers_to_change(store: Store) -> None:
    """Reading stored data is never the caller's fault; sending what no column holds is."""
    queue = QueueStore(store.engine)
    with pytest.raises(ValueRefused) as refused:
        queue.register(NewRunner("cpu", 1, "h", 2**70), utcnow())
    assert refused.value.http_status == 422 and "registering a runner" in str(refused.value)
