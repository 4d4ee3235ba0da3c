"""Routing a sweep's worth of incidents reads the silences and the acknowledgements once per
pass, not once per incident; what it reads is still what each card shows."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event

from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.log import LogChannel
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..helpers import start, sweep

INCIDENTS = 8


def test_a_pass_reads_silences_and_acks_once(
    runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    for index in range(INCIDENTS):
        start(runtime, f"r{index}", budget_s=60, lease_s=3600)
    clock.advance(61)
    assert len(sweep(runtime).applied.opened) == INCIDENTS
    notifier = runtime.build_notifier({"log": LogChannel()})
    reads: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        reads.append(statement)

    event.listen(store.engine, "before_cursor_execute", note)
    try:
        assert notifier.route(clock()) == INCIDENTS
    finally:
        event.remove(store.engine, "before_cursor_execute", note)

    # One for the pass's events, one for the silences that ended (announced after them).
    assert sum("FROM silences" in s for s in reads) <= 2
    assert sum("FROM incident_acks" in s for s in reads) == 1
