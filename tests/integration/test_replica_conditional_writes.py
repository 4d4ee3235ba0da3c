"""Two replicas applying the same change to one database make it once.

Each replica is a :class:`Store` of its own. For the races on PostgreSQL the
test holds the incident's row locked while both replicas apply: both read the
row as it was, both queue at their write, and both go on once the lock is let
go, as two replicas whose sweeps overlap would.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import create_engine, text

from watchkeeper.clock import ManualClock
from watchkeeper.store import Store
from watchkeeper.store.decisions import Claim
from watchkeeper.store.incidents import Applied, Changes, IncidentKey, IncidentStatus, Opening
from watchkeeper.store.tokens import Role

from ..support.waiting import wait_for

KEY = IncidentKey("crawl", "r1", "stalled")


def opening(clock: ManualClock, token: str) -> Opening:
    return Opening(KEY, "crawl r1", "no progress", clock(), token, None, "none")


@pytest.fixture
def named_url(db_url: str) -> str:
    """``db_url``; on PostgreSQL its connections carry a name of this test's own."""
    if db_url.startswith("sqlite"):
        return db_url
    return f"{db_url}&application_name=wk_race_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def replicas(named_url: str) -> Iterator[tuple[Store, Store]]:
    """Two stores on one database, as two replicas hold them."""
    first, second = Store(named_url), Store(named_url)
    yield first, second
    first.close()
    second.close()


def recovered_incident(store: Store, clock: ManualClock) -> int:
    """An incident that stalled and then moved again: the next stall reopens it."""
    (incident_id,) = store.incidents.apply(Changes([opening(clock, "a1v1")]), clock()).opened
    store.incidents.apply(Changes(recoveries=[(incident_id, "moved")]), clock.advance(5))
    return incident_id


def decided_incident(store: Store, clock: ManualClock) -> int:
    """An open incident someone decided: the work failing the same way again renews it."""
    (incident_id,) = store.incidents.apply(Changes([opening(clock, "a1v1")]), clock()).opened
    claim = Claim(incident_id, "retry", "ana", "slack", "a1v1", False, False, "host", 1)
    assert store.decisions.claim(claim, KEY.kind, KEY.run_id, clock.advance(5)).won
    return incident_id


CASES: dict[str, tuple[Callable[[Store, ManualClock], int], Callable[[Opening], Changes]]] = {
    "a recovered incident stalls again": (recovered_incident, lambda o: Changes(openings=[o])),
    "a decided incident fails again": (decided_incident, lambda o: Changes(renewals=[o])),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_same_reopen_applied_twice_reopens_once(
    replicas: tuple[Store, Store], clock: ManualClock, case: str
) -> None:
    first, second = replicas
    make, plan = CASES[case]
    incident_id = make(first, clock)
    clock.advance(60)
    changes = plan(opening(clock, "a2v1"))
    applied = [first.incidents.apply(changes, clock()), second.incidents.apply(changes, clock())]
    assert [a.reopened for a in applied] == [(incident_id,), ()]
    _assert_reopened_once(first, incident_id)


def _waiting_on_locks(url: str) -> int:
    name = url.rsplit("application_name=", 1)[1]
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            statement = text(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name = :name AND wait_event_type = 'Lock'"
            )
            return int(conn.execute(statement, {"name": name}).scalar_one())
    finally:
        engine.dispose()


@pytest.mark.parametrize("case", list(CASES))
def test_two_replicas_racing_to_reopen_reopen_once(
    replicas: tuple[Store, Store], named_url: str, clock: ManualClock, case: str
) -> None:
    if named_url.startswith("sqlite"):
        pytest.skip("SQLite's write transactions never overlap: the race is PostgreSQL's")
    make, plan = CASES[case]
    incident_id = make(replicas[0], clock)
    clock.advance(60)
    changes = plan(opening(clock, "a2v1"))
    applied: list[Applied] = []
    errors: list[BaseException] = []

    def apply(store: Store) -> None:
        try:
            applied.append(store.incidents.apply(changes, clock()))
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    holder = create_engine(named_url)
    try:
        with holder.connect() as conn:
            held = conn.begin()
            conn.execute(
                text("SELECT id FROM incidents WHERE id = :id FOR UPDATE"), {"id": incident_id}
            )
            threads = [threading.Thread(target=apply, args=(store,)) for store in replicas]
            for thread in threads:
                thread.start()
            wait_for(
                lambda: _waiting_on_locks(named_url) >= len(replicas),
                what="both replicas queued at the incident's row",
                timeout=60,
            )
            held.commit()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        holder.dispose()
    assert errors == []
    assert sorted(a.reopened for a in applied) == [(), (incident_id,)]
    _assert_reopened_once(replicas[0], incident_id)


def _assert_reopened_once(store: Store, incident_id: int) -> None:
    incident = store.incidents.get(incident_id)
    assert incident.status is IncidentStatus.OPEN
    assert incident.episodes == 2
    assert incident.decision is None
    assert [e.type for e in incident.events].count("reopened") == 1


def test_only_the_first_of_two_first_tokens_is_made(
    replicas: tuple[Store, Store], clock: ManualClock
) -> None:
    first, second = replicas
    made = first.tokens.create_first(Role.ADMIN, "first admin", clock())
    assert made is not None
    assert second.tokens.create_first(Role.ADMIN, "first admin", clock()) is None
    assert second.tokens.authenticate(made[1]) == made[0]
    assert first.tokens.count_live() == 1
    first.tokens.revoke(made[0].id, clock.advance(1))
    again = second.tokens.create_first(Role.ADMIN, "first admin", clock())
    assert again is not None and again[0].id != made[0].id
