"""Children's heartbeats: when each last beat, and a child silent past its timeout hung.

A mixin of :class:`~watchkeeper.supervise.supervisor.Supervisor`. A beat moves the
child's last-beat time (and publishes a :class:`ChildHeartbeat` at most once per
``heartbeat_event_interval_s``); one timer per child waits for its deadline and, when
no beat came since, posts :class:`Hung` to the actor, which stops the child and
handles it as an exit.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from watchkeeper.supervise.children import Outcome, Runner
from watchkeeper.supervise.clock import Clock
from watchkeeper.supervise.events import ChildHeartbeat, EventBus, ExitReason
from watchkeeper.supervise.slots import Hung, Msg, Slot
from watchkeeper.supervise.spec import SupervisorSpec

logger = logging.getLogger("watchkeeper.supervise.supervisor")


class Heartbeats:
    """``last_beat``, and the actor's side of beats and hung children."""

    path: str
    spec: SupervisorSpec
    clock: Clock
    bus: EventBus
    _slots: list[Slot]

    if TYPE_CHECKING:  # the supervisor's own

        def _post(self, msg: Msg) -> None: ...

        async def _child_exited(self, slot: Slot, outcome: Outcome) -> None: ...

    def last_beat(self, name: str) -> float | None:
        """Clock time of the named child's last heartbeat (or start), if known."""
        for slot in self._slots:
            if slot.spec.name == name:
                return slot.last_beat
        return None

    def _on_heartbeat(self, slot: Slot, runner: Runner, step: str | None) -> None:
        if slot.runner is not runner:
            return
        now = self.clock.now()
        slot.last_beat = now
        if now - slot.last_beat_event >= self.spec.heartbeat_event_interval_s:
            slot.last_beat_event = now
            self.bus.publish(ChildHeartbeat(self.path, slot.spec.name, now, step))

    def _arm_heartbeat(self, slot: Slot, runner: Runner) -> None:
        timeout = slot.spec.heartbeat_timeout_s
        if timeout is None or slot.last_beat is None:
            return

        def check() -> None:
            if slot.runner is not runner or slot.last_beat is None:
                return
            if self.clock.now() >= slot.last_beat + timeout:
                self._post(Hung(slot, runner))
            else:
                # A beat arrived since arming: wait for the new deadline, one timer at a time.
                slot.hb_timer = self.clock.call_at(slot.last_beat + timeout, check)

        slot.hb_timer = self.clock.call_at(slot.last_beat + timeout, check)

    async def _hung(self, slot: Slot, runner: Runner) -> None:
        if slot.runner is not runner:
            return
        logger.warning(
            "child %s/%s sent no heartbeat for %s s; restarting it as hung",
            self.path,
            slot.spec.name,
            slot.spec.heartbeat_timeout_s,
            extra={"action": "hung_child"},
        )
        await runner.stop()
        timeout = slot.spec.heartbeat_timeout_s
        await self._child_exited(slot, Outcome(ExitReason.HUNG, f"no heartbeat for {timeout} s"))
