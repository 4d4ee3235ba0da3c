"""``GET /web/stream``: server-sent events for the dashboard's live parts.

One watcher per app looks at the store once a second (in a worker thread, so
the event loop never waits on the database) while at least one page listens,
and emits:

- ``incidents`` when an open or recovered incident appears, moves or is decided;
- ``runs`` when a push run moves or a sweep judged the runs again;
- ``task.updated`` for each active (or just ended) task that changed, in its
  API form (with ``blocked`` while queued, and ``interrupted`` when present);
- ``topology`` when a runner comes, goes, or takes or drops a task;
- ``jobs`` when one of the newest jobs comes, goes or a task of it changes status;
- ``procs`` when a process run or a parked session comes, goes or changes state;
- ``silences`` when a silence is added, ends or is expired;
- ``runbooks`` when an automatic first step is switched on or off;
- ``supervision`` when a child of the server's supervision tree starts, stops or
  restarts, a circuit breaker changes state or counts a failure, or a health check
  changes status
  (docs/supervision.md). The ``topology`` signature covers it too, so the
  topology page redraws then.

Lists other than these (``jobs``, ``procs``, ``silences``, ``runbooks``) carry
only a signature: a page that shows the list fetches it again when it differs
from what the page drew. A page is rendered with the latest signatures and the
id of the latest event (:meth:`Watcher.seed`), so it asks only for what moved
since it was drawn.

Every event carries an id; a browser that reconnects (a stream lasts at most
:data:`STREAM_S`, and ends at once when the server stops) sends
``Last-Event-ID`` and is replayed what it missed, or told ``resync`` when
those events are gone (or came from a server that has restarted since). The
watcher stops with the server too.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import secrets
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from watchkeeper.errors import WatchkeeperError
from watchkeeper.queue.views import task_json
from watchkeeper.records.queue import TaskStatus
from watchkeeper.server.api.events import KEEP_ALIVE, SSE_HEADERS, relay, stopping_of
from watchkeeper.server.deps import Services, made_once, services
from watchkeeper.server.http.longpoll import held_stream
from watchkeeper.server.web.session import Session, session
from watchkeeper.server.web.shared import SharedOverview, shared_overview

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)


class SupervisionView(Protocol):
    """What the watcher reads of the server's supervision."""

    def snapshot(self) -> dict[str, Any]: ...


LOOK_EVERY_S = 1.0
#: A stream ends after this long; the browser reconnects at once and is replayed what it missed.
STREAM_S = 15.0
#: The watcher stops this long after the last page left.
IDLE_S = 5.0
REPLAY = 2000
#: Most active jobs whose tasks are watched (newest first); also the newest jobs of any
#: status the ``jobs`` signature covers.
WATCHED_JOBS = 200
#: Most process runs and silences the ``procs`` and ``silences`` signatures cover.
WATCHED_ROWS = 200
#: The signatures a page compares; each is also the name of its event.
SIGNED = (
    "incidents",
    "runs",
    "topology",
    "jobs",
    "procs",
    "silences",
    "runbooks",
    "supervision",
)


