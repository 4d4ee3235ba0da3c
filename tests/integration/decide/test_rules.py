"""The rules of pressing: stale presses, admins only, first decision wins, dealt-with work."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.config import AdminsConfig
from watchkeeper.decide.actors import Actor
from watchkeeper.decide.decider import Outcome
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..helpers import reports_for, start, sweep
from ..recorder import Recorder, recording_server
from .fixtures import acting_runtime

ANA = Actor("@ana", "slack", is_admin=True, user_id="U1")


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


def open_stalled(runtime: Runtime, clock: ManualClock, run_id: str = "s1") -> int:
    start(runtime, run_id, "swarm_task", budget_s=60, lease_s=3600)
    clock.advance(61)
    return sweep(runtime).applied.opened[0]


def test_a_press_against_an_old_token_does_nothing(
    acting: Runtime, clock: ManualClock, service: Recorder
) -> None:
    incident_id = open_stalled(acting, clock)
    shown = acting.store.incidents.get(incident_id).state_token
    reports_for(acting).progress("swarm_task", "s1", "it moved", None)  # before any sweep sees it
    result = acting.decider.press(incident_id, "cancel", shown, ANA)
    assert result.outcome is Outcome.STALE
    assert "moved on" in result.message
    assert service.requests == []
    assert acting.store.incidents.get(incident_id).decision is None
    assert [p.outcome for p in acting.store.decisions.presses_for(incident_id)] == ["stale"]


def test_a_press_on_finished_work_says_so(
    acting: Runtime, clock: ManualClock, service: Recorder
) -> None:
    incident_id = open_stalled(acting, clock)
    shown = acting.store.incidents.get(incident_id).state_token
    reports_for(acting).finish("swarm_task", "s1")
    sweep(acting)
    result = acting.decider.press(incident_id, "cancel", shown, ANA)
    assert result.outcome is Outcome.STALE
    assert "resolved" in result.message
    assert service.requests == []


def test_only_admins_act_and_refusals_are_recorded(
    acting: Runtime, clock: ManualClock, service: Recorder
) -> None:
    incident_id = open_stalled(acting, clock)
    token = acting.store.incidents.get(incident_id).state_token
    admins = AdminsConfig(slack=["U1"], telegram=["42"])
    stranger = Actor.from_chat("slack", "U999", "@mallory", admins)
    result = acting.decider.press(incident_id, "cancel", token, stranger)
    assert result.outcome is Outcome.REFUSED
    assert result.message == "only admins act: @mallory is not an admin on Slack"
    assert service.requests == []
    press = acting.store.decisions.presses_for(incident_id)[-1]
    assert (press.actor, press.outcome) == ("@mallory", "refused")
    admin = Actor.from_chat("telegram", "42", "@tg_admin", admins)
    assert acting.decider.press(incident_id, "cancel", token, admin).outcome is Outcome.DONE


def test_later_presses_are_told_who_won(
    acting: Runtime, clock: ManualClock, service: Recorder
) -> None:
    incident_id = open_stalled(acting, clock)
    token = acting.store.incidents.get(incident_id).state_token
    assert acting.decider.press(incident_id, "cancel", token, ANA).won
    for actor in (Actor("@bob", "discord", True), Actor("@carol", "dashboard", True)):
        late = acting.decider.press(incident_id, "dismiss", token, actor)
        assert late.outcome is Outcome.ALREADY_DECIDED
        assert late.message.startswith("already decided: Cancel by @ana on Slack at ")
    assert len(service.requests) == 1
    outcomes = [p.outcome for p in acting.store.decisions.presses_for(incident_id)]
    assert outcomes == ["won", "already_decided", "already_decided"]


def test_decided_work_no_longer_needs_attention(acting: Runtime, clock: ManualClock) -> None:
    incident_id = open_stalled(acting, clock)
    open_stalled(acting, clock, "s2")
    token = acting.store.incidents.get(incident_id).state_token
    acting.decider.press(incident_id, "dismiss", token, ANA)
    plain = asyncio.run(acting.overview(include_finished=False))
    assert [j.run.run_id for j in plain.attention] == ["s2"]
    everything = asyncio.run(acting.overview(include_finished=True))
    assert [j.run.run_id for j in everything.dealt_with] == ["s1"]


def test_reopened_work_needs_a_new_decision(acting: Runtime, clock: ManualClock) -> None:
    incident_id = open_stalled(acting, clock)
    token = acting.store.incidents.get(incident_id).state_token
    acting.decider.press(incident_id, "cancel", token, ANA)
    reports_for(acting).progress("swarm_task", "s1", None, None)
    sweep(acting)
    clock.advance(61)
    assert sweep(acting).applied.reopened == (incident_id,)
    assert acting.store.incidents.get(incident_id).decision is None
