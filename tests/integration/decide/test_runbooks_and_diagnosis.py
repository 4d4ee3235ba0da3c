"""Automatic first steps and their limits; diagnosis by rules and by a model, with fallback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.decide.actors import RUNBOOK_ACTOR, Actor
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..helpers import reports_for, start, sweep
from ..recorder import Recorder, recording_server
from .fake_openai import fake_model
from .fixtures import acting_runtime

VIEWER = Actor("@viewer", "api", is_admin=False)


@pytest.fixture
def service() -> Iterator[Recorder]:
    with recording_server() as recorder:
        yield recorder


def runbook_runtime(tmp_path: Path, store: Store, clock: ManualClock, url: str) -> Runtime:
    return acting_runtime(
        tmp_path, store, clock, url, runbooks={"retry_failed_without_effects": True}
    )


def fail(runtime: Runtime, run_id: str, effects: str = "none", reason: str = "worker died") -> None:
    start(runtime, run_id, "swarm_task", effects=effects)
    reports_for(runtime).fail("swarm_task", run_id, reason, None, None)


def test_runbooks_are_off_until_switched_on(
    tmp_path: Path, store: Store, clock: ManualClock, service: Recorder
) -> None:
    runtime = acting_runtime(tmp_path, store, clock, service.url)
    fail(runtime, "t1")
    sweep(runtime)
    assert service.requests == []
    assert not any(s.enabled for s in runtime.runbooks.switches())
    runtime.store.decisions.set_runbook("retry_failed_without_effects", True, "@ana", clock())
    fail(runtime, "t2")
    sweep(runtime)
    assert [r.path for r in service.requests] == ["/retry/t2"]
    runtime.sweeper.close()


def test_retry_once_recorded_and_announced_and_never_again_when_it_fails_again(
    tmp_path: Path, store: Store, clock: ManualClock, service: Recorder
) -> None:
    runtime = runbook_runtime(tmp_path, store, clock, service.url)
    fail(runtime, "t1")
    result = sweep(runtime)
    incident = runtime.store.incidents.get(result.applied.opened[0])
    assert incident.decision is not None
    assert incident.decision.actor == RUNBOOK_ACTOR
    assert incident.decision.via == "runbook"
    assert incident.events[-1].type == "runbook"
    assert incident.events[-1].detail.startswith("runbook retry_failed_without_effects: Retry done")
    # The owner retried it; it failed again the same way: people decide now.
    clock.advance(3 * 86400)
    fail(runtime, "t1")
    sweep(runtime)
    reopened = runtime.store.incidents.get(incident.id)
    assert reopened.episodes == 2
    assert reopened.decision is None
    assert [r.path for r in service.requests] == ["/retry/t1"]
    runtime.sweeper.close()


def test_at_most_one_automatic_step_per_work_per_day(
    tmp_path: Path, store: Store, clock: ManualClock, service: Recorder
) -> None:
    runtime = runbook_runtime(tmp_path, store, clock, service.url)
    fail(runtime, "t1", reason="first failure")
    sweep(runtime)
    clock.advance(3600)
    fail(runtime, "t1", reason="a different failure")
    sweep(runtime)
    assert [r.path for r in service.requests] == ["/retry/t1"]
    runtime.sweeper.close()


def test_never_on_work_whose_effects_are_unknown(
    tmp_path: Path, store: Store, clock: ManualClock, service: Recorder
) -> None:
    runtime = runbook_runtime(tmp_path, store, clock, service.url)
    fail(runtime, "risky", effects="unknown")
    sweep(runtime)
    assert service.requests == []
    assert runtime.store.incidents.list("open")[0].decision is None
    runtime.sweeper.close()


def test_rule_based_diagnosis_reads_the_evidence_and_redacts(
    tmp_path: Path, store: Store, clock: ManualClock, service: Recorder
) -> None:
    runtime = acting_runtime(tmp_path, store, clock, service.url)
    start(runtime, "d1", "swarm_task", effects="unknown")
    reports_for(runtime).fail(
        "swarm_task",
        "d1",
        "upstream said 429 Too Many Requests",
        None,
        "POST /v1/complete\nAuthorization: Bearer sk-abcdefghijklmnopqrstuvwx\nHTTP 429",
    )
    incident_id = sweep(runtime).applied.opened[0]
    first = runtime.decider.press(incident_id, "diagnose", None, VIEWER).diagnosis or ""
    second = runtime.decider.press(incident_id, "diagnose", None, VIEWER).diagnosis or ""
    assert first == second  # deterministic
    assert "swarm_task d1" in first
    assert "rate limit or quota" in first
    assert "check its effects before retrying" in first
    assert "sk-abcdefghijklmnop" not in first
    assert [p.outcome for p in runtime.store.decisions.presses_for(incident_id)] == [
        "diagnosed"
    ] * 2
    runtime.sweeper.close()


def test_model_diagnosis_uses_read_only_tools_and_falls_back_to_rules(
    tmp_path: Path,
    store: Store,
    clock: ManualClock,
    service: Recorder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DIAG_KEY", "local-key")
    with fake_model() as model:
        runtime = acting_runtime(
            tmp_path,
            store,
            clock,
            service.url,
            diagnose={"base_url": model.url, "model": "local-diagnoser", "api_key_env": "DIAG_KEY"},
        )
        start(runtime, "m1", "swarm_task", budget_s=60, lease_s=3600)
        clock.advance(61)
        incident_id = sweep(runtime).applied.opened[0]
        answer = runtime.decider.press(incident_id, "diagnose", None, VIEWER)
        assert answer.diagnosis == (
            "The run is running with owner alive=True. It most likely hangs on a tool call. "
            "Look at its log, then cancel it."
        )
        assert len(model.requests) == 2
        assert model.headers[0]["Authorization"] == "Bearer local-key"
        offered = {t["function"]["name"] for t in model.requests[0]["tools"]}
        assert offered == {"get_run", "get_incident_history", "get_evidence"}
        assert [m["role"] for m in model.requests[1]["messages"]][-2:] == ["tool", "tool"]
        presses = runtime.store.decisions.presses_for(incident_id)
        assert presses[-1].detail == "model:local-diagnoser"

        model.fail = True
        fallback = runtime.decider.press(incident_id, "diagnose", None, VIEWER)
        assert fallback.diagnosis is not None
        assert "stalled" in fallback.diagnosis
        assert runtime.store.decisions.presses_for(incident_id)[-1].detail.startswith(
            "rules (the model failed:"
        )
        assert service.requests == []  # diagnosis never acts
        runtime.sweeper.close()
