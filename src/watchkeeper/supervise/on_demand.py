"""Restarting or stopping one child of a supervisor on request (an operator's action).

A mixin of :class:`~watchkeeper.supervise.supervisor.Supervisor`: the request goes
through the supervisor's mailbox, so it never interleaves with exits and restarts.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from watchkeeper.supervise.children import Outcome
from watchkeeper.supervise.clock import Clock, Timer
from watchkeeper.supervise.errors import StartError, SupervisorStoppedError, UnknownChild
from watchkeeper.supervise.events import ChildRestarting, EventBus, ExitReason
from watchkeeper.supervise.slots import Command, Msg, Slot, SlotState, Unhealthy, interrupt

logger = logging.getLogger("watchkeeper.supervise.supervisor")


class OnDemand:
    """``restart_child`` and ``stop_child``, and the actor's handling of them."""

    path: str
    clock: Clock
    bus: EventBus
    _slots: list[Slot]
    _mailbox: asyncio.Queue[Msg] | None
    _finished: asyncio.Event
    _restart_timers: dict[object, Timer]
    _restarts_total: int

    if TYPE_CHECKING:  # the supervisor's own, which this mixin's requests go through

        async def _stop_slot(self, slot: Slot) -> Outcome: ...

        def _publish_exit(self, slot: Slot, outcome: Outcome, *, will_restart: bool) -> None: ...

        async def _start_slot(self, slot: Slot) -> Outcome | None: ...

        async def _child_exited(self, slot: Slot, outcome: Outcome) -> None: ...

    async def restart_child(self, name: str) -> None:
        """Stop the named child if it runs and start it again (a restart on request).

        The restart is counted in the child's restarts but not in the intensity
        window, which counts failures. Raises :class:`UnknownChild` for a name
        the supervisor does not have, :class:`StartError` if it fails to start
        (the restart policy then handles it as any other failed start).
        """
        await self._command(name, restart=True)

    async def stop_child(self, name: str) -> None:
        """Stop the named child and leave it stopped until :meth:`restart_child`."""
        await self._command(name, restart=False)

    async def fail_child(self, name: str, detail: str) -> None:
        """The named child is unhealthy (a health check says so): stop it and handle that as
        an abnormal exit (``unhealthy``), restarted by its restart type and counted in the
        intensity like a crash. A child that is not running is left as it is."""
        done = self._request(name)
        assert self._mailbox is not None
        self._mailbox.put_nowait(Unhealthy(name, detail, done))
        await done

    async def _command(self, name: str, *, restart: bool) -> None:
        done = self._request(name)
        assert self._mailbox is not None
        # A child waiting to become ready is stopped at once, not after its start time.
        interrupt(next(s for s in self._slots if s.spec.name == name))
        self._mailbox.put_nowait(Command(name, restart, done))
        await done

    def _request(self, name: str) -> asyncio.Future[None]:
        """The future a request for child ``name`` is answered on, once it is known to exist."""
        if self._finished.is_set() or self._mailbox is None:
            raise SupervisorStoppedError(self.path)
        if not any(s.spec.name == name for s in self._slots):
            raise UnknownChild(self.path, name, tuple(s.spec.name for s in self._slots))
        return asyncio.get_running_loop().create_future()

    async def _on_unhealthy(self, msg: Unhealthy) -> None:
        slot = next(s for s in self._slots if s.spec.name == msg.child)
        runner = slot.runner
        if slot.state is not SlotState.RUNNING or runner is None:
            msg.done.set_result(None)
            return
        logger.warning(
            "child %s/%s is unhealthy (%s); restarting it",
            self.path,
            slot.spec.name,
            msg.detail,
            extra={"action": "unhealthy_child"},
        )
        await runner.stop()
        msg.done.set_result(None)
        await self._child_exited(slot, Outcome(ExitReason.UNHEALTHY, msg.detail))

    async def _on_command(self, msg: Command) -> None:
        slot = next(s for s in self._slots if s.spec.name == msg.child)
        wanted = "restart requested" if msg.restart else "stop requested"
        if slot.state in (SlotState.RUNNING, SlotState.STARTING) and slot.runner is not None:
            await self._stop_slot(slot)
            outcome = Outcome(ExitReason.SHUTDOWN, wanted)
            self._publish_exit(slot, outcome, will_restart=msg.restart)
        elif slot.state in (SlotState.RESTART_PENDING, SlotState.HELD):
            self._untoken(slot)
        if not msg.restart:
            slot.state = SlotState.DONE
            logger.info(
                "child %s/%s stopped on request",
                self.path,
                slot.spec.name,
                extra={"action": "stop_child"},
            )
            msg.done.set_result(None)
            return
        slot.restarts += 1
        self._restarts_total += 1
        logger.info(
            "child %s/%s restarting on request (restart %d)",
            self.path,
            slot.spec.name,
            slot.restarts,
            extra={"action": "restart_child"},
        )
        self.bus.publish(
            ChildRestarting(self.path, slot.spec.name, self.clock.now(), 0.0, slot.attempt)
        )
        failed = await self._start_slot(slot)
        if failed is None:
            msg.done.set_result(None)
            return
        msg.done.set_exception(StartError(self.path, slot.spec.name, failed.detail))
        await self._child_exited(slot, failed)

    def _untoken(self, slot: Slot) -> None:
        """Take ``slot`` out of its pending restart group; the group's timer goes with its last."""
        old, slot.token = slot.token, None
        if old is not None and not any(s.token is old for s in self._slots):
            timer = self._restart_timers.pop(old, None)
            if timer is not None:
                timer.cancel()
