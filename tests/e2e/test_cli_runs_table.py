"""``watchkeeper runs`` as a person reads it: every column named, every mark the API gives.

A real server in a thread; the command line in a child process, as typed. The
kind is another system's SQLite file that becomes unreadable for real (moved
away), so its open incident is listed as last seen, as the API, chats and the
dashboard list it.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..conftest import T0, make_settings
from ..integration.helpers import sweep
from ..support.live_server import LiveServer, live_server

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

QUERY = (
    "SELECT id AS run_id, name AS title, state AS status, updated AS progress_at, "
    "updated AS started_at FROM crawls"
)
LAST_SEEN = "last seen 2026-01-05 12:02 UTC, before crawler became unreadable"


@pytest.fixture
def crawler_db(tmp_path: Path) -> Path:
    path = tmp_path / "crawler.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE crawls (id TEXT, name TEXT, state TEXT, updated REAL)")
        conn.execute(
            "INSERT INTO crawls VALUES ('c1', 'Nightly crawl', 'running', ?)", (T0.timestamp(),)
        )
    return path


@pytest.fixture
def server(
    tmp_path: Path, store: Store, clock: ManualClock, crawler_db: Path
) -> Iterator[LiveServer]:
    kinds = {
        "crawler": {
            "adapter": "sql",
            "url": f"sqlite:///{crawler_db}",
            "query": QUERY,
            "budget_s": 60,
        }
    }
    settings = make_settings(tmp_path, store.url, kinds=kinds)
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    try:
        with live_server(runtime) as live:
            yield live
    finally:
        runtime.sweeper.close()


def stalled_then_unreadable(runtime: Runtime, clock: ManualClock, crawler_db: Path) -> None:
    clock.advance(61)
    assert len(sweep(runtime).applied.opened) == 1
    clock.advance(59)
    assert sweep(runtime).ok  # seen once more, still stalled, at 12:02
    crawler_db.rename(crawler_db.with_name("moved.db"))
    runtime.sweeper.adapters["crawler"].close()  # pooled connections keep the moved file open
    clock.advance(300)
    sweep(runtime)


def runs(server: LiveServer, *argv: str) -> str:
    env = {
        **os.environ,
        "WATCHKEEPER_URL": server.url,
        "WATCHKEEPER_TOKEN": server.tokens["viewer"],
        "COLUMNS": "250",
    }
    done = subprocess.run(
        [sys.executable, "-m", "watchkeeper", "runs", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def header_cells(output: str) -> list[str]:
    """The cells of the first table's header row (the line after its top border)."""
    lines = output.splitlines()
    top = next(i for i, line in enumerate(lines) if line.lstrip().startswith("┏"))
    return [cell.strip() for cell in lines[top + 1].strip().strip("┃").split("┃")]


def test_a_run_of_an_unreadable_kind_is_marked_last_seen(
    server: LiveServer, clock: ManualClock, crawler_db: Path
) -> None:
    stalled_then_unreadable(server.runtime, clock, crawler_db)
    output = runs(server)
    assert "unreadable crawler" in output
    assert LAST_SEEN in output, output


def test_every_column_has_a_header_and_an_empty_section_is_one_line(server: LiveServer) -> None:
    with server.client("reporter") as http:
        body = {"kind": "swarm_task", "title": "write the report", "run_id": "t1"}
        assert http.post("/api/v1/runs", json=body).status_code in {200, 201}
    output = runs(server, "--all")
    assert "Needs attention (0): none" in output, output
    assert "Dealt with (0): none" in output, output
    # One table only: the section with work in it.
    assert output.count("┏") == 1, output
    cells = header_cells(output)
    assert all(cells), cells
    assert cells[-1] == "decided", cells
