"""What "Ask to diagnose" says, read as a person reads it.

A cause is named only when its words are in the evidence as words ("oom" inside
"zoom" is no memory trouble); an incident whose work has since turned into
another condition is described by that verdict and names the incident now open
for it; every sentence is English.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.decide.actors import Actor
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.incidents import IncidentStatus

from ..helpers import reports_for, start, sweep
from ..recorder import recording_server
from .fixtures import acting_runtime

VIEWER = Actor("@viewer", "api", is_admin=False)
MEMORY = "it ran out of memory"


@pytest.fixture
def acting(tmp_path: Path, store: Store, clock: ManualClock) -> Iterator[Runtime]:
    with recording_server() as service:
        runtime = acting_runtime(tmp_path, store, clock, service.url)
        yield runtime
        runtime.sweeper.close()


def diagnosis(runtime: Runtime, incident_id: int) -> str:
    return runtime.decider.press(incident_id, "diagnose", None, VIEWER).diagnosis or ""


def failed_with(runtime: Runtime, run_id: str, reason: str) -> int:
    start(runtime, run_id, "swarm_task", effects="none")
    reports_for(runtime).fail("swarm_task", run_id, reason, None, None)
    (opened,) = sweep(runtime).applied.opened
    return opened


@pytest.mark.parametrize(
    "reason",
    [
        "boom: the parser gave up",
        "zoom meeting link invalid",
        "Bloomberg feed closed the socket",
        "room 4290 is not bookable",
    ],
)
def test_words_that_only_contain_a_cause_name_none(acting: Runtime, reason: str) -> None:
    text = diagnosis(acting, failed_with(acting, "w1", reason))
    assert MEMORY not in text, text
    assert "rate limit" not in text, text
    assert "nothing more specific is recorded" in text


@pytest.mark.parametrize(
    "reason",
    ["OOM", "oom-killer ended it", "OOMKilled", "the kernel's oom_kill chose it", "MemoryError"],
)
def test_memory_words_still_name_memory(acting: Runtime, reason: str) -> None:
    assert MEMORY in diagnosis(acting, failed_with(acting, "m1", reason))


@pytest.mark.parametrize(
    ("condition", "words"),
    [("failed", "failed at 2026-"), ("stalled", "has been stalled since 2026-")],
)
def test_an_open_incident_is_told_in_english(
    acting: Runtime, clock: ManualClock, condition: str, words: str
) -> None:
    start(acting, "e1", "swarm_task", budget_s=60, lease_s=3600)
    if condition == "failed":
        reports_for(acting).fail("swarm_task", "e1", "exit status 2", None, None)
    clock.advance(61)
    (opened,) = sweep(acting).applied.opened
    text = diagnosis(acting, opened)
    assert f"is {condition} since" not in text, text
    assert words in text, text


def test_a_resolved_incident_whose_work_is_now_stuck_says_so_and_names_the_open_one(
    acting: Runtime, clock: ManualClock
) -> None:
    start(acting, "s1", "swarm_task", budget_s=60, lease_s=90)
    clock.advance(61)  # past the budget, the lease still held: stalled
    (stalled,) = sweep(acting).applied.opened
    clock.advance(40)  # the lease has lapsed: its owner is gone
    (stuck,) = sweep(acting).applied.opened
    assert acting.store.incidents.get(stalled).status is IncidentStatus.RESOLVED
    assert acting.store.incidents.get(stuck).key.condition == "stuck"
    text = diagnosis(acting, stalled)
    assert "Now it is running" not in text, text
    assert "Now it is stuck" in text, text
    assert f"incident {stuck} is open for it" in text, text
    # The resolved incident has nothing left to decide: the open one is where to act.
    assert f"decide on incident {stuck}" in text, text
