"""Every button, against push kinds whose actions call a small local HTTP service."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.contract import Action
from watchkeeper.decide.actors import Actor
from watchkeeper.decide.decider import Outcome
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.incidents import Incident

from ..helpers import reports_for, start, sweep
from ..recorder import Recorder, recording_server
from .fixtures import acting_runtime

ANA = Actor("@ana", "slack", is_admin=True, user_id="U1")
BOB = Actor("@bob", "telegram", is_admin=True, user_id="42")


@pytest.fixture
def service() -> Iterator[Recorder]:
    with recording_server() as recorder:
        yield recorder


@pytest.fixture
def acting(
    tmp_path: Path, store: Store, clock: ManualClock, service: Recorder
) -> Iterator[Runtime]:
    runtime = acting_runtime(tmp_path, store, clock, service.url)
    yield runtime
    runtime.sweeper.close()


def only_incident(runtime: Runtime) -> Incident:
    live = runtime.store.incidents.list("live")
    assert len(live) == 1
    return runtime.store.incidents.get(live[0].id)


def stalled(
    runtime: Runtime, clock: ManualClock, run_id: str, kind: str = "swarm_task"
) -> Incident:
    start(runtime, run_id, kind, budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(runtime)
    return only_incident(runtime)


def test_cancel_calls_the_kinds_own_cancel_once(
    acting: Runtime, clock: ManualClock, service: Recorder
) -> None:
    incident = stalled(acting, clock, "t1")
    assert acting.decider.offered(incident) == [
        Action.CANCEL,
        Action.RETRY_CHECKED,
        Action.DISMISS,
        Action.DIAGNOSE,
    ]
    result = acting.decider.press(incident.id, "cancel", incident.state_token, ANA)
    assert result.outcome is Outcome.DONE
    assert result.action_record is not None
    assert result.action_record.status.value == "done"
    assert [(r.method, r.path) for r in service.requests] == [("POST", "/cancel/t1")]
    call = service.requests[0]
    assert call.headers["Authorization"] == "Bearer owner-secret"
    assert call.json()["actor"] == "@ana"
    assert call.json()["incident_id"] == incident.id
    decided = acting.store.incidents.get(incident.id)
    assert decided.decision is not None
    assert (decided.decision.action, decided.decision.actor, decided.decision.via) == (
        "cancel",
        "@ana",
        "slack",
    )
    assert acting.decider.offered(decided) == [Action.DIAGNOSE]


def test_retry_is_plain_only_when_effects_are_none(
    acting: Runtime, clock: ManualClock, service: Recorder
) -> None:
    reports = reports_for(acting)
    start(acting, "clean", "swarm_task", effects="none")
    reports.fail("swarm_task", "clean", "worker crashed", None, None)
    sweep(acting)
    incident = only_incident(acting)
    assert acting.decider.offered(incident) == [Action.RETRY, Action.DISMISS, Action.DIAGNOSE]
    refused = acting.decider.press(incident.id, "retry_checked", incident.state_token, ANA)
    assert refused.outcome is Outcome.NOT_OFFERED
    assert (
        acting.decider.press(incident.id, "retry", incident.state_token, ANA).outcome
        is Outcome.DONE
    )
    assert [r.path for r in service.requests] == ["/retry/clean"]


def test_retry_after_checking_effects_is_the_only_retry_when_unknown(
    acting: Runtime, clock: ManualClock, service: Recorder
) -> None:
    reports = reports_for(acting)
    start(acting, "risky", "swarm_task", effects="unknown")
    reports.fail("swarm_task", "risky", "posted half the replies", None, None)
    sweep(acting)
    incident = only_incident(acting)
    assert Action.RETRY not in acting.decider.offered(incident)
    plain = acting.decider.press(incident.id, "retry", incident.state_token, ANA)
    assert plain.outcome is Outcome.NOT_OFFERED
    assert "Retry (I checked its effects)" in plain.message
    checked = acting.decider.press(incident.id, "retry_checked", incident.state_token, ANA)
    assert checked.outcome is Outcome.DONE
    assert [r.path for r in service.requests] == ["/retry/risky"]
    sent = service.requests[0].json()
    assert (sent["action"], sent["effects_checked"]) == ("retry", True)


def test_close_the_turn_only_for_a_turn_nothing_runs(
    acting: Runtime, clock: ManualClock, service: Recorder
) -> None:
    start(acting, "turn-1", "chat_turn", budget_s=600, lease_s=30)
    clock.advance(31)
    sweep(acting)
    incident = only_incident(acting)
    assert incident.key.condition == "stuck"
    assert Action.CLOSE_TURN in acting.decider.offered(incident)
    result = acting.decider.press(incident.id, "close_turn", incident.state_token, BOB)
    assert result.outcome is Outcome.DONE
    assert [r.path for r in service.requests] == ["/close/turn-1"]
    # A stalled turn still has a runner: closing it is not offered.
    start(acting, "turn-2", "chat_turn", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(acting)
    other = next(i for i in acting.store.incidents.list("open") if i.key.run_id == "turn-2")
    assert Action.CLOSE_TURN not in acting.decider.offered(other)


def test_dismiss_never_reports_the_same_failure_again(
    acting: Runtime, clock: ManualClock, service: Recorder
) -> None:
    reports = reports_for(acting)
    start(acting, "flaky", "swarm_task")
    reports.fail("swarm_task", "flaky", "rate limited by upstream", None, None)
    sweep(acting)
    incident = only_incident(acting)
    result = acting.decider.press(incident.id, "dismiss", incident.state_token, ANA)
    assert result.outcome is Outcome.DISMISSED
    assert service.requests == []  # the work is left as it is
    for _ in range(3):  # the same failure again and again: nothing reopens
        start(acting, "flaky", "swarm_task")
        sweep(acting)
        reports.fail("swarm_task", "flaky", "rate limited by upstream", None, None)
        assert sweep(acting).applied.opened == sweep(acting).applied.reopened == ()
    assert acting.store.incidents.get(incident.id).suppressed
    # A different failure of the same work is a new incident.
    start(acting, "flaky", "swarm_task")
    reports.fail("swarm_task", "flaky", "disk full", None, None)
    assert len(sweep(acting).applied.opened) == 1


def test_diagnose_decides_nothing_and_keeps_the_buttons(
    acting: Runtime, clock: ManualClock, service: Recorder
) -> None:
    incident = stalled(acting, clock, "t2")
    before = acting.decider.offered(incident)
    result = acting.decider.press(
        incident.id, "diagnose", None, Actor("@viewer", "api", is_admin=False)
    )
    assert result.outcome is Outcome.DIAGNOSED
    assert "stalled" in (result.diagnosis or "")
    after = acting.store.incidents.get(incident.id)
    assert after.decision is None
    assert acting.decider.offered(after) == before
    assert after.events[-1].type == "diagnosis"
    assert service.requests == []


def test_a_failing_kind_function_is_journalled_and_its_decision_lifted(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    with recording_server(status=500) as broken:
        runtime = acting_runtime(tmp_path, store, clock, broken.url)
        incident = stalled(runtime, clock, "t3")
        result = runtime.decider.press(incident.id, "cancel", incident.state_token, ANA)
        assert result.outcome is Outcome.FAILED
        assert "refused it (HTTP 500 Internal Server Error)" in result.message
        assert "http://" not in result.message  # the journal keeps the address, not the words
        journal = runtime.store.decisions.actions_for_incident(incident.id)
        assert [(a.action, a.status.value) for a in journal] == [("cancel", "failed")]
        assert journal[0].answer is not None and broken.url in journal[0].answer
        # The action did not happen: the incident can be decided again.
        assert runtime.store.incidents.get(incident.id).decision is None
        broken.status = 200
        again = runtime.decider.press(incident.id, "cancel", incident.state_token, ANA)
        assert again.outcome is Outcome.DONE
        assert len(broken.requests) == 2
        runtime.sweeper.close()
