"""When sweeps keep failing, exactly one "not working" notice, and one "working again"."""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from watchkeeper.clock import ManualClock
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..conftest import PG_ADMIN_URL, make_settings
from .helpers import start, sweep
from .recorder import recording_server


class Outage:
    """Takes a database away and brings it back, as an operator's mistake would."""

    def __init__(self, kind: str, url: str, data_dir: Path | None, database: str | None) -> None:
        self.kind, self.url, self.data_dir, self.database = kind, url, data_dir, database

    def begin(self, store: Store) -> None:
        if self.kind == "sqlite":
            assert self.data_dir is not None
            self.data_dir.rename(self.data_dir.with_name("away"))
            # Pooled SQLite connections keep the moved file open; new ones cannot find it.
            store.engine.dispose()
            return
        self._admin(
            f'ALTER DATABASE "{self.database}" ALLOW_CONNECTIONS false',
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{self.database}'",
        )

    def end(self) -> None:
        if self.kind == "sqlite":
            assert self.data_dir is not None
            self.data_dir.with_name("away").rename(self.data_dir)
            return
        self._admin(f'ALTER DATABASE "{self.database}" ALLOW_CONNECTIONS true')

    @staticmethod
    def _admin(*statements: str) -> None:
        engine = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            for statement in statements:
                conn.execute(text(statement))
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def outage_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Outage]]:
    if request.param == "sqlite":
        data = tmp_path / "data"
        url = f"sqlite:///{data / 'watchkeeper.db'}"
        store = Store(url)
        yield store, Outage("sqlite", url, data, None)
        store.close()
        return
    request.getfixturevalue("pg_schema_url")  # skips or fails when PostgreSQL is away
    database = f"wk_down_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{database}"'))
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{database}"
    store = Store(url)
    yield store, Outage("postgresql", url, None, database)
    store.close()
    with admin.connect() as conn:
        conn.execute(text(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true'))
        conn.execute(text(f'DROP DATABASE "{database}" WITH (FORCE)'))
    admin.dispose()


def test_exactly_one_down_and_one_up_notice(
    outage_store: tuple[Store, Outage], tmp_path: Path, clock: ManualClock
) -> None:
    store, outage = outage_store
    with recording_server() as hook:
        settings = make_settings(
            tmp_path,
            store.url,
            down_after_s=300,
            ops={"webhook_url": hook.url + "/ops", "webhook_secret": "s3cret"},
        )
        runtime = Runtime.open(
            settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops)
        )
        start(runtime, "r1")
        assert sweep(runtime).ok

        outage.begin(store)
        failures = []
        for _ in range(15):  # 15 sweeps, 30 s apart: 420 s of outage
            clock.advance(30)
            failures.append(sweep(runtime))
        assert not any(result.ok for result in failures)
        assert not runtime.sweeper.health.working

        outage.end()
        for _ in range(3):
            clock.advance(30)
            assert sweep(runtime).ok

        bodies = [r.json() for r in hook.requests]
        assert [b["type"] for b in bodies] == ["supervision_down", "supervision_up"]
        assert bodies[0]["text"].startswith("Run supervision is not working")
        assert bodies[1]["text"].startswith("Run supervision is working again")
        down = hook.requests[0]
        stamp = down.headers["X-Watchkeeper-Timestamp"]
        expected = hmac.new(b"s3cret", stamp.encode() + b"." + down.body, hashlib.sha256)
        assert down.headers["X-Watchkeeper-Signature"] == "sha256=" + expected.hexdigest()
        sent = runtime.sweeper.notifier.sent
        assert [n.kind.value for n in sent] == ["supervision_down", "supervision_up"]
        runtime.sweeper.close()
