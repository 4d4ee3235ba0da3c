"""The server's own supervision: its loops as a supervision tree, the breakers it calls
platforms through, and the health checks that say how it is.

``watchkeeper serve`` runs its loops (the leader lease, the sweeper, the notifier,
the health monitor) as children of one one-for-one supervisor, as OTP or
supervisord would: a loop that ends or raises is restarted after a backoff, the
restart is counted and logged, and more than :data:`MAX_RESTARTS` restarts within
:data:`PERIOD_S` make the tree give up (its checks turn unhealthy). Stopping the
server stops the children in reverse start order, each given its stop signal and
a grace period first, so the notifier finishes its pass and the lease is given up.

:meth:`ServerSupervision.snapshot` is what ``GET /api/v1/supervision`` and the
dashboard show (docs/supervision.md describes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watchkeeper.errors import Conflict, NotFound
from watchkeeper.notify.channels.base import Channel
from watchkeeper.programs import view as program_view
from watchkeeper.server.deps import Services
from watchkeeper.server.supervision_checks import ChildCheck, StoreCheck, SweepCheck
from watchkeeper.supervise import (
    Backoff,
    BreakerStateChange,
    ChildContext,
    ChildExited,
    ChildRestarting,
    ChildSpec,
    ChildStarted,
    CircuitBreaker,
    Clock,
    Event,
    HealthCheck,
    HealthFlag,
    HealthMonitor,
    Subscription,
    Supervisor,
    SupervisorBuilder,
    SupervisorGaveUp,
    SupervisorStoppedError,
    coroutine_child,
)
from watchkeeper.watch.store_writes import StoreWrites

log = logging.getLogger(__name__)

#: The tree's id (and its children's prefix: ``server/notifier``).
TREE = "server"
#: Restart intensity: more restarts than this within PERIOD_S and the tree gives up.
MAX_RESTARTS = 5
PERIOD_S = 60.0
#: Restart delays: 0.5 s, 1 s, 2 s ... up to 30 s, half of it jittered; 30 s up resets it.
BACKOFF = Backoff(initial=0.5, factor=2.0, cap=30.0, jitter=0.5)
STABLE_S = 30.0
#: How long a loop has to finish after its stop signal before it is cancelled.
GRACE_S = 10.0
#: A platform is not called for this long after this many failures in a row.
BREAKER_FAIL_MAX = 3
BREAKER_RESET_S = 30.0
#: How often the health checks run.
CHECK_EVERY_S = 5.0

#: A loop of the server: runs until the event it is given is set.
Loop = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


def loop_child(name: str, loop: Loop, title: str) -> ChildSpec:
    """A child that runs ``loop`` and, when stopped, sets its stop event before cancelling.

    The loop ending by itself (returning or raising) is an exit like any other:
    the supervisor restarts it.
    """

    async def body(_ctx: ChildContext) -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(loop(stop), name=name)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                stop.set()  # a clean stop: the loop finishes its pass and steps down
                await asyncio.wait((task,), timeout=GRACE_S)
                task.cancel()
            raise

    return coroutine_child(name, body, shutdown_timeout_s=GRACE_S + 1.0, title=title)


_STATES = {"running": "running", "starting": "running", "restart_pending": "restarting"}


@dataclass
class _Breaker:
    breaker: CircuitBreaker
    node: str | None


class ServerSupervision:
    """The server's supervision tree, its breakers and its health monitor, and their picture."""

    def __init__(
        self,
        services: Services,
        loops: Sequence[tuple[str, Loop, str]],
        channels: Mapping[str, Channel] | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.services = services
        #: Every write the store refuses, seen while the tree runs (``/healthz``'s ``store``).
        self.store_writes = StoreWrites(services.clock)
        self._sweeps = any(name == "sweeper" for name, _, _ in loops)
        #: When this process last began to sweep (the loop started, or it took the lease):
        #: a late sweep is measured from here when no sweep succeeded since.
        self.sweeping_since: datetime | None = None
        self.monitor = HealthMonitor(
            interval_s=CHECK_EVERY_S, failure_threshold=2, flag=HealthFlag()
        )
        builder = (
            SupervisorBuilder(TREE)
            .intensity(MAX_RESTARTS, PERIOD_S)
            .backoff(BACKOFF, stable_s=STABLE_S)
        )
        for name, loop, title in loops:
            builder.child(loop_child(name, loop, title))
        self.supervisor: Supervisor = builder.build(clock)
        self._breakers: dict[str, _Breaker] = {}
        for channel in sorted(channels or {}):
            if channel != "log":  # the log channel calls no one
                self.add_breaker(f"notify:{channel}", f"{TREE}/notifier")
        #: The tree node each check is about (none for the store).
        self._check_nodes: dict[str, str | None] = {}
        self._register(StoreCheck(services), None)
        if self._sweeps:
            self._register(SweepCheck(services, self), f"{TREE}/sweeper")
        for spec in self.supervisor.spec.children:
            self._register(ChildCheck(self, spec.name), f"{TREE}/{spec.name}")
        self.gave_up = False
        self._running = False
        #: Called (on the event loop) whenever a child, a breaker or a check changes.
        self.on_change: list[Callable[[], None]] = []
        #: The programs this host keeps running: a tree of their own in the picture.
        self.programs = services.programs
        self.programs.on_change.append(self._changed)
        self._events: Subscription | None = None
        self._watch: asyncio.Task[None] | None = None
        # The checks run beside the tree, not in it: they must still say how it is
        # when it has given up.
        self._checking: asyncio.Task[None] | None = None

    # -- building -------------------------------------------------------------------

    def _register(self, check: HealthCheck, node: str | None) -> None:
        self.monitor.register(check)
        self._check_nodes[check.name] = node

    def add_breaker(self, name: str, node: str | None) -> CircuitBreaker:
        """A breaker called ``name``, drawn on ``node`` of the tree."""
        breaker = CircuitBreaker(name, fail_max=BREAKER_FAIL_MAX, reset_timeout_s=BREAKER_RESET_S)
        breaker.add_listener(self._breaker_changed)
        self._breakers[name] = _Breaker(breaker, node)
        return breaker

    @property
    def breakers(self) -> dict[str, CircuitBreaker]:
        """Every breaker by name (what ``app.state.breakers`` holds)."""
        return {name: kept.breaker for name, kept in self._breakers.items()}

    def channel_breakers(self) -> dict[str, CircuitBreaker]:
        """The notifier's breakers by channel name (what its deliverer calls through)."""
        return {
            name.removeprefix("notify:"): kept.breaker
            for name, kept in self._breakers.items()
            if name.startswith("notify:")
        }

    # -- running --------------------------------------------------------------------

    async def start(self) -> None:
        """Start the loops in order, the health checks beside them, and watch the tree to
        log and announce what it does."""
        self.store_writes.watch(self.services.cluster.store.engine)
        if self._sweeps:
            self.sweeping_since = self.services.clock()
            self.services.cluster.leadership.on_change.append(self._leading)
        self._events = self.supervisor.subscribe()
        self._watch = asyncio.create_task(self._follow(self._events), name="supervision-watch")
        await self.supervisor.start()
        self._running = True
        self._checking = asyncio.create_task(self._check_loop(), name="health-checks")
        await self.programs.start()

    async def stop(self) -> None:
        """Stop the programs, then the loops in reverse start order, each after its grace
        period at most."""
        await self.programs.stop()
        await self.supervisor.stop()
        self._running = False
        self.store_writes.unwatch()
        with contextlib.suppress(ValueError):
            self.services.cluster.leadership.on_change.remove(self._leading)
        for task in (self._checking, self._watch):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._events is not None:
            # What the tree said while it stopped is logged still, in order.
            while (event := self._events.get_nowait()) is not None:
                self._note(event)
            self._events.close()

    async def _check_loop(self) -> None:
        while True:
            await self._run_checks()
            await asyncio.sleep(CHECK_EVERY_S)

    async def _run_checks(self) -> None:
        before = self._check_states()
        await self.monitor.run_once()
        if self._check_states() != before:
            self._changed()

    def _check_states(self) -> list[tuple[str, str]]:
        return [(c.name, c.status.value) for c in self.monitor.report().checks]

    async def _follow(self, events: Subscription) -> None:
        async for event in events:
            self._note(event)
            # A child's check follows its state at once, not at the next round of checks.
            await self._run_checks()

    def _leading(self, leads: bool) -> None:
        # Called from the lease loop's thread: one assignment, read whole by the judge.
        if leads:
            self.sweeping_since = self.services.clock()

    def _note(self, event: Event) -> None:
        """Log what the tree did, and announce that it changed."""
        if isinstance(event, ChildStarted) and event.child == "sweeper":
            self.sweeping_since = self.services.clock()
        if isinstance(event, ChildExited):
            if event.will_restart and event.reason.abnormal:
                log.warning(
                    "Loop %s/%s %s (%s); the supervisor restarts it",
                    event.path,
                    event.child,
                    event.reason.value,
                    event.detail,
                    extra={"action": "supervise_restart"},
                )
            elif not event.will_restart:
                log.info(
                    "Loop %s/%s stopped (%s: %s)",
                    event.path,
                    event.child,
                    event.reason.value,
                    event.detail,
                    extra={"action": "supervise_stop"},
                )
        elif isinstance(event, ChildRestarting):
            counts = {c.name: c.restarts for c in self.supervisor.children()}
            log.info(
                "Restarting %s/%s in %.1f s (restart %d)",
                event.path,
                event.child,
                event.delay_s,
                counts.get(event.child, 0),
                extra={"action": "supervise_restart"},
            )
        elif isinstance(event, SupervisorGaveUp):
            self.gave_up = True
            log.error(
                "Supervision tree %s gave up after %d restarts in %g s: its loops are stopped",
                event.path,
                event.restarts,
                event.period_s,
                extra={"action": "supervise_gave_up"},
            )
        self._changed()

    def _breaker_changed(self, change: BreakerStateChange) -> None:
        log.warning(
            "Circuit breaker %s: %s -> %s",
            change.name,
            change.old.value,
            change.new.value,
            extra={"action": "breaker_state"},
        )
        self._changed()

    def _changed(self) -> None:
        for callback in tuple(self.on_change):
            with contextlib.suppress(Exception):
                callback()

    # -- actions --------------------------------------------------------------------

    def _child_name(self, child_id: str) -> str:
        names = [spec.name for spec in self.supervisor.spec.children]
        tree, _, name = child_id.partition("/")
        if tree != TREE or name not in names:
            known = ", ".join(f"{TREE}/{n}" for n in names)
            raise NotFound(f"no supervised child {child_id!r}; the children are: {known}")
        return name

    @contextlib.contextmanager
    def _running_tree(self) -> Iterator[None]:
        """A stopped tree's refusal, in the server's words."""
        try:
            yield
        except SupervisorStoppedError as exc:
            why = "gave up (too many restarts)" if self.gave_up else "is stopped"
            raise Conflict(
                f"the server's supervision tree {why}: its loops cannot be restarted one by "
                "one; restart the server"
            ) from exc

    async def restart_child(self, child_id: str) -> str:
        """Restart the child ``server/<name>``, or the program or group ``programs/...``
        (as the canvas names its nodes), now; what was done, in words."""
        program = program_view.named_by(child_id)
        if program is not None:
            return await self.programs.restart_program(program)
        name = self._child_name(child_id)
        with self._running_tree():
            await self.supervisor.restart_child(name)
        return f"{child_id} restarted"

    async def stop_child(self, child_id: str) -> str:
        """Stop the child ``server/<name>``, or the program or group ``programs/...``, until
        it is restarted; what was done, in words."""
        program = program_view.named_by(child_id)
        if program is not None:
            return await self.programs.stop_program(program)
        name = self._child_name(child_id)
        with self._running_tree():
            await self.supervisor.stop_child(name)
        self._changed()
        return f"{child_id} stopped; restart it to run it again"

    async def open_breaker(self, name: str) -> str:
        """Force the breaker ``name`` open; what was done, in words."""
        kept = self._breakers.get(name)
        if kept is None:
            known = ", ".join(sorted(self._breakers)) or "none"
            raise NotFound(f"no circuit breaker {name!r}; the breakers are: {known}")
        kept.breaker.force_open()
        return f"breaker {name} is open for {BREAKER_RESET_S:g} s, then lets one probe through"

    # -- the picture ----------------------------------------------------------------

    def child(self, name: str) -> dict[str, Any]:
        """One child of the tree as the API shows it."""
        return next(c for c in self.snapshot()["trees"][0]["children"] if c["name"] == name)

    def _state(self, raw: str) -> str:
        state = _STATES.get(raw, "stopped")
        return "gave_up" if state == "stopped" and self.gave_up else state

    @property
    def health_flag(self) -> HealthFlag:
        """The flag an operator switches on the canvas; off, ``/healthz`` is failing."""
        return self.monitor.flag

    def snapshot(self) -> dict[str, Any]:
        """The trees, breakers and checks, as ``GET /api/v1/supervision`` answers."""
        sup = self.supervisor
        stats = sup.statistics()
        titles = {spec.name: spec.title for spec in sup.spec.children}
        children: list[dict[str, Any]] = [
            {
                "id": f"{TREE}/{info.name}",
                "name": info.name,
                "title": titles.get(info.name),
                "kind": "worker",
                "state": self._state(info.state),
                "restarts": info.restarts,
                "last_exit": info.last_exit,
                "children": [],
            }
            for info in sup.children()
        ]
        running = self._running and not stats.finished
        tree_state = "gave_up" if self.gave_up else "running" if running else "stopped"
        tree = {
            "id": TREE,
            "name": "watchkeeper serve",
            "kind": "supervisor",
            "strategy": sup.spec.strategy.value,
            "state": tree_state,
            "restarts": stats.restarts,
            "intensity": {"max_restarts": MAX_RESTARTS, "period_s": PERIOD_S},
            "children": children,
        }
        programs = program_view.tree(self.programs)
        trees = [tree] if programs is None else [tree, programs]
        health = self._check_rows() + program_view.health_rows(self.programs)
        return {"trees": trees, "breakers": self._breaker_rows(), "health": health}

    def _breaker_rows(self) -> list[dict[str, Any]]:
        rows = []
        for name, kept in sorted(self._breakers.items()):
            stats = kept.breaker.statistics()
            rows.append(
                {
                    "name": name,
                    "state": stats.state.value.replace("_", "-"),
                    "failures": stats.failures,
                    "successes": stats.successes,
                    "rejections": stats.rejections,
                    "node": kept.node,
                }
            )
        return rows

    def _check_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "name": check.name,
                "status": check.status.value,
                "detail": check.last.detail,
                "node": self._check_nodes.get(check.name),
            }
            for check in self.monitor.report().checks
        ]
