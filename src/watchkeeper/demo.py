"""``watchkeeper demo``: a swarm-like task that keeps hitting its time limit, and its cards.

A task with a short time limit is started as push work with no effects
outside, so Retry is offered. When the limit passes it fails, and its card
(Retry, Dismiss, Ask to diagnose) appears in the demo chat: the log. Retry
starts it again with the same limit; it fails again and brings a second card.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from watchkeeper.kinds.actions import ActionRequest
from watchkeeper.runtime import Runtime
from watchkeeper.watch.reports import NewRun

log = logging.getLogger(__name__)
DEMO_KIND = "swarm_task"
DEMO_RUN = "demo-swarm-task"


@dataclass
class DemoSwarm:
    """Runs the demo task in the server's event loop; its retry is the kind's own action."""

    runtime: Runtime
    limit_s: float
    loop: asyncio.AbstractEventLoop | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def launch(self) -> None:
        """Start (or restart) the task; safe from any thread."""
        assert self.loop is not None
        self.loop.call_soon_threadsafe(self._spawn)

    def _spawn(self) -> None:
        task = asyncio.get_running_loop().create_task(self._run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self) -> None:
        reports = self.runtime.reports
        new = NewRun(DEMO_KIND, DEMO_RUN, "summarise the weekly reports", None, "none",
                     None, None, 3600)  # fmt: skip
        await asyncio.to_thread(reports.start, new)
        for step in range(1, 100):
            await asyncio.sleep(min(1.0, self.limit_s / 4))
            await asyncio.to_thread(
                reports.progress, DEMO_KIND, DEMO_RUN, f"reading report {step}", None
            )
            if step >= 4:
                break
        reason = f"time limit of {self.limit_s:g} s exceeded while reading report 4"
        await asyncio.to_thread(reports.fail, DEMO_KIND, DEMO_RUN, reason, "time_limit", None)
        self.runtime.sweeper.poke(self.runtime.clock())
        log.warning("Demo task failed: %s", reason, extra={"action": "demo"})

    async def stop(self) -> None:
        """Cancel the running task, if any."""
        for task in list(self.tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


_SWARM: DemoSwarm | None = None


def install(swarm: DemoSwarm) -> None:
    """Make ``swarm`` the one the retry action talks to."""
    global _SWARM
    _SWARM = swarm


def retry_task(request: ActionRequest) -> str:
    """The demo kind's retry: start the task again with the same limit."""
    if _SWARM is None:
        raise RuntimeError("the demo swarm is not running")
    _SWARM.launch()
    return "the swarm started the task again"
