"""The sql kind (read-only, on both databases), unreadable kinds, and slow kinds."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import InternalError, OperationalError

from watchkeeper import config
from watchkeeper.clock import ManualClock
from watchkeeper.config import KindConfig
from watchkeeper.contract import RunStatus, RunView
from watchkeeper.kinds import registry
from watchkeeper.kinds.base import Adapter, AdapterContext
from watchkeeper.kinds.sql import SqlAdapter
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.watch.sweeper import Sweeper

from ..conftest import PG_ADMIN_URL, T0, make_settings

TABLE = """
CREATE TABLE crawls (
    id VARCHAR(50) PRIMARY KEY,
    name VARCHAR(100),
    state VARCHAR(20),
    updated DOUBLE PRECISION,
    worker_ok INTEGER,
    error VARCHAR(200)
)
"""
QUERY = (
    "SELECT id AS run_id, name AS title, state AS status, updated AS progress_at, "
    "updated AS started_at, worker_ok AS owner_alive, error AS failure_reason FROM crawls"
)


@pytest.fixture(params=["sqlite", "postgresql"])
def foreign_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Another system's database holding a ``crawls`` table."""
    rows = [
        ("a", "fresh crawl", "busy", T0.timestamp() - 10, 1, None),
        ("b", "quiet crawl", "busy", T0.timestamp() - 500, 1, None),
        ("c", "orphan crawl", "busy", T0.timestamp() - 5, 0, None),
        ("d", "broken crawl", "error", T0.timestamp() - 5, None, "robots.txt forbids"),
    ]
    if request.param == "sqlite":
        path = tmp_path / "crawler.db"
        with sqlite3.connect(path) as conn:
            conn.execute(TABLE)
            conn.executemany("INSERT INTO crawls VALUES (?, ?, ?, ?, ?, ?)", rows)
        yield f"sqlite:///{path}"
        return
    request.getfixturevalue("pg_schema_url")  # skips or fails when PostgreSQL is away
    schema = f"crawler_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
        conn.execute(text(TABLE.replace("crawls", f"{schema}.crawls")))
        for row in rows:
            conn.execute(
                text(f"INSERT INTO {schema}.crawls VALUES (:a, :b, :c, :d, :e, :f)"),
                dict(zip("abcdef", row, strict=True)),
            )
    yield f"{PG_ADMIN_URL}?options=-csearch_path%3D{schema}"
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


_opened: list[SqlAdapter] = []


@pytest.fixture(autouse=True)
def _close_adapters() -> Iterator[None]:
    yield
    while _opened:
        _opened.pop().close()


def sql_adapter(url: str, query: str = QUERY) -> SqlAdapter:
    options = {
        "adapter": "sql",
        "url": url,
        "query": query,
        "status_map": {"busy": "running", "error": "failed"},
        "budget_s": 120,
    }
    settings = config.parse({"kinds": {"crawler": options}})
    adapter = SqlAdapter("crawler", KindConfig(**options), AdapterContext(settings, None))
    _opened.append(adapter)
    return adapter


def test_sql_rows_map_onto_run_views_and_verdicts(foreign_url: str) -> None:
    from watchkeeper.judge import judge

    adapter = sql_adapter(foreign_url)
    views = {v.run_id: v for v in adapter.read(T0)}
    adapter.close()
    assert views["a"].status is RunStatus.RUNNING
    assert views["a"].title == "fresh crawl"
    assert views["d"].failure is not None and views["d"].failure.reason == "robots.txt forbids"
    verdicts = {
        run_id: (v := judge(view, adapter.spec, T0)) and v.condition.value
        for run_id, view in views.items()
    }
    assert verdicts == {"a": None, "b": "stalled", "c": "stuck", "d": "failed"}


def test_sql_adapter_cannot_write(foreign_url: str) -> None:
    adapter = sql_adapter(foreign_url)
    with (
        adapter.engine.connect() as conn,
        pytest.raises((OperationalError, InternalError)) as caught,
    ):
        conn.execute(text("DELETE FROM crawls"))
    assert "read" in str(caught.value).lower()  # "readonly database" / "read-only transaction"
    assert len(adapter.read(T0)) == 4
    adapter.close()


def test_a_writing_query_fails_as_unreadable_and_changes_nothing(foreign_url: str) -> None:
    if foreign_url.startswith("sqlite"):
        sneaky = (
            "WITH x AS (SELECT 1) SELECT id AS run_id, 'running' AS status FROM crawls; "
            "DELETE FROM crawls"
        )
    else:
        sneaky = (
            "WITH gone AS (DELETE FROM crawls RETURNING id) "
            "SELECT id AS run_id, 'running' AS status FROM gone"
        )
    adapter = sql_adapter(foreign_url, sneaky)
    result = asyncio.run(adapter.read_contained(T0))
    assert not result.readable
    assert result.error
    assert len(sql_adapter(foreign_url).read(T0)) == 4
    adapter.close()


