"""The sweeper's loop, restarted by the server's supervisor, hears of leadership once."""

from __future__ import annotations

import asyncio

from watchkeeper.runtime import Runtime


def test_a_restarted_sweep_loop_registers_for_leadership_changes_once(runtime: Runtime) -> None:
    sweeper = runtime.sweeper
    assert sweeper.leadership is not None
    before = len(sweeper.leadership.on_change)
    stopped = asyncio.Event()
    stopped.set()  # each start returns at once: a loop stopped and started again, three times
    for _ in range(3):
        asyncio.run(sweeper.run(stopped))
    assert len(sweeper.leadership.on_change) == before + 1
