"""Three ``watchkeeper serve`` replicas starting together on one PostgreSQL make one admin.

The replicas are real processes. To make them race on purpose rather than by
luck, the test holds ``api_tokens`` locked while they start: each one stops
at its first look at the table, and all three go on together once the lock
is let go.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.support import patient_http
from watchkeeper.store import Store
from watchkeeper.store.tokens import Role

from ..conftest import PG_ADMIN_URL
from ..support.cli import WK, cli_env
from ..support.live_server import free_port
from ..support.waiting import wait_for

REPLICAS = 3


@pytest.fixture
def fresh_pg(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """A migrated PostgreSQL schema of this test's own, and the connections' name."""
    request.getfixturevalue("pg_schema_url")  # skips or fails when PostgreSQL is away
    schema = f"wk_replicas_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    # The name tells this test's connections apart from every other on the server.
    url = f"{PG_ADMIN_URL}?options=-csearch_path%3D{schema}&application_name={schema}"
    Store(url).close()
    yield url, schema
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


class Replica:
    """One ``watchkeeper serve`` process with its own data folder and port."""

    def __init__(self, folder: Path, database_url: str) -> None:
        folder.mkdir()
        config = folder / "watchkeeper.toml"
        config.write_text(
            f'data_dir = "data"\ncheck_interval_s = 1\ndatabase_url = "{database_url}"\n'
        )
        self.url = f"http://127.0.0.1:{free_port()}"
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [*WK, "--config", str(config), "serve", "--port", self.url.rsplit(":", 1)[1]],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=cli_env(),
        )
        # Drained all along, so a full pipe never blocks the server.
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        self.lines.extend(self.process.stdout)

    def healthy(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"a replica exited early:\n{''.join(self.lines)}")
        try:
            return patient_http.get(self.url + "/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def printed_tokens(self) -> list[str]:
        return [line.strip() for line in self.lines if line.strip().startswith("wk_")]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._drain.join(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()


def _waiting_on_locks(url: str, name: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE application_name = :name AND wait_event_type = 'Lock'"
                    ),
                    {"name": name},
                ).scalar_one()
            )
    finally:
        engine.dispose()


@pytest.mark.slow  # three servers start on a real PostgreSQL
def test_replicas_starting_together_make_one_first_admin(
    fresh_pg: tuple[str, str], tmp_path: Path
) -> None:
    url, schema = fresh_pg
    holder = create_engine(url)
    replicas: list[Replica] = []
    try:
        with holder.connect() as conn:
            lock = conn.begin()
            conn.execute(text("LOCK TABLE api_tokens IN ACCESS EXCLUSIVE MODE"))
            replicas = [Replica(tmp_path / f"replica{i}", url) for i in range(REPLICAS)]
            wait_for(
                lambda: _waiting_on_locks(url, schema) >= REPLICAS,
                what="every replica waiting at the token table",
                timeout=120,
            )
            lock.commit()
        for replica in replicas:
            wait_for(replica.healthy, what=f"{replica.url} answering /healthz", timeout=120)
        store = Store(url)
        try:
            admins = [
                t for t in store.tokens.list() if t.role is Role.ADMIN and t.revoked_at is None
            ]
        finally:
            store.close()
    finally:
        for replica in replicas:
            replica.stop()
        holder.dispose()
    printed = [token for replica in replicas for token in replica.printed_tokens()]
    assert len(admins) == 1, f"{len(admins)} first admin tokens, must be 1"
    assert len(printed) == 1, f"{len(printed)} replicas printed a first admin token"