def _nodes(children: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Every node under a tree (nested supervisors' children too): id, state, restarts."""
    found: list[tuple[Any, ...]] = []
    for child in children:
        found.append((child["id"], child["state"], child["restarts"]))
        found += _nodes(child["children"])
    return found


def _digest(value: Any) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


@dataclass
class Look:
    """What one look at the store found."""

    incidents: str
    open_count: int
    runs: str
    tasks: dict[str, dict[str, Any]]
    topology: str
    lists: dict[str, str] = field(default_factory=dict)

    def sig(self, name: str) -> str:
        """The signature called ``name``; the topology's covers the supervision too."""
        if name == "topology":
            return _digest((self.topology, self.lists.get("supervision", "")))
        found = getattr(self, name, None)
        return found if isinstance(found, str) else self.lists.get(name, "")


@dataclass
class Watcher:
    """Looks once a second while someone listens; fans changes out to every listener."""

    services: Services
    shared: SharedOverview
    listeners: set[asyncio.Queue[tuple[int, str, str]]] = field(default_factory=set)
    sent: deque[tuple[int, str, str]] = field(default_factory=lambda: deque(maxlen=REPLAY))
    last: Look | None = None
    seq: int = 0
    #: Names this watcher's event ids: an id from another (a restarted server) means resync.
    epoch: str = field(default_factory=lambda: secrets.token_hex(4))
    task: asyncio.Task[None] | None = None
    #: Set when the server stops: the watcher looks no more.
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    #: The server's supervision (``app.state.supervision``), when it has one.
    supervision: SupervisionView | None = None

    def listen(self) -> asyncio.Queue[tuple[int, str, str]]:
        """A new listener's queue; starts looking if nobody was."""
        inbox: asyncio.Queue[tuple[int, str, str]] = asyncio.Queue(maxsize=1000)
        self.listeners.add(inbox)
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._run(), name="web-stream-watcher")
        return inbox

    def leave(self, inbox: asyncio.Queue[tuple[int, str, str]]) -> None:
        """A listener left."""
        self.listeners.discard(inbox)

    def hello(self) -> dict[str, Any]:
        """What a page is told first: the latest signatures, if a look was made."""
        if self.last is None:
            return {}
        return {name: self.last.sig(name) for name in SIGNED}

    async def seed(self) -> tuple[dict[str, str], str]:
        """What a page is rendered with: the latest signatures, and the id of the latest
        event (its stream resumes there, so it is told only what moved since).

        Without a look yet, one is made now: a page drawn before it would be told every
        list had moved, and fetch them all again as soon as it listened.
        """
        if self.last is None:
            look = await asyncio.to_thread(self._look)
            if self.last is None:
                self._compare(look)
        return self.hello(), f"{self.epoch}.{self.seq}"

    def since(self, last_id: int) -> list[tuple[int, str, str]] | None:
        """Events after ``last_id``, or ``None`` when they are no longer kept."""
        if last_id >= self.seq:
            return []
        if not self.sent or self.sent[0][0] > last_id + 1:
            return None
        return [event for event in self.sent if event[0] > last_id]

    async def _run(self) -> None:
        try:
            await self._watch()
        finally:
            self.last = None
            self.shared.watched = False

    async def _watch(self) -> None:
        idle_since: float | None = None
        loop = asyncio.get_running_loop()
        while not self.stopping.is_set():
            if self.listeners:
                idle_since = None
            elif idle_since is None:
                idle_since = loop.time()
            elif loop.time() - idle_since > IDLE_S:
                return
            try:
                look = await asyncio.to_thread(self._look)
            except Exception:  # a failed look is logged; the next one tries again
                self.shared.watched = False
                log.exception(
                    "Dashboard stream could not read the store", extra={"action": "web_stream"}
                )
            else:
                self._compare(look)
                self.shared.watched = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), timeout=LOOK_EVERY_S)

    def _emit(self, event: str, data: dict[str, Any]) -> None:
        self.seq += 1
        item = (self.seq, event, json.dumps(data, separators=(",", ":")))
        self.sent.append(item)
        for inbox in list(self.listeners):
            with contextlib.suppress(asyncio.QueueFull):  # a stuck page misses events
                inbox.put_nowait(item)

    def _compare(self, look: Look) -> None:
        before, self.last = self.last, look
        if before is None:  # a first look: pages compare its signatures with what they drew
            self.shared.forget()
            self._emit("incidents", {"open": look.open_count, "sig": look.incidents})
            for name in SIGNED[1:]:
                self._emit(name, {"sig": look.sig(name)})
            return
        if (look.incidents, look.runs, look.tasks) != (before.incidents, before.runs, before.tasks):
            self.shared.forget()  # pages refreshed by the events below read afresh
        if look.incidents != before.incidents:
            self._emit("incidents", {"open": look.open_count, "sig": look.incidents})
        if look.runs != before.runs:
            self._emit("runs", {"sig": look.runs})
        for task_id, body in look.tasks.items():
            if before.tasks.get(task_id) != body:
                self._emit("task.updated", body)
        for name in SIGNED[2:]:
            if look.sig(name) != before.sig(name):
                self._emit(name, {"sig": look.sig(name)})

    # The look itself, in a worker thread ------------------------------------------------

    def _look(self) -> Look:
        found = self.services
        incidents_now = found.incidents
        live = incidents_now.list("live", 200, 0)
        incidents = _digest([(i.id, i.status.value, i.decision, i.updated_at) for i in live])
        open_count = incidents_now.open_count()
        topology = self._topology()
        runners_moved = self.last is None or topology != self.last.topology
        lists = {
            "jobs": self._jobs(),
            "procs": self._procs(),
            "silences": self._silences(),
            "runbooks": _digest([(s.runbook.name, s.enabled) for s in found.runbooks.switches()]),
            "supervision": self._supervision(),
        }
        tasks = self._tasks(runners_moved)
        return Look(incidents, open_count, self._runs(), tasks, topology, lists)

    def _supervision(self) -> str:
        """What the supervision picture shows that can move: states, restarts, statuses,
        and each breaker's failures (drawn under it: a count that moves within one state
        would otherwise stay stale until the next change of state).

        Check details (how long the store took) are left out: the picture does not draw
        them, and they would redraw the page each look.
        """
        if self.supervision is None:
            return ""
        shot = self.supervision.snapshot()
        trees = [(t["id"], t["state"], _nodes(t["children"])) for t in shot["trees"]]
        breakers = [(b["name"], b["state"], b["failures"]) for b in shot["breakers"]]
        return _digest((trees, breakers, [(c["name"], c["status"]) for c in shot["health"]]))

    def _jobs(self) -> str:
        jobs = self.services.queue.scan_jobs(need=WATCHED_JOBS, batch=WATCHED_JOBS).jobs
        return _digest([(j.id, [(t.id, t.status.value, t.attempt) for t in j.tasks]) for j in jobs])

    def _procs(self) -> str:
        try:
            engine = self.services.procs
            runs = engine.runs(include_finished=True, limit=WATCHED_ROWS)
            shown = [(r.run_id, r.status.value, engine.effective_status(r)) for r in runs]
            parked = [view.as_dict() for view in engine.parked()]
        except WatchkeeperError:  # no process runs here (the page says why): the rest goes on
            return ""
        return _digest((shown, parked))

    def _silences(self) -> str:
        found = self.services
        now = found.clock()
        silences = found.silences.list(limit=WATCHED_ROWS)
        return _digest([(s.id, s.ends_at <= now, s.ends_at, s.expired_by) for s in silences])

    def _runs(self) -> str:
        found = self.services
        rows = found.reports.positions(found.clock() - timedelta(days=1))
        latest = found.sweeper.latest
        return _digest((rows, None if latest is None else latest.at))

    def _tasks(self, runners_moved: bool) -> dict[str, dict[str, Any]]:
        queue = self.services.queue
        jobs = queue.scan_jobs(active=True, need=WATCHED_JOBS, batch=WATCHED_JOBS).jobs
        found = {task.id: task for job in jobs for task in job.tasks}
        previous = self.last.tasks if self.last is not None else {}
        for task_id in previous.keys() - found.keys():  # ended (or deleted) since the last look
            with contextlib.suppress(Exception):
                found[task_id] = queue.task(task_id)
        marks = queue.marks(list(found.values()))
        shown: dict[str, dict[str, Any]] = {}
        explain: list[str] = []
        for task in found.values():
            body = task_json(task, {}, marks)
            body.pop("payload", None)
            before = previous.get(task.id)
            body["blocked"] = None if before is None else before.get("blocked")
            same = before is not None and {**before, "blocked": None} == {**body, "blocked": None}
            if task.status is TaskStatus.QUEUED and (runners_moved or not same):
                explain.append(task.id)
            elif task.status is not TaskStatus.QUEUED:
                body["blocked"] = None
            shown[task.id] = body
        # Why a task waits changes with the task or with the runners; only then is it asked again.
        blocked = queue.waiting(explain) if explain else {}
        for task_id in explain:
            reason = blocked.get(task_id)
            shown[task_id]["blocked"] = None if reason is None else reason.as_dict()
        return shown

    def _topology(self) -> str:
        queue = self.services.queue
        return _digest([(r.id, queue.alive(r), r.running, r.stopped_at) for r in queue.runners()])


