"""Many async waiters on one run share each look at it.

The API's long-polls wait on the event loop and look at the run on a worker
thread; sixty viewers of one run must not take sixty looks (each settles every
run of the engine) and crowd out the requests that do not wait.
"""

from __future__ import annotations

import asyncio

from watchkeeper.procs.engine import ProcEngine
from watchkeeper.records.procs import ProcRun

from .conftest import start_detached

WAITERS = 60


class CountingEngine(ProcEngine):
    """The engine, counting its looks at runs."""

    looks = 0

    def refresh(self, run_id: str) -> ProcRun:
        self.looks += 1
        return super().refresh(run_id)


def _counting(engine: ProcEngine) -> CountingEngine:
    return CountingEngine(engine.store, engine.data_dir, clock=engine.clock, grace_s=2.0)


def test_sixty_waiters_on_one_run_take_one_look(engine: ProcEngine) -> None:
    run = start_detached(engine, "sleep", "600")
    counting = _counting(engine)

    async def wait_all() -> list[ProcRun]:
        waits = [counting.wait_async(run.run_id, timeout_s=0) for _ in range(WAITERS)]
        return list(await asyncio.gather(*waits))

    seen = asyncio.run(wait_all())
    assert [r.run_id for r in seen] == [run.run_id] * WAITERS
    assert {r.status.value for r in seen} == {"running"}
    assert counting.looks == 1
    # A later round takes a look of its own: an answer is shared, never kept.
    asyncio.run(wait_all())
    assert counting.looks == 2


def test_a_waiter_that_leaves_does_not_end_the_others_look(engine: ProcEngine) -> None:
    run = start_detached(engine, "sleep", "600")
    counting = _counting(engine)

    async def one_leaves() -> ProcRun:
        leaving = asyncio.ensure_future(counting.wait_async(run.run_id, timeout_s=0))
        staying = asyncio.ensure_future(counting.wait_async(run.run_id, timeout_s=0))
        await asyncio.sleep(0)  # both have joined the one look
        leaving.cancel()
        return await staying

    stayed = asyncio.run(one_leaves())
    assert stayed.run_id == run.run_id and stayed.status.value == "running"
    assert counting.looks == 1
