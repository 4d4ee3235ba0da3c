"""Shared fixtures: every store test runs on SQLite and on PostgreSQL.

PostgreSQL tests use one schema per test worker (dropped at the end), and
truncate between tests. Locally a missing server skips them; under CI
(``CI=true``) a missing server fails the run.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, create_engine, text

from watchkeeper import config
from watchkeeper.client import Client
from watchkeeper.clock import ManualClock
from watchkeeper.kinds.base import where_thread_is
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.schema import metadata

from .support import stall_watch
from .support.waiting import TIMEOUT_S

PG_ADMIN_URL = os.environ.get(
    "WATCHKEEPER_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
T0 = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The costliest tests first (``@pytest.mark.slow(seconds=N)``): the workers are handed
    the first tests in turn, so the longest ones start together on different workers
    instead of queueing behind each other at the end of the run."""

    def seconds(item: pytest.Item) -> float:
        marker = item.get_closest_marker("slow")
        return float(marker.kwargs.get("seconds", 0)) if marker is not None else 0.0

    items.sort(key=lambda item: -seconds(item))  # stable: the rest keep their order


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A test that timed out waiting for an answer says what every thread of its process
    was doing at that moment: the server under test runs in one of them, so a stall shows
    where it stood instead of only that the client gave up."""
    report = yield
    if call.excinfo is not None and _timed_out(call.excinfo.value):
        report.sections.append(("threads when the answer was late", _thread_stacks()))
    return report


def _timed_out(error: BaseException | None) -> bool:
    """Whether ``error``, or what it was raised from (the SDK wraps httpx's), is a timeout."""
    while error is not None:
        if isinstance(error, httpx.TimeoutException):
            return True
        error = error.__cause__
    return False


def pytest_configure(config: pytest.Config) -> None:
    """The SDK's call limit in tests is the suite's common wait (30 s), not its 10 s default.

    On a loaded CI machine a live server's first answer has taken longer than 10 s (a
    first database connection, a first import), failing a test that is about something
    else; a test about a call's limit passes its own ``timeout``.

    Each process that runs tests watches for its threads standing still
    (:mod:`tests.support.stall_watch`); the run's summary lists what it saw.
    """
    defaults = Client.__init__.__kwdefaults__
    assert defaults is not None and "timeout" in defaults
    defaults["timeout"] = TIMEOUT_S
    folder = stall_watch.folder_from_env(Path(tempfile.mkdtemp(prefix="watchkeeper-stalls-")))
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is not None or not config.getoption("numprocesses", None):
        watch = stall_watch.start(folder, worker or "main")
        config.add_cleanup(watch.stop)


#: Tests between two full collections that freeze what survives (see below).
FREEZE_EVERY = 20
_finished_tests = 0


def pytest_runtest_logfinish() -> None:
    """After each test, let go of the apps FastAPI's caches hold; every :data:`FREEZE_EVERY`
    tests, collect what the last ones left and freeze the rest.

    A test process kept every app its tests built (see :func:`_forget_classified_callables`),
    and every full collection walked them all: half way through a run a worker held 1.4 GB,
    and each full collection held up every thread of the process for seconds, live servers
    and kind reads included (seen by :mod:`tests.support.stall_watch` in the clean-clone run
    of 2026-12-07). Frozen objects are never walked again, so a collection walks only what
    the last few tests made.
    """
    global _finished_tests
    _finished_tests += 1
    _forget_classified_callables()
    if _finished_tests % FREEZE_EVERY == 0:
        gc.collect()
        gc.freeze()


def _forget_classified_callables() -> None:
    """Empty FastAPI's caches of the endpoints and dependencies it has classified.

    They keep the last 4,096 callables each (``lru_cache`` in
    ``fastapi.dependencies.models``), and a route's endpoint closes over its app: every app
    a test built stayed alive with all its route models (97 after 100 tests), and a
    frozen one could never be collected once the cache let it go. A server builds one app,
    so only a process that builds app after app keeps them.
    """
    models = sys.modules.get("fastapi.dependencies.models")
    if models is None:
        return  # no app built in this process yet
    for value in vars(models).values():
        if callable(getattr(value, "cache_clear", None)):
            value.cache_clear()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Every stall the test processes saw: its test, and the threads that were not waiting."""
    folder = os.environ.get(stall_watch.DIR_ENV)
    lines = stall_watch.summary(Path(folder)) if folder else []
    if lines:
        terminalreporter.section("threads that stood still")
        for line in lines:
            terminalreporter.line(line)
        terminalreporter.line(f"every thread's stack: {folder}")


def _thread_stacks() -> str:
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return "\n".join(
        f"--- {names.get(ident, ident)}\n{where_thread_is(ident)}"
        for ident in sys._current_frames()
    )


def _pg_reachable() -> str | None:
    try:
        engine = create_engine(PG_ADMIN_URL, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        return str(exc).splitlines()[0]
    return None


@pytest.fixture(scope="session")
def pg_schema_url(worker_id: str) -> Iterator[str]:
    """A migrated PostgreSQL schema of this test worker's own."""
    problem = _pg_reachable()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required under CI: {problem}")
        pytest.skip(f"PostgreSQL not reachable: {problem}")
    schema = f"wk_test_{worker_id}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = f"{PG_ADMIN_URL}?options=-csearch_path%3D{schema}"
    Store(url).close()  # migrate once
    yield url
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, copied for each test instead of migrating again."""
    path = tmp_path_factory.mktemp("template") / "watchkeeper.db"
    Store(f"sqlite:///{path}").close()
    return path


_RESET_ENGINES: dict[str, Engine] = {}
# Every sequence of the schema starts again, as TRUNCATE's RESTART IDENTITY made them: tests
# rely on ids beginning at 1.
_RESTART_SEQUENCES = (
    "SELECT setval(s.seqrelid::regclass, s.seqstart, false) FROM pg_sequence s "
    "JOIN pg_class c ON c.oid = s.seqrelid WHERE c.relnamespace = current_schema()::regnamespace"
)


def truncate_all(url: str) -> None:
    """Empty every table of a PostgreSQL test schema and restart its ids, in one round trip.

    ``DELETE`` rather than ``TRUNCATE``: emptying a few rows costs a fraction of
    making every table's files anew. ``session_replication_role = replica``
    (this transaction only; the test server's superuser may set it) holds
    every trigger back, the foreign keys' checks and the guards that keep the
    timeline append-only (migrations 0019 and 0025) among them: the way an
    administrator resets a guarded table on purpose, never a thing the product does.
    """
    engine = _RESET_ENGINES.get(url)
    if engine is None:
        engine = _RESET_ENGINES[url] = create_engine(url)
    deletes = "; ".join(f'DELETE FROM "{t.name}"' for t in reversed(metadata.sorted_tables))
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"SET LOCAL session_replication_role = replica; {deletes}; {_RESTART_SEQUENCES}"
        )


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, migrated database of each kind."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        target = tmp_path / "data" / "watchkeeper.db"
        target.parent.mkdir()
        shutil.copy(template, target)
        return f"sqlite:///{target}"
    url: str = request.getfixturevalue("pg_schema_url")
    truncate_all(url)
    return url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """A store on a fresh database."""
    opened = Store(db_url)
    yield opened
    opened.close()


@pytest.fixture
def clock() -> ManualClock:
    """Time that moves only when a test moves it."""
    return ManualClock(T0)


#: The tests' everyday kind is the crawl whose stalls are paged (the README's and the
#: chat pages' worked example); its preset leaves stalls to the research monitor, so
#: these settings say ``reports = []`` unless a test's own ``[kinds.crawl]`` says what it
#: reports.
#: tests/unit/test_kind_presets.py holds the presets themselves.
PAGED_CRAWL: dict[str, Any] = {"reports": []}


def make_settings(tmp_path: Path, db_url: str, **overrides: Any) -> config.Settings:
    """Settings for a test: data folder in ``tmp_path``, the given database, and the crawl
    kind paging its stalls (:data:`PAGED_CRAWL`)."""
    raw: dict[str, Any] = {"data_dir": str(tmp_path / "data"), "database_url": db_url}
    raw.update(overrides)
    kinds = dict(raw.get("kinds") or {})
    crawl = dict(kinds.get("crawl") or {})
    if "reports" not in crawl and "reports_itself" not in crawl:
        crawl.update(PAGED_CRAWL)
    kinds["crawl"] = crawl
    raw["kinds"] = kinds
    return config.parse(raw, "test settings")


@pytest.fixture
def runtime(tmp_path: Path, store: Store, clock: ManualClock) -> Iterator[Runtime]:
    """A runtime on the test store with the default kinds and a manual clock."""
    settings = make_settings(tmp_path, store.url)
    opened = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    yield opened
    opened.sweeper.close()
