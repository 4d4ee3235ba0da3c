"""Shared fixtures: every store test runs on SQLite and on PostgreSQL.

PostgreSQL tests use one schema per test worker (dropped at the end), and
truncate between tests. Locally a missing server skips them; under CI
(``CI=true``) a missing server fails the run.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from watchkeeper import config
from watchkeeper.clock import ManualClock
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.schema import metadata

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


def truncate_all(url: str) -> None:
    """Empty every table of a PostgreSQL test schema."""
    engine = create_engine(url)
    names = ", ".join(f'"{t.name}"' for t in metadata.sorted_tables)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    engine.dispose()


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


def make_settings(tmp_path: Path, db_url: str, **overrides: Any) -> config.Settings:
    """Settings for a test: data folder in ``tmp_path``, the given database."""
    raw: dict[str, Any] = {"data_dir": str(tmp_path / "data"), "database_url": db_url}
    raw.update(overrides)
    return config.parse(raw, "test settings")


@pytest.fixture
def runtime(tmp_path: Path, store: Store, clock: ManualClock) -> Iterator[Runtime]:
    """A runtime on the test store with the default kinds and a manual clock."""
    settings = make_settings(tmp_path, store.url)
    opened = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    yield opened
    opened.sweeper.close()
