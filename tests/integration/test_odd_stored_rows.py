"""Push runs, incidents, timeline events and process runs: one unreadable row spoils no list.

As for the queue's rows (``queue/test_odd_task_rows.py``): a row is spoiled by
hand with a value its store can really hold, the listing still answers with
every other row over real HTTP, the row itself answers ``500
stored_data_unreadable`` naming its table and key, and it is logged once
however often it is asked for.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy import text

from tests.support.live_server import live_server
from watchkeeper.clock import ManualClock
from watchkeeper.procs import identity
from watchkeeper.records.procs import NewProc
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store import unreadable as unreadable_rows
from watchkeeper.store.incidents import Changes, IncidentKey, Opening
from watchkeeper.store.procs import ProcStore
from watchkeeper.store.runs import NewRun
from watchkeeper.store.schema import metadata


@dataclass(frozen=True)
class Rows:
    """Two rows of one table, the path that lists them and the path of one."""

    good: str
    odd: str
    listed: str
    one: str | None
    #: The key naming a row in the list's answer.
    key: str = "id"

    def ids(self, answer: dict[str, Any]) -> set[str]:
        """The rows an answer lists, in any of its lists (the runs list has sections)."""
        lists = [value for value in answer.values() if isinstance(value, list)]
        return {str(item[self.key]) for found in lists for item in found if self.key in item}


def push_runs(runtime: Runtime, clock: ManualClock, _tmp: Path) -> Rows:
    for run_id in ("good-run", "odd-run"):
        runtime.store.runs.start(
            NewRun("crawl", run_id, run_id, None, "none", None, None, 90), clock()
        )
    return Rows("good-run", "odd-run", "/api/v1/runs", "/api/v1/runs/crawl/odd-run", "run_id")


def incidents(runtime: Runtime, clock: ManualClock, _tmp: Path) -> Rows:
    openings = [
        Opening(IncidentKey("crawl", run_id, "stalled"), run_id, "stalled", clock(), "t", None, "")
        for run_id in ("good-run", "odd-run")
    ]
    applied = runtime.store.incidents.apply(Changes(openings=openings), clock())
    good, odd = (str(number) for number in applied.opened)
    return Rows(good, odd, "/api/v1/incidents", f"/api/v1/incidents/{odd}")


def timeline_events(runtime: Runtime, clock: ManualClock, _tmp: Path) -> Rows:
    """Events are append-only (a trigger refuses any change), so the odd one is a copy of
    the good one inserted again, as a restore from a bad copy would: :func:`spoil` sets
    its value as it inserts it."""
    with live_server(runtime) as server, server.client("admin") as http:
        sent = http.post(
            "/api/v1/events/batch",
            json={"events": [{"phase": "tool", "job_id": "j-odd", "name": "good"}]},
        )
        assert sent.status_code < 300, sent.text
        [event] = http.get("/api/v1/timeline", params={"job_id": "j-odd"}).json()["events"]
    return Rows(str(event["id"]), "", "/api/v1/timeline?job_id=j-odd", None)


def process_runs(runtime: Runtime, clock: ManualClock, tmp: Path) -> Rows:
    procs = ProcStore(runtime.store.engine)
    for run_id in ("p-good0000001", "p-odd00000001"):
        new = NewProc(
            run_id,
            run_id,
            ("true",),
            str(tmp),
            identity.host(),
            "me",
            identity.boot_id(),
            detach=True,
        )
        procs.register(new, clock())
    one = "/api/v1/procs/p-odd00000001"
    return Rows("p-good0000001", "p-odd00000001", "/api/v1/procs?all=true", one)


@dataclass(frozen=True)
class Odd:
    table: str
    key: str
    column: str
    values: dict[str, Any]
    make: Callable[[Runtime, ManualClock, Path], Rows]


NAN_OR_TEXT = {"sqlite": "never", "postgresql": math.nan}
ODD = {
    "run past any calendar": Odd(
        "push_runs", "run_id", "progress_at", {"sqlite": 1e20, "postgresql": 1e20}, push_runs
    ),
    "run with no time": Odd("push_runs", "run_id", "seen_at", NAN_OR_TEXT, push_runs),
    "run of a status no one knows": Odd(
        "push_runs", "run_id", "status", {"sqlite": "exploded", "postgresql": "exploded"}, push_runs
    ),
    "incident past any calendar": Odd(
        "incidents", "id", "since", {"sqlite": 1e20, "postgresql": math.inf}, incidents
    ),
    "incident of a status no one knows": Odd(
        "incidents", "id", "status", {"sqlite": "exploded", "postgresql": "exploded"}, incidents
    ),
    "incident origin that is no JSON": Odd(
        "incidents", "id", "origin", {"sqlite": "{not json"}, incidents
    ),
    "incident origin that is no object": Odd(
        "incidents", "id", "origin", {"sqlite": "[1]", "postgresql": "[1]"}, incidents
    ),
    "event past any calendar": Odd(
        "timeline_events", "id", "at", {"sqlite": 1e20, "postgresql": -math.inf}, timeline_events
    ),
    "event with no time": Odd("timeline_events", "id", "at", NAN_OR_TEXT, timeline_events),
    "process run past any calendar": Odd(
        "proc_runs", "run_id", "created_at", {"sqlite": 1e20, "postgresql": 1e20}, process_runs
    ),
    "process run of a status no one knows": Odd(
        "proc_runs",
        "run_id",
        "status",
        {"sqlite": "exploded", "postgresql": "exploded"},
        process_runs,
    ),
    "process argv that is no list": Odd(
        "proc_runs", "run_id", "argv", {"sqlite": "{not json", "postgresql": '"true"'}, process_runs
    ),
}
CASES = [
    pytest.param(dialect, name, id=f"{dialect}-{name.replace(' ', '-')}")
    for name, odd in ODD.items()
    for dialect in odd.values
]


def spoil(store: Store, odd: Odd, row_id: str, value: Any) -> None:
    """Write ``value`` straight into the row, as a hand edit or a bad restore would."""
    table = metadata.tables[odd.table]
    column = table.c[odd.column]
    as_json = isinstance(column.type, sa.JSON) and not store.url.startswith("sqlite")
    placeholder = "CAST(:v AS json)" if as_json else ":v"
    key = int(row_id) if odd.key == "id" else row_id
    with store.engine.begin() as conn:
        conn.execute(
            text(f"UPDATE {odd.table} SET {odd.column} = {placeholder} WHERE {odd.key} = :id"),
            {"v": value, "id": key},
        )


def restore_odd_copy(store: Store, odd: Odd, good_id: str, value: Any) -> str:
    """Insert a copy of the good row with ``value`` in the odd column (append-only tables);
    the copy's id."""
    names = [c.name for c in metadata.tables[odd.table].c if c.name != "id"]
    chosen = ", ".join(":v" if name == odd.column else name for name in names)
    with store.engine.begin() as conn:
        conn.execute(
            text(
                f"INSERT INTO {odd.table} ({', '.join(names)}) "
                f"SELECT {chosen} FROM {odd.table} WHERE id = :id"
            ),
            {"v": value, "id": int(good_id)},
        )
        newest = conn.execute(text(f"SELECT max(id) FROM {odd.table}")).scalar_one()
    return str(newest)