def test_unknown_columns_and_statuses_are_explained(foreign_url: str) -> None:
    typo = sql_adapter(
        foreign_url, "SELECT id AS run_id, state AS status, name AS titel FROM crawls"
    )
    result = asyncio.run(typo.read_contained(T0))
    assert result.error is not None and "titel" in result.error
    unmapped = sql_adapter(foreign_url, "SELECT id AS run_id, state AS status FROM crawls")
    unmapped.settings = unmapped.settings.model_copy(update={"status_map": {}})
    result = asyncio.run(unmapped.read_contained(T0))
    assert result.error is not None and "status_map" in result.error


class BlockingAdapter(Adapter):
    """A kind whose store hangs until released."""

    adapter_name = "blocking"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.release = threading.Event()

    def read(self, now: datetime) -> Sequence[RunView]:
        self.release.wait(30)
        return []


def test_unreadable_and_slow_kinds_beside_healthy_ones(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    missing = tmp_path / "gone" / "crawler.db"
    settings = make_settings(
        tmp_path,
        store.url,
        kinds={
            "crawler": {
                "adapter": "sql",
                "url": f"sqlite:///{missing}",
                "query": "SELECT 'x' AS run_id, 'running' AS status",
            }
        },
    )
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    hanging = BlockingAdapter("hangs", KindConfig(timeout_s=0.2), AdapterContext(settings, store))
    runtime.sweeper = Sweeper(
        store,
        {**runtime.sweeper.adapters, "hangs": hanging},
        check_interval_s=30,
        down_after_s=300,
        notifier=runtime.sweeper.notifier,
        clock=clock,
    )
    from .helpers import start

    start(runtime, "healthy-1", budget_s=10, lease_s=3600)
    clock.advance(11)
    # Our own loop, closed without waiting for the hung read's thread (asyncio.run would wait).
    loop = asyncio.new_event_loop()
    try:
        result = loop.run_until_complete(runtime.sweeper.sweep())
    finally:
        hanging.release.set()
        loop.close()
    errors = {read.kind: read.error for read in result.reads if not read.readable}
    assert set(errors) == {"crawler", "hangs"}
    assert "unable to open database file" in (errors["crawler"] or "")
    assert errors["hangs"] == "read timed out after 0.2 s"
    assert result.ok
    assert len(result.applied.opened) == 1  # the healthy kind was judged as usual
    overview = asyncio.run(runtime.overview(include_finished=False))
    assert {r.kind for r in overview.unreadable} >= {"crawler"}
    runtime.sweeper.close()


def test_an_unreadable_kind_keeps_its_incidents_open(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    path = tmp_path / "crawler.db"
    with sqlite3.connect(path) as conn:
        conn.execute(TABLE)
        conn.execute(
            "INSERT INTO crawls VALUES ('z', 'z', 'running', ?, 1, NULL)", (T0.timestamp() - 999,)
        )
    kinds = {
        "crawler": {"adapter": "sql", "url": f"sqlite:///{path}", "query": QUERY, "budget_s": 60}
    }
    settings = make_settings(tmp_path, store.url, kinds=kinds)
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    from .helpers import sweep

    assert len(sweep(runtime).applied.opened) == 1
    path.rename(tmp_path / "moved.db")
    runtime.sweeper.adapters["crawler"].close()
    result = sweep(runtime)
    assert not next(r for r in result.reads if r.kind == "crawler").readable
    assert result.applied.resolved == ()
    assert [i.status.value for i in store.incidents.list("live")] == ["open"]
    runtime.sweeper.close()


def test_third_party_adapters_come_from_entry_points() -> None:
    found = registry.available()
    assert found["push"].__name__ == "PushAdapter"
    assert found["sql"].__name__ == "SqlAdapter"
    assert registry.ENTRY_POINT_GROUP == "watchkeeper.kinds"


def test_a_page_and_a_sweep_may_read_a_kind_at_the_same_time(runtime: Runtime) -> None:
    from .helpers import start

    start(runtime, "both-1")

    async def together() -> tuple[object, object]:
        overview, result = await asyncio.gather(runtime.overview(False), runtime.sweeper.sweep())
        return overview, result

    overview, result = asyncio.run(together())
    assert overview.unreadable == ()  # type: ignore[attr-defined]
    assert all(read.readable for read in result.reads)  # type: ignore[attr-defined]