def watcher_of(request: Request) -> Watcher:
    """The app's watcher, made on first use."""
    return made_once(
        request.app,
        "web_watcher",
        Watcher,
        lambda: Watcher(
            services(request),
            shared_overview(request),
            stopping=stopping_of(request.app),
            supervision=getattr(request.app.state, "supervision", None),
        ),
    )


def _frame(epoch: str, item: tuple[int, str, str]) -> str:
    number, event, data = item
    return f"id: {epoch}.{number}\nevent: {event}\ndata: {data}\n\n"


def _missed(watcher: Watcher, last_id: str) -> list[tuple[int, str, str]] | None:
    """What a reconnecting page missed, or ``None`` when it must fetch everything again."""
    epoch, _, number = last_id.partition(".")
    if epoch != watcher.epoch or not number.isdigit():
        return None
    return watcher.since(int(number))


@router.get("/web/stream")
async def stream(request: Request, current: Session = Depends(session)) -> StreamingResponse:
    """Server-sent events: ``incidents``, ``runs``, ``task.updated``, ``topology``.

    A stream counts against its token's and the server's caps on held requests.
    """
    watcher = watcher_of(request)
    last_id = request.headers.get("last-event-id", "")

    async def events() -> AsyncIterator[str]:
        inbox = watcher.listen()
        try:
            yield "retry: 1000\n\n"
            if last_id:
                missed = _missed(watcher, last_id)
                for item in missed or []:
                    yield _frame(watcher.epoch, item)
                if missed is None:
                    yield "event: resync\ndata: {}\n\n"
            hello = json.dumps(watcher.hello())
            yield f"id: {watcher.epoch}.{watcher.seq}\nevent: hello\ndata: {hello}\n\n"
            async for arrived in relay(request, inbox, STREAM_S, LOOK_EVERY_S):
                yield KEEP_ALIVE if arrived is None else _frame(watcher.epoch, arrived)
        finally:
            watcher.leave(inbox)

    return held_stream(request.app, current.token_id, events(), headers=SSE_HEADERS)
