"""The supervisor: starts children in order, restarts them by policy, stops them.

All decisions happen in one actor task that reads a mailbox, so child exits,
hang detections, due restarts and requests from the handle never interleave.
Nothing wakes the actor except a message: an idle tree costs no CPU.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable

from watchkeeper.supervise.children import CoroutineRunner, NestedRunner, Outcome, Runner
from watchkeeper.supervise.clock import Clock, MonotonicClock, Timer, wait_until_done
from watchkeeper.supervise.errors import (
    RestartIntensityExceeded,
    StartError,
    SupervisorStoppedError,
    TreeFixedError,
)
from watchkeeper.supervise.events import (
    ChildExited,
    ChildRestarting,
    ChildStarted,
    EventBus,
    ExitReason,
    Subscription,
    SupervisorGaveUp,
)
from watchkeeper.supervise.handle import ChildInfo, SupervisorHandle, SupervisorStatistics
from watchkeeper.supervise.heartbeats import Heartbeats
from watchkeeper.supervise.holds import Holds
from watchkeeper.supervise.on_demand import OnDemand
from watchkeeper.supervise.policy import IntensityWindow, should_restart
from watchkeeper.supervise.process import ProcessRunner
from watchkeeper.supervise.slots import (
    Add,
    Command,
    Exit,
    Hung,
    Msg,
    Release,
    RestartDue,
    Slot,
    SlotState,
    Stop,
    Unhealthy,
    first_of,
    interrupt,
)
from watchkeeper.supervise.spec import (
    ChildSpec,
    CoroutineTarget,
    ProcessTarget,
    Restart,
    SupervisorSpec,
)
from watchkeeper.supervise.strategies import restart_group

logger = logging.getLogger(__name__)


class Supervisor(OnDemand, Holds, Heartbeats):
    """A running (or runnable) supervision tree node. Build it with SupervisorBuilder."""

    def __init__(
        self,
        spec: SupervisorSpec,
        *,
        clock: Clock | None = None,
        parent_bus: EventBus | None = None,
        path: str | None = None,
    ) -> None:
        self.spec = spec
        self.path = path or spec.name
        self.clock: Clock = clock or MonotonicClock()
        self.bus = EventBus(parent_bus)
        self._slots = [Slot(c) for c in spec.children]
        self._window = IntensityWindow(spec.policy.max_restarts, spec.policy.period_s)
        self._restart_timers: dict[object, Timer] = {}
        self._tokens = itertools.count()
        self._mailbox: asyncio.Queue[Msg] | None = None
        self._actor: asyncio.Task[None] | None = None
        self._finished = asyncio.Event()
        self._error: BaseException | None = None
        self._restarts_total = 0
        self._started = False
        self._stop_asked = False

    # -- public surface (also reached through SupervisorHandle) ----------------

    def subscribe(self, maxsize: int | None = None) -> Subscription:
        """Subscribe to this tree's events (including nested supervisors')."""
        return self.bus.subscribe(maxsize or self.spec.event_queue_size)

    async def start(self) -> SupervisorHandle:
        """Start every child in order, each after the previous one is ready."""
        await self.start_children()
        return SupervisorHandle(self)

    async def start_children(self) -> None:
        if self._started:
            raise SupervisorStoppedError(self.path)
        self._started = True
        self._mailbox = asyncio.Queue()
        if self.spec.background_start:
            self._start_in_background()
            return
        for slot in self._slots:
            held = self._hold_reason(slot)
            outcome = (
                await self._start_slot(slot)
                if held is None
                else Outcome(ExitReason.START_FAILED, f"held: {held}")
            )
            if outcome is not None:
                await self._stop_all(reason="start failure")
                self._finish(StartError(self.path, slot.spec.name, outcome.detail))
                raise StartError(self.path, slot.spec.name, outcome.detail)
        self._actor = asyncio.create_task(self._run(), name=f"supervisor {self.path}")

    def _start_in_background(self) -> None:
        """Every child starts in the actor, in order, as one restart group due now."""
        token = next(self._tokens)
        for slot in self._slots:
            slot.token, slot.state = token, SlotState.RESTART_PENDING
        self._actor = asyncio.create_task(self._run(), name=f"supervisor {self.path}")
        self._post(RestartDue(token))

    async def wait(self) -> None:
        """Wait until stopped; raises RestartIntensityExceeded if it gave up."""
        await self._finished.wait()
        if self._error is not None:
            raise self._error

    async def stop(self) -> None:
        """Stop all children in reverse start order and end the supervisor."""
        if self._finished.is_set() or self._mailbox is None:
            return
        # A child still waiting to become ready must not hold the stop up for its start time.
        self._stop_asked = True
        for slot in self._slots:
            interrupt(slot)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._mailbox.put_nowait(Stop(done))
        await asyncio.shield(done)

    async def add_child(self, spec: ChildSpec) -> None:
        """Start a new child (dynamic supervisors only)."""
        if not self.spec.dynamic:
            raise TreeFixedError(self.path)
        if self._finished.is_set() or self._mailbox is None:
            raise SupervisorStoppedError(self.path)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._mailbox.put_nowait(Add(spec, done))
        await done

    @property
    def finished(self) -> bool:
        return self._finished.is_set()

    def children(self) -> tuple[ChildInfo, ...]:
        return tuple(
            ChildInfo(
                name=s.spec.name,
                state=str(s.state),
                pid=s.runner.pid if s.runner is not None else None,
                restarts=s.restarts,
                attempt=s.attempt,
                last_beat=s.last_beat,
                last_exit=s.last_exit,
                restart_at=s.restart_at if s.state is SlotState.RESTART_PENDING else None,
                held=s.held if s.state is SlotState.HELD else None,
                started_at=s.started_at if s.state is SlotState.RUNNING else None,
            )
            for s in self._slots
        )

    def statistics(self) -> SupervisorStatistics:
        return SupervisorStatistics(
            path=self.path,
            restarts=self._restarts_total,
            restarts_in_window=len(self._window),
            running=sum(1 for s in self._slots if s.state is SlotState.RUNNING),
            events_dropped=self.bus.dropped,
            finished=self._finished.is_set(),
        )

    # -- the actor -----------------------------------------------------------

    async def _run(self) -> None:
        assert self._mailbox is not None
        try:
            while not self._finished.is_set():
                msg = await self._mailbox.get()
                await self._handle(msg)
        except asyncio.CancelledError:
            await self._stop_all(reason="supervisor cancelled")
            self._finish(None)
            raise
        except Exception as exc:  # a bug here must still stop the children
            logger.exception(
                "supervisor %s crashed; stopping its children",
                self.path,
                extra={"action": "supervisor_crash"},
            )
            await self._stop_all(reason="supervisor crashed")
            self._finish(exc)
        finally:
            self._drain_mailbox()

    async def _handle(self, msg: Msg) -> None:
        if isinstance(msg, Exit):
            if msg.slot.runner is msg.runner and not msg.runner.stopping:
                await self._child_exited(msg.slot, msg.outcome)
        elif isinstance(msg, Hung):
            await self._hung(msg.slot, msg.runner)
        elif isinstance(msg, RestartDue):
            await self._restart_due(msg.token)
        elif isinstance(msg, Add):
            await self._add(msg)
        elif isinstance(msg, Command):
            await self._on_command(msg)
        elif isinstance(msg, Unhealthy):
            await self._on_unhealthy(msg)
        elif isinstance(msg, Release):
            self._on_release()
        else:
            await self._stop_all(reason="stop requested")
            self._finish(None)
            msg.done.set_result(None)

    def _drain_mailbox(self) -> None:
        assert self._mailbox is not None
        while not self._mailbox.empty():
            msg = self._mailbox.get_nowait()
            if isinstance(msg, Stop | Add | Command | Unhealthy) and not msg.done.done():
                if isinstance(msg, Add | Command | Unhealthy):
                    msg.done.set_exception(SupervisorStoppedError(self.path))
                else:
                    msg.done.set_result(None)

    def _finish(self, error: BaseException | None) -> None:
        for timer in self._restart_timers.values():
            timer.cancel()
        self._restart_timers.clear()
        self._error = error
        self._finished.set()

    # -- starting ------------------------------------------------------------

    def _make_runner(self, slot: Slot) -> Runner:
        spec = slot.spec

        def beat(step: str | None) -> None:
            self._on_heartbeat(slot, runner, step)

        runner: Runner
        if isinstance(spec.target, CoroutineTarget):
            runner = CoroutineRunner(spec, self.path, self.clock, slot.attempt, beat)
        elif isinstance(spec.target, ProcessTarget):
            runner = ProcessRunner(spec, self.path, self.clock, beat)
        else:
            nested = spec.target.spec
            runner = NestedRunner(spec, self.path, self.clock, self._nested_factory(nested))
        return runner

    def _nested_factory(self, nested: SupervisorSpec) -> Callable[[], Supervisor]:
        def make() -> Supervisor:
            return Supervisor(
                nested, clock=self.clock, parent_bus=self.bus, path=f"{self.path}/{nested.name}"
            )

        return make

    async def _start_slot(self, slot: Slot) -> Outcome | None:
        """Start one child and wait for its ready signal; an Outcome means it failed."""
        if self._stop_asked:
            return Outcome(ExitReason.SHUTDOWN, "not started: the supervisor is stopping")
        runner = self._make_runner(slot)
        runner.on_exit = lambda outcome: self._post(Exit(slot, runner, outcome))
        slot.runner, slot.state = runner, SlotState.STARTING
        slot.restart_at = slot.held = None
        slot.interrupt = asyncio.get_running_loop().create_future()
        try:
            runner.launch()
        except Exception as exc:  # noqa: BLE001 - any launch error is this child's failure
            logger.warning(
                "could not start child %s/%s: %r",
                self.path,
                slot.spec.name,
                exc,
                extra={"action": "start_child"},
            )
            slot.runner, slot.state = None, SlotState.IDLE
            return Outcome(ExitReason.ERROR, f"could not start: {exc!r}")
        now = self.clock.now()
        slot.started_at = slot.last_beat = now
        self._arm_heartbeat(slot, runner)
        self.bus.publish(
            ChildStarted(self.path, slot.spec.name, now, slot.attempt, runner.pid, slot.spec.title)
        )
        deadline = now + slot.spec.start_timeout_s
        waited = first_of(runner.ready, runner.exited, slot.interrupt)
        await wait_until_done(waited, self.clock, deadline)
        if runner.ready.done():
            slot.state = SlotState.RUNNING
            return None
        if runner.exited.done():
            slot.runner = None
            return runner.exited.result()
        await runner.stop()
        slot.runner = None
        if slot.interrupt.done():
            return Outcome(ExitReason.SHUTDOWN, "stopped while starting")
        return Outcome(
            ExitReason.START_TIMEOUT, f"not ready within {slot.spec.start_timeout_s:g} s"
        )

    def _post(self, msg: Msg) -> None:
        if self._mailbox is not None and not self._finished.is_set():
            self._mailbox.put_nowait(msg)

    # -- exits and restarts --------------------------------------------------

    async def _child_exited(self, slot: Slot, outcome: Outcome) -> None:
        now = self.clock.now()
        if slot.hb_timer is not None:
            slot.hb_timer.cancel()
        slot.runner = None
        name = slot.spec.name
        if not should_restart(slot.spec.restart, outcome.reason):
            slot.state = SlotState.DONE
            self._publish_exit(slot, outcome, will_restart=False)
            return
        if not self._window.record(now):
            await self._give_up(slot, outcome)
            return
        self._publish_exit(slot, outcome, will_restart=True)
        if now - slot.started_at >= self.spec.policy.stable_s:
            slot.attempt = 0
        delay = self.spec.policy.backoff.duration(slot.attempt)
        slot.attempt += 1
        slot.restarts += 1
        self._restarts_total += 1
        index = self._slots.index(slot)
        group = [self._slots[i] for i in restart_group(self.spec.strategy, len(self._slots), index)]
        await self._stop_siblings(slot, group)
        token = next(self._tokens)
        for member in group:
            if member is slot or member.state in (SlotState.RESTART_PENDING, SlotState.HELD):
                self._retoken(member, token)
                member.restart_at = now + delay
        self.bus.publish(ChildRestarting(self.path, name, now, delay, slot.attempt))
        if delay <= 0:
            # Due now: a timer would cost two more turns of the loop before the restart.
            self._post(RestartDue(token))
            return
        self._restart_timers[token] = self.clock.call_at(
            now + delay, lambda: self._post(RestartDue(token))
        )

    def _publish_exit(self, slot: Slot, outcome: Outcome, *, will_restart: bool) -> None:
        slot.last_exit = f"{outcome.reason}: {outcome.detail}"
        self.bus.publish(
            ChildExited(
                self.path,
                slot.spec.name,
                self.clock.now(),
                outcome.reason,
                outcome.detail,
                outcome.exit_code,
                will_restart,
            )
        )

    def _retoken(self, slot: Slot, token: object) -> None:
        old = slot.token
        slot.token, slot.state = token, SlotState.RESTART_PENDING
        if old is not None and not any(s.token is old for s in self._slots):
            timer = self._restart_timers.pop(old, None)
            if timer is not None:
                timer.cancel()

    async def _stop_siblings(self, failed: Slot, group: list[Slot]) -> None:
        for member in reversed(group):
            if member is failed or member.state is not SlotState.RUNNING:
                continue
            outcome = await self._stop_slot(member)
            restart = member.spec.restart is not Restart.TEMPORARY
            member.state = SlotState.RESTART_PENDING if restart else SlotState.DONE
            self._publish_exit(member, outcome, will_restart=restart)

    async def _stop_slot(self, slot: Slot) -> Outcome:
        runner = slot.runner
        if slot.hb_timer is not None:
            slot.hb_timer.cancel()
        if runner is None:
            return Outcome(ExitReason.SHUTDOWN, "not running")
        outcome = await runner.stop()
        slot.runner = None
        return outcome

    async def _give_up(self, failed: Slot, outcome: Outcome) -> None:
        """Announce the decision, then stop everything and fail upward."""
        policy = self.spec.policy
        logger.error(
            "supervisor %s gave up: more than %d restarts in %g s",
            self.path,
            policy.max_restarts,
            policy.period_s,
            extra={"action": "give_up"},
        )
        names = tuple(s.spec.name for s in self._slots)
        self.bus.publish(
            SupervisorGaveUp(self.path, self.clock.now(), len(self._window), policy.period_s, names)
        )
        failed.state = SlotState.DONE
        self._publish_exit(failed, outcome, will_restart=False)
        await self._stop_all(reason="restart intensity exceeded")
        self._finish(RestartIntensityExceeded(self.path, policy.max_restarts, policy.period_s))

    async def _stop_all(self, *, reason: str) -> None:
        for slot in reversed(self._slots):
            slot.token = None
            if slot.state in (SlotState.RUNNING, SlotState.STARTING) and slot.runner is not None:
                outcome = await self._stop_slot(slot)
                self._publish_exit(slot, outcome, will_restart=False)
            slot.state = SlotState.DONE
        for timer in self._restart_timers.values():
            timer.cancel()
        self._restart_timers.clear()
        logger.info(
            "supervisor %s stopped its children (%s)",
            self.path,
            reason,
            extra={"action": "stop_children"},
        )

    async def _add(self, msg: Add) -> None:
        if any(s.spec.name == msg.spec.name for s in self._slots):
            msg.done.set_exception(
                ValueError(f"supervisor {self.path!r} already has a child {msg.spec.name!r}")
            )
            return
        slot = Slot(msg.spec)
        self._slots.append(slot)
        outcome = await self._start_slot(slot)
        if outcome is None:
            msg.done.set_result(None)
            return
        slot.state = SlotState.DONE
        msg.done.set_exception(StartError(self.path, msg.spec.name, outcome.detail))
