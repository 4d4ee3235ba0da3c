"""Reports supervision events to a watchkeeper server as runs of kind ``child``.

``started`` registers the run, heartbeats become progress (at most one per
``progress_interval_s`` per child), a clean stop finishes it, giving up (or an
abnormal exit with no restart) fails it. Delivery happens in one background
task reading a bounded subscription: a slow or absent server costs dropped
reports (counted), never a blocked child.

Separately, every ``lease_s / 3`` seconds the reporter tells the server that
this process is alive for each running child (``/heartbeat``, which is not
progress). So a child whose own loop stops moving while its process lives is
judged *stalled*, and a process that dies leaves its children *stuck*.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

import httpx

from watchkeeper.supervise.events import (
    ChildExited,
    ChildHeartbeat,
    ChildHeld,
    ChildRestarting,
    ChildStarted,
    Event,
    Subscription,
    SupervisorGaveUp,
)

logger = logging.getLogger(__name__)

KIND = "child"


class EventSource(Protocol):
    """Anything with ``subscribe(maxsize)``: a Supervisor or its handle."""

    def subscribe(self, maxsize: int | None = None) -> Subscription: ...


@dataclass(frozen=True)
class ReporterStatistics:
    """Counters of one reporter."""

    sent: int
    failed: int
    dropped: int
    throttled: int


@dataclass(frozen=True)
class _Request:
    path: str
    body: Mapping[str, object]


_UNSAFE = re.compile(r"[^A-Za-z0-9._:@+=-]")


def run_id_of(path: str, child: str) -> str:
    """The run id a child is reported under: ``<tree path>:<child>``, with path separators
    as colons and any character a run id may not hold as ``-``."""
    return _UNSAFE.sub("-", f"{path}:{child}".replace("/", ":"))[:200]


class ChildReporter:
    """Turns a tree's events into HTTP reports; see the module docstring."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        lease_s: float = 60.0,
        progress_interval_s: float = 30.0,
        queue_size: int = 1000,
        timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.lease_s = lease_s
        self.progress_interval_s = progress_interval_s
        self.queue_size = queue_size
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
            transport=transport,
        )
        self._subs: list[Subscription] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._active: set[str] = set()
        self._last_progress: dict[str, float] = {}
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._sent = self._failed = self._throttled = 0

    def attach(self, source: EventSource) -> None:
        """Report every event of ``source`` from now on."""
        sub = source.subscribe(self.queue_size)
        self._subs.append(sub)
        self._tasks.append(asyncio.create_task(self._deliver(sub), name="child reporter"))
        if len(self._subs) == 1:
            self._tasks.append(asyncio.create_task(self._keep_alive(), name="child liveness"))

    async def beat(self) -> None:
        """Tell the server this process is alive, for every running child (not progress)."""
        for run_id in sorted(self._active):
            await self._send(_Request(self._run_path(run_id, "heartbeat"), {}))

    async def _keep_alive(self) -> None:
        # Real time on purpose: liveness is about this process, not the tree's clock.
        while True:
            await asyncio.sleep(max(self.lease_s / 3, 0.1))
            await self.beat()

    def statistics(self) -> ReporterStatistics:
        return ReporterStatistics(
            sent=self._sent,
            failed=self._failed,
            dropped=sum(s.dropped for s in self._subs),
            throttled=self._throttled,
        )

    async def drain(self) -> None:
        """Wait until every queued event has been delivered (or failed)."""
        while self._busy or any(s.qsize() for s in self._subs):
            self._idle.clear()
            await self._idle.wait()

    async def aclose(self) -> None:
        """Stop delivering and close the HTTP client (queued events are dropped)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for sub in self._subs:
            sub.close()
        await self._client.aclose()

    async def _deliver(self, sub: Subscription) -> None:
        while True:
            event = await sub.get()
            self._busy += 1
            try:
                for request in self._requests_for(event):
                    await self._send(request)
            finally:
                self._busy -= 1
                if not self._busy and not any(s.qsize() for s in self._subs):
                    self._idle.set()

    def _requests_for(self, event: Event) -> list[_Request]:
        if isinstance(event, ChildStarted):
            return self._on_started(event)
        if isinstance(event, ChildHeartbeat):
            return self._on_heartbeat(event)
        if isinstance(event, ChildRestarting):
            step = f"restarting in {event.delay_s:.2f} s (attempt {event.attempt})"
            return [self._progress(run_id_of(event.path, event.child), step)]
        if isinstance(event, ChildExited):
            return self._on_exited(event)
        if isinstance(event, ChildHeld):
            return [self._progress(run_id_of(event.path, event.child), f"held: {event.reason}")]
        return self._on_gave_up(event)

    def _on_started(self, event: ChildStarted) -> list[_Request]:
        run_id = run_id_of(event.path, event.child)
        self._active.add(run_id)
        self._last_progress.pop(run_id, None)
        title = event.title or f"{event.child} in {event.path}"
        body = {"kind": KIND, "run_id": run_id, "title": title, "lease_s": self.lease_s}
        return [_Request("/api/v1/runs", body)]

    def _on_heartbeat(self, event: ChildHeartbeat) -> list[_Request]:
        run_id = run_id_of(event.path, event.child)
        last = self._last_progress.get(run_id)
        if run_id not in self._active:
            return []
        if last is not None and event.at - last < self.progress_interval_s:
            self._throttled += 1
            return []
        self._last_progress[run_id] = event.at
        return [self._progress(run_id, event.step or "heartbeat")]

    def _on_exited(self, event: ChildExited) -> list[_Request]:
        run_id = run_id_of(event.path, event.child)
        if event.will_restart or run_id not in self._active:
            return []
        self._active.discard(run_id)
        if event.reason.abnormal:
            body = {"reason": f"{event.reason}: {event.detail}", "fingerprint": event.reason.value}
            return [_Request(self._run_path(run_id, "fail"), body)]
        return [_Request(self._run_path(run_id, "finish"), {})]

    def _on_gave_up(self, event: SupervisorGaveUp) -> list[_Request]:
        reason = (
            f"supervisor {event.path} gave up after {event.restarts} restarts "
            f"within {event.period_s:g} s"
        )
        requests = []
        for child in event.children:
            run_id = run_id_of(event.path, child)
            if run_id in self._active:
                self._active.discard(run_id)
                body = {"reason": reason, "fingerprint": "gave_up"}
                requests.append(_Request(self._run_path(run_id, "fail"), body))
        return requests

    def _progress(self, run_id: str, step: str) -> _Request:
        return _Request(self._run_path(run_id, "progress"), {"step": step})

    @staticmethod
    def _run_path(run_id: str, verb: str) -> str:
        return f"/api/v1/runs/{KIND}/{quote(run_id, safe=':@+=')}/{verb}"

    async def _send(self, request: _Request) -> None:
        try:
            response = await self._client.post(request.path, json=request.body)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            self._failed += 1
            logger.warning(
                "could not report to %s%s: %r",
                self.base_url,
                request.path,
                exc,
                extra={"action": "report_child"},
            )
        else:
            self._sent += 1
