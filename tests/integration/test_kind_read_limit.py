"""A kind's time limit counts from when its read starts, not from when it was asked for.

On a loaded machine the event loop's few default threads were busy with the app's other
thread work (long-polls, process looks), so a kind's read waited for one and the wait was
charged to the kind: its own store was called unreadable ("read timed out after 10 s").

The loop here keeps a time of its own that the test moves on, so each limit is passed or
not by the test's steps and never by how fast the machine is.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

from watchkeeper.config import KindConfig
from watchkeeper.contract import KindRead, RunView
from watchkeeper.kinds import base
from watchkeeper.kinds.base import Adapter, AdapterContext

from ..conftest import T0, make_settings

LIMIT_S = 10.0
#: Most of a limit: two of them pass it, one does not.
STEP_S = 0.9 * LIMIT_S


class SteppedLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock the test moves on by hand (on top of the real one)."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped = 0.0

    def time(self) -> float:
        return super().time() + self.skipped

    async def skip(self, seconds: float) -> None:
        """Move the clock on and let every timer due by then fire."""
        self.skipped += seconds
        for _ in range(5):
            await asyncio.sleep(0)


class GatedAdapter(Adapter):
    """A kind whose read says when it starts and returns when the test lets it."""

    adapter_name = "gated"

    def __init__(self, context: AdapterContext) -> None:
        super().__init__("gated", KindConfig(timeout_s=LIMIT_S), context)
        self.began = threading.Event()
        self.proceed = threading.Event()

    def read(self, now: datetime) -> Sequence[RunView]:
        self.began.set()
        self.proceed.wait(60)
        return []


@pytest.fixture
def adapter(tmp_path: Path) -> Iterator[GatedAdapter]:
    settings = make_settings(tmp_path, f"sqlite:///{tmp_path / 'unused.db'}")
    made = GatedAdapter(AdapterContext(settings, None))
    yield made
    made.proceed.set()


@pytest.fixture
def loop() -> Iterator[SteppedLoop]:
    made = SteppedLoop()
    yield made
    made.close()


async def _began(adapter: GatedAdapter) -> None:
    # Waited for on a thread of its own, so the loop keeps turning meanwhile.
    started = await asyncio.to_thread(adapter.began.wait, 30)
    assert started, "the read never started"


def test_a_read_that_waited_for_a_busy_loop_thread_still_gets_its_whole_limit(
    loop: SteppedLoop, adapter: GatedAdapter
) -> None:
    app_threads = ThreadPoolExecutor(1)
    loop.set_default_executor(app_threads)
    app_work_done = threading.Event()

    async def scenario() -> KindRead:
        # The app's own thread work holds the loop's only default thread for most of a limit.
        app_work = loop.run_in_executor(None, app_work_done.wait, 60)
        reading = asyncio.ensure_future(adapter.read_contained(T0))
        await loop.skip(STEP_S)
        app_work_done.set()
        await app_work
        await _began(adapter)
        await loop.skip(STEP_S)  # the read itself stays within its limit
        adapter.proceed.set()
        return await reading

    try:
        read = loop.run_until_complete(scenario())
    finally:
        app_work_done.set()
        app_threads.shutdown(wait=True)
    assert read.error is None
    assert read.readable


def test_a_read_past_its_limit_once_started_is_still_timed_out(
    loop: SteppedLoop, adapter: GatedAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> KindRead:
        reading = asyncio.ensure_future(adapter.read_contained(T0))
        await _began(adapter)
        await loop.skip(STEP_S)
        await loop.skip(STEP_S)
        return await reading

    with caplog.at_level(logging.WARNING, logger=base.__name__):
        read = loop.run_until_complete(scenario())
    assert read.error == f"read timed out after {LIMIT_S:g} s"
    # The log says where the read waits, so a hung store can be told from a starved machine.
    [told] = [record.getMessage() for record in caplog.records]
    assert told.startswith("Reading kind gated passed its time limit of 10 s")
    assert "in read\n    self.proceed.wait(60)" in told, told
    # The hung read still holds its thread: the next read is refused, not queued behind it.
    again = loop.run_until_complete(adapter.read_contained(T0))
    assert again.error == "an earlier read is still hanging past its time limit"


def test_a_read_that_finds_no_free_reader_thread_says_so(
    loop: SteppedLoop, adapter: GatedAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    readers = ThreadPoolExecutor(1)
    monkeypatch.setattr(base, "READERS", readers)
    other_kind_done = threading.Event()
    readers.submit(other_kind_done.wait, 60)  # another kind's read holds the only reader

    async def scenario() -> KindRead:
        reading = asyncio.ensure_future(adapter.read_contained(T0))
        await loop.skip(STEP_S)
        await loop.skip(STEP_S)
        return await reading

    try:
        read = loop.run_until_complete(scenario())
    finally:
        other_kind_done.set()
        adapter.proceed.set()
        readers.shutdown(wait=True)
    assert read.error == f"no thread was free to read it within {LIMIT_S:g} s"