@pytest.mark.parametrize(("db_url", "name"), CASES, indirect=["db_url"])
def test_an_unreadable_row_is_left_out_of_its_list_and_refused_alone(
    runtime: Runtime,
    clock: ManualClock,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    db_url: str,
    name: str,
) -> None:
    monkeypatch.setattr(unreadable_rows, "_told", set())
    odd = ODD[name]
    rows = odd.make(runtime, clock, tmp_path)
    dialect = "sqlite" if db_url.startswith("sqlite") else "postgresql"
    if odd.table == "timeline_events":
        rows = replace(
            rows, odd=restore_odd_copy(runtime.store, odd, rows.good, odd.values[dialect])
        )
    else:
        spoil(runtime.store, odd, rows.odd, odd.values[dialect])
    clock.advance(timedelta(seconds=5).total_seconds())
    with (
        caplog.at_level(logging.WARNING, logger=unreadable_rows.__name__),
        live_server(runtime) as server,
        server.client("viewer") as http,
    ):
        for _ in range(2):  # polled again: still answered, and not logged again
            listed = http.get(rows.listed)
            assert listed.status_code == 200, listed.text
            shown = rows.ids(listed.json())
            assert rows.good in shown and rows.odd not in shown, shown
            assert not listed.json().get("unreadable"), listed.text
            if rows.one is not None:
                check_refused(http.get(rows.one), f"{odd.table} row {rows.odd}")
    told = [r.getMessage() for r in caplog.records if r.name == unreadable_rows.__name__]
    assert len(told) == 1, told
    assert f"{odd.table} row {rows.odd}" in told[0] and odd.column in told[0]


def check_refused(answer: httpx.Response, row: str) -> None:
    assert answer.status_code == 500, answer.text
    error = answer.json()["error"]
    assert error["code"] == "stored_data_unreadable"
    assert error["message"].startswith(f"stored data could not be read: {row} holds")
