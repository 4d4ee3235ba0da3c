"""A delivery pass that took as many rows as it may is followed by the next one at once: a
backlog bigger than one pass does not wait for the pass interval between its batches."""

from __future__ import annotations

import asyncio

from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.log import LogChannel
from watchkeeper.notify.message import Message, Target
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.queueing import NewDelivery

#: Rows one pass takes here; the backlog is two passes and a bit.
PASS_LIMIT = 20
CARDS = 2 * PASS_LIMIT + 5
#: Long enough that a pass interval slept between the batches fails the test.
DEADLINE_S = 20.0


def test_a_backlog_goes_out_pass_after_pass_without_waiting(
    runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    channel = LogChannel(keep=CARDS)
    notifier = runtime.build_notifier({"log": channel})
    notifier.pass_limit = PASS_LIMIT
    notifier.pass_interval_s = 10 * DEADLINE_S  # nothing pokes: only a pass's own end goes on
    items = [
        NewDelivery(
            f"backlog-{n}",
            None,
            "note",
            "log",
            Target("log", f"chat{n}").as_dict(),
            Message(f"note {n}").as_dict(),
        )
        for n in range(CARDS)
    ]
    store.outbox.enqueue(items, clock())

    async def drain() -> dict[str, int]:
        stop = asyncio.Event()
        passes = asyncio.create_task(notifier.run(stop))
        try:
            async with asyncio.timeout(DEADLINE_S):
                # Until every card is settled: a claimed one ("sending") is still on its way.
                while {"pending", "sending"} & (
                    counts := await asyncio.to_thread(store.outbox.counts)
                ).keys():
                    await asyncio.sleep(0.02)
            return counts
        finally:
            stop.set()
            await passes

    assert asyncio.run(drain()) == {"sent": CARDS}
    assert sorted(m.text for _, m in channel.recent) == sorted(f"note {n}" for n in range(CARDS))
