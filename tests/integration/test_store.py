"""The store on both databases: migrations match the declared schema; moves are atomic."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from watchkeeper.clock import ManualClock
from watchkeeper.errors import Conflict, NotFound
from watchkeeper.store import Store
from watchkeeper.store.migrate import current_revision, head_revision, upgrade
from watchkeeper.store.runs import NewRun
from watchkeeper.store.schema import metadata
from watchkeeper.store.tokens import Role


def new(run_id: str, kind: str = "crawl") -> NewRun:
    return NewRun(kind, run_id, "title", None, "none", None, None, 90)


def test_migrated_schema_matches_the_declared_one(store: Store) -> None:
    with store.engine.connect() as conn:
        differences = compare_metadata(MigrationContext.configure(conn), metadata)
    assert differences == []
    assert current_revision(store.engine) == head_revision()


def test_upgrade_is_idempotent_and_safe_to_repeat(store: Store) -> None:
    upgrade(store.engine)
    upgrade(store.engine)
    assert current_revision(store.engine) == head_revision()


def test_start_move_and_restart(store: Store, clock: ManualClock) -> None:
    run, changed = store.runs.start(new("r1"), clock())
    assert changed and run.attempt == 1 and run.state_token == "a1v1"
    same, changed = store.runs.start(new("r1"), clock.advance(5))
    assert not changed and same.state_token == "a1v1"
    with pytest.raises(Conflict, match="already belongs to kind 'crawl'"):
        store.runs.start(new("r1", kind="chat_turn"), clock())
    store.runs.move(
        "crawl", "r1", clock(), {"status": "succeeded", "finished_at": clock().timestamp()}
    )
    with pytest.raises(Conflict, match="has already ended"):
        store.runs.move("crawl", "r1", clock(), {"step": "late"})
    again, changed = store.runs.start(new("r1"), clock.advance(1))
    assert changed and again.attempt == 2 and again.status.value == "running"
    assert again.finished_at is None
    with pytest.raises(NotFound):
        store.runs.move("crawl", "missing", clock(), {})


def test_concurrent_moves_never_lose_a_version(store: Store, clock: ManualClock) -> None:
    store.runs.start(new("busy"), clock())
    errors: list[BaseException] = []

    def bump() -> None:
        try:
            for _ in range(25):
                store.runs.move("crawl", "busy", clock(), {"step": "x"})
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.runs.get("crawl", "busy").version == 1 + 4 * 25


def test_tokens_are_hashed_and_revocable(store: Store, clock: ManualClock) -> None:
    info, secret = store.tokens.create(Role.REPORTER, "bot", clock())
    assert store.tokens.authenticate(secret) == info
    assert store.tokens.authenticate(secret + "x") is None
    from sqlalchemy import select

    from watchkeeper.store.schema import api_tokens

    with store.engine.connect() as conn:
        stored = conn.execute(select(api_tokens.c.token_hash)).scalars().all()
    assert secret not in stored
    store.tokens.revoke(info.id, clock.advance(1))
    assert store.tokens.authenticate(secret) is None
    assert store.tokens.count_live() == 0


def test_heartbeat_upserts_per_replica(store: Store, clock: ManualClock) -> None:
    from watchkeeper.store.heartbeats import SweepBeat

    store.heartbeats.beat(SweepBeat("a", clock(), clock(), 0.1, 3, None))
    store.heartbeats.beat(SweepBeat("a", clock() + timedelta(seconds=30), None, 0.1, 4, "x"))
    store.heartbeats.beat(SweepBeat("b", clock(), clock(), 0.1, 1, None))
    beats = {b.replica: b for b in store.heartbeats.all()}
    assert set(beats) == {"a", "b"}
    assert beats["a"].runs == 4 and beats["a"].error == "x"
