"""On both databases: the blocked reason and the store's lease decision never disagree.

Random fleets, runners (some offline, some tied to an org), org caps and
tasks. Each round every runner tries to lease one task: a task it gets must
have been ``awaiting_runner`` just before, and when no runner gets anything,
no queued task may claim ``awaiting_runner``. Some cases put a backlog of one
capped org ahead of everything else, longer than any candidate window, so the
lease must look past tasks its caps block.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete

from tests.integration.queue.conftest import make_service
from watchkeeper.clock import ManualClock
from watchkeeper.queue.rules import Reason
from watchkeeper.records.queue import NewJob, NewRunner
from watchkeeper.store import Store
from watchkeeper.store.schema.queue import (
    queue_events,
    queue_jobs,
    queue_provisions,
    queue_runners,
    queue_spend,
    queue_tasks,
)

FLEETS = ("cpu", "gpu")
ORGS = ("acme", "beta")
#: Longer than the oldest-64 window the lease once read.
BACKLOG = 70


def _clear(store: Store) -> None:
    with store.engine.begin() as conn:
        for table in (
            queue_events,
            queue_tasks,
            queue_jobs,
            queue_runners,
            queue_spend,
            queue_provisions,
        ):
            conn.execute(delete(table))


scenario = st.fixed_dictionaries(
    {
        "runners": st.lists(
            st.tuples(
                st.sampled_from(FLEETS),
                st.integers(1, 2),
                st.one_of(st.none(), st.sampled_from(ORGS)),
                st.booleans(),  # heartbeats after the pause (alive) or not
            ),
            max_size=4,
        ),
        "caps": st.dictionaries(
            st.sampled_from(ORGS),
            st.fixed_dictionaries({"max_concurrent_jobs": st.integers(1, 2)}),
        ),
        "tasks": st.lists(st.tuples(st.sampled_from(ORGS), st.sampled_from(FLEETS)), max_size=6),
        # A backlog of one org, held to one job at a time, queued before the tasks above.
        "backlog": st.one_of(st.none(), st.tuples(st.sampled_from(ORGS), st.sampled_from(FLEETS))),
    }
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=scenario)
@example(  # one alive runner with room behind acme's backlog, which one job fills
    case={
        "runners": [("cpu", 2, None, True)],
        "caps": {},
        "tasks": [("beta", "cpu")],
        "backlog": ("acme", "cpu"),
    }
)
def test_blocked_reasons_agree_with_leasing(
    case: dict[str, Any], store: Store, tmp_path: Path, clock: ManualClock
) -> None:
    _clear(store)
    caps = dict(case["caps"])
    if case["backlog"] is not None:
        caps[case["backlog"][0]] = {"max_concurrent_jobs": 1}
    queue = make_service(tmp_path, store, clock, orgs=caps)
    registered = [
        (queue.register(NewRunner(fleet, capacity, "host", 1, org)), alive)
        for fleet, capacity, org, alive in case["runners"]
    ]
    if case["backlog"] is not None:
        org, fleet = case["backlog"]
        flood = NewJob("t", org, fleet, {"argv": ["true"]}, "test")
        queue.store.submit_many([flood] * BACKLOG, clock())
        clock.advance(1)  # the backlog is older than every other task
    news = [NewJob("t", org, fleet, {"argv": ["true"]}, "test") for org, fleet in case["tasks"]]
    queue.store.submit_many(news, clock())
    clock.advance(40)  # past runner_offline_after_s: only runners that heartbeat are alive
    for runner, alive in registered:
        if alive:
            queue.heartbeat(runner.id)
    while True:
        leased_any = False
        for runner, _alive in registered:
            # A lease is the runner's proof of life: it is judged as the heartbeat its own
            # lease makes leaves it, so the reason is read with it counted alive.
            queue.heartbeat(runner.id)
            before = queue.blocked()
            leases = queue.lease(runner.id, limit=1)
            for lease in leases:
                assert before[lease.task.id].code is Reason.AWAITING_RUNNER
                leased_any = True
        if not leased_any:
            break
    after = queue.blocked()
    assert all(blocked.code is not Reason.AWAITING_RUNNER for blocked in after.values())
    assert all(blocked.code is not Reason.UNKNOWN for blocked in after.values())
