"""Many async waiters on one run share each look at it.

The API's long-polls wait on the event loop and look at the run on a worker
thread; sixty viewers of one run must not take sixty looks (each settles every
run of the engine) and crowd out the requests that do not wait.
"""

from __future__ import annotations

import asyncio

import pytest

from watchkeeper.procs.engine import ProcEngine
from watchkeeper.records.procs import ProcRun

from .conftest import start_detached

WAITERS = 60


def _counting(engine: ProcEngine, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run ids ``engine`` looks at, in order, from now on."""
    looks: list[str] = []
    refresh = engine.refresh

    def counted(run_id: str) -> ProcRun:
        looks.append(run_id)
        return refresh(run_id)

    monkeypatch.setattr(engine, "refresh", counted)
    return looks


def test_sixty_waiters_on_one_run_take_one_look(
    engine: ProcEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = start_detached(engine, "sleep", "600")
    looks = _counting(engine, monkeypatch)

    async def wait_all() -> list[ProcRun]:
        waits = [engine.wait_async(run.run_id, timeout_s=0) for _ in range(WAITERS)]
        return list(await asyncio.gather(*waits))

    seen = asyncio.run(wait_all())
    assert [r.run_id for r in seen] == [run.run_id] * WAITERS
    assert {r.status.value for r in seen} == {"running"}
    assert len(looks) == 1
    # A later round takes a look of its own: an answer is shared, never kept.
    asyncio.run(wait_all())
    assert len(looks) == 2


def test_a_waiter_that_leaves_does_not_end_the_others_look(
    engine: ProcEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = start_detached(engine, "sleep", "600")
    looks = _counting(engine, monkeypatch)

    async def one_leaves() -> ProcRun:
        leaving = asyncio.ensure_future(engine.wait_async(run.run_id, timeout_s=0))
        staying = asyncio.ensure_future(engine.wait_async(run.run_id, timeout_s=0))
        await asyncio.sleep(0)  # both have joined the one look
        leaving.cancel()
        return await staying

    stayed = asyncio.run(one_leaves())
    assert stayed.run_id == run.run_id and stayed.status.value == "running"
    assert len(looks) == 1
