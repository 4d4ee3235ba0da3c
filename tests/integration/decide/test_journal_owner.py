"""A started action belongs to the replica that ran it: any other replica recovers it once that
replica's heartbeat lapses, at any sweep, whatever host it ran on."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from watchkeeper.clock import ManualClock
from watchkeeper.decide.actors import Actor
from watchkeeper.decide.decider import Decider
from watchkeeper.decide.diagnose import Diagnoser
from watchkeeper.decide.journal import (
    FOREIGN_GRACE,
    INTERRUPTED_NOTE,
    recover_abandoned,
    recover_interrupted,
)
from watchkeeper.store import Store
from watchkeeper.store.cluster import Member
from watchkeeper.store.decisions import ActionStatus, Claim
from watchkeeper.store.incidents import Changes, IncidentKey, Opening
from watchkeeper.store.schema import actions

from ..helpers import start, sweep
from ..recorder import recording_server
from .fixtures import acting_runtime

WITHIN = timedelta(seconds=45)
ELSEWHERE = "another-host"
A, B = "another-host:4242:aaaaaa", "this-host:77:bbbbbb"


@pytest.fixture
def other(store: Store) -> Iterator[Store]:
    """A second replica's own connection to the same database."""
    second = Store(store.url, migrate=False)
    yield second
    second.close()


def advance(clock: ManualClock, by: timedelta) -> None:
    clock.advance(by.total_seconds())


def beat(store: Store, clock: ManualClock, replica: str, host: str = ELSEWHERE) -> None:
    store.cluster.beat(Member(replica, host, 4242, "test", clock(), clock()))


def started_action(
    store: Store, clock: ManualClock, run_id: str, *, replica: str | None, host: str, pid: int
) -> int:
    """A decided incident whose journal row is still ``started``, as a crash leaves it."""
    key = IncidentKey("swarm_task", run_id, "stalled")
    opening = Opening(key, f"swarm_task {run_id}", "no progress", clock(), "t1", None, "none")
    (incident_id,) = store.incidents.apply(Changes([opening]), clock()).opened
    claim = Claim(
        incident_id, "cancel", "@ana", "slack", "t1", False, True, host, pid, replica=replica
    )
    result = store.decisions.claim(claim, key.kind, key.run_id, clock())
    assert result.won and result.action_id is not None
    return result.action_id


def status(store: Store, action_id: int) -> ActionStatus:
    with store.engine.connect() as conn:
        value = conn.execute(select(actions.c.status).where(actions.c.id == action_id)).scalar_one()
    return ActionStatus(value)


def dead_pid() -> int:
    """The pid of a real process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_an_action_of_a_live_replica_on_another_host_is_left_alone(
    store: Store, other: Store, clock: ManualClock
) -> None:
    beat(store, clock, A)
    action_id = started_action(store, clock, "t1", replica=A, host=ELSEWHERE, pid=4242)
    advance(clock, FOREIGN_GRACE + timedelta(minutes=5))  # long past the grace for foreign rows
    beat(store, clock, A)  # A keeps running
    live = other.cluster.live(clock(), WITHIN)
    assert recover_interrupted(other, clock(), live, replica=B) == []
    assert recover_abandoned(other, clock(), within=WITHIN, replica=B) == []
    assert status(store, action_id) is ActionStatus.STARTED


def test_own_actions_are_never_taken_for_lost(store: Store, clock: ManualClock) -> None:
    action_id = started_action(store, clock, "t1", replica=B, host=socket.gethostname(), pid=77)
    advance(clock, FOREIGN_GRACE + timedelta(minutes=5))  # B has no heartbeat row at all
    assert recover_interrupted(store, clock(), set(), replica=B) == []
    assert status(store, action_id) is ActionStatus.STARTED


def test_a_lapsed_replicas_action_is_interrupted_by_another_at_its_next_sweep(
    store: Store, other: Store, clock: ManualClock
) -> None:
    beat(store, clock, A)
    beat(other, clock, B, host="this-host")
    lost = started_action(store, clock, "t1", replica=A, host=ELSEWHERE, pid=4242)
    advance(clock, WITHIN / 2)
    assert recover_abandoned(other, clock(), within=WITHIN, replica=B) == []
    advance(clock, WITHIN * 2)  # A stopped beating, well inside the old one-hour grace
    beat(other, clock, B, host="this-host")
    assert recover_abandoned(other, clock(), within=WITHIN, replica=B) == [lost]
    assert status(store, lost) is ActionStatus.INTERRUPTED
    (incident,) = store.incidents.list("live")
    events = store.incidents.get(incident.id).events
    assert events[-1].type == "action_interrupted"
    assert events[-1].detail == INTERRUPTED_NOTE
    # Marked once: the next sweep finds nothing.
    assert recover_abandoned(other, clock(), within=WITHIN, replica=B) == []


def test_an_action_started_before_its_replicas_first_heartbeat_is_not_taken_for_lost(
    store: Store, other: Store, clock: ManualClock
) -> None:
    action_id = started_action(store, clock, "t1", replica=A, host=ELSEWHERE, pid=4242)
    advance(clock, WITHIN / 3)
    assert recover_abandoned(other, clock(), within=WITHIN, replica=B) == []
    assert status(store, action_id) is ActionStatus.STARTED
    advance(clock, WITHIN)  # no heartbeat came: the replica died before its first beat
    assert recover_abandoned(other, clock(), within=WITHIN, replica=B) == [action_id]


def test_rows_without_a_replica_keep_the_host_and_pid_rule(
    store: Store, clock: ManualClock
) -> None:
    here = socket.gethostname()
    gone = started_action(store, clock, "gone", replica=None, host=here, pid=dead_pid())
    alive = started_action(store, clock, "alive", replica=None, host=here, pid=os.getpid())
    foreign = started_action(store, clock, "foreign", replica=None, host=ELSEWHERE, pid=4242)
    advance(clock, FOREIGN_GRACE / 2)
    assert recover_interrupted(store, clock(), set(), replica=B) == [gone]
    assert recover_abandoned(store, clock(), within=WITHIN, replica=B) == []
    advance(clock, FOREIGN_GRACE)
    assert recover_abandoned(store, clock(), within=WITHIN, replica=B) == [foreign]
    assert status(store, alive) is ActionStatus.STARTED
    assert status(store, gone) is ActionStatus.INTERRUPTED


def test_a_replica_row_is_judged_by_host_and_pid_when_liveness_is_unknown(
    store: Store, clock: ManualClock
) -> None:
    here = socket.gethostname()
    alive = started_action(store, clock, "alive", replica=A, host=here, pid=os.getpid())
    gone = started_action(store, clock, "gone", replica=A, host=here, pid=dead_pid())
    assert recover_interrupted(store, clock()) == [gone]
    assert status(store, alive) is ActionStatus.STARTED


def test_the_decider_journals_the_replica_that_ran_the_action(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    with recording_server() as service:
        runtime = acting_runtime(tmp_path, store, clock, service.url)
        start(runtime, "t1", "swarm_task", budget_s=60, lease_s=3600)
        clock.advance(61)
        incident_id = sweep(runtime).applied.opened[0]
        token = store.incidents.get(incident_id).state_token
        adapters = runtime.sweeper.adapters
        decider = Decider(
            store,
            adapters,
            runtime.settings.admins,
            clock,
            Diagnoser(adapters, runtime.settings.diagnose, clock),
            replica=A,
        )
        result = decider.press(incident_id, "cancel", token, Actor("@ana", "slack", True))
        assert result.outcome.value == "done"
        (record,) = store.decisions.actions_for_incident(incident_id)
        assert record.replica == A
        runtime.sweeper.close()
