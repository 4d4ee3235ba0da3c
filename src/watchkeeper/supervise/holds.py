"""Starting a restart group one child at a time, and holding a child whose ``hold`` says wait.

A mixin of :class:`~watchkeeper.supervise.supervisor.Supervisor`. A restart group
(the children a failure brings down, or every child of a supervisor that starts
in the background) starts in start order, one child per message of the actor's
mailbox, so a stop or a request never waits for more than one child's start.

Before each start the child's ``hold`` is asked. While it gives a reason the
child is *held*: it does not start, and neither do the children after it in its
group (they depend on it), except under one-for-one, where the others go on.
:meth:`Holds.release_held` asks again and starts what is no longer held.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from watchkeeper.supervise.children import Outcome
from watchkeeper.supervise.clock import Clock, Timer
from watchkeeper.supervise.events import ChildHeld, EventBus
from watchkeeper.supervise.slots import Msg, Release, RestartDue, Slot, SlotState
from watchkeeper.supervise.spec import SupervisorSpec
from watchkeeper.supervise.strategies import Strategy

if TYPE_CHECKING:
    from itertools import count

logger = logging.getLogger("watchkeeper.supervise.supervisor")

_WAITING = (SlotState.RESTART_PENDING, SlotState.HELD)


class Holds:
    """``release_held``, and the actor's start of a due restart group."""

    path: str
    spec: SupervisorSpec
    clock: Clock
    bus: EventBus
    _slots: list[Slot]
    _mailbox: asyncio.Queue[Msg] | None
    _finished: asyncio.Event
    _restart_timers: dict[object, Timer]
    _tokens: count[int]

    if TYPE_CHECKING:  # the supervisor's own

        def _post(self, msg: Msg) -> None: ...

        async def _start_slot(self, slot: Slot) -> Outcome | None: ...

        async def _child_exited(self, slot: Slot, outcome: Outcome) -> None: ...

    def release_held(self) -> None:
        """Ask every held child's ``hold`` again and start those it no longer holds.

        Call it on the supervisor's event loop whenever what the holds depend on
        may have cleared; it returns at once and the starts happen in the actor.
        """
        if self._mailbox is not None and not self._finished.is_set():
            self._mailbox.put_nowait(Release())

    def _on_release(self) -> None:
        tokens: list[object] = []
        for slot in self._slots:
            if slot.state is SlotState.HELD and slot.token not in tokens:
                tokens.append(slot.token)
        for token in tokens:
            self._post(RestartDue(token))

    def _hold_reason(self, slot: Slot) -> str | None:
        """Why ``slot`` must not start now, or ``None``; a hold that raises holds nothing."""
        hold = slot.spec.hold
        if hold is None:
            return None
        try:
            return hold()
        except Exception:  # a broken gate must not keep a child down for good
            logger.exception(
                "the hold of child %s/%s raised; starting it anyway",
                self.path,
                slot.spec.name,
                extra={"action": "hold_child"},
            )
            return None

    async def _restart_due(self, token: object) -> None:
        """Start the first waiting child of the group ``token``; the rest follow in turn."""
        self._restart_timers.pop(token, None)
        waiting = [s for s in self._slots if s.token is token and s.state in _WAITING]
        if not waiting:
            return
        slot = waiting[0]
        reason = self._hold_reason(slot)
        if reason is not None:
            self._hold(slot, reason)
            if self.spec.strategy is Strategy.ONE_FOR_ONE and len(waiting) > 1:
                slot.token = next(self._tokens)  # held alone: its siblings do not need it
                self._post(RestartDue(token))
            return
        slot.token = None
        outcome = await self._start_slot(slot)
        if outcome is not None:
            await self._child_exited(slot, outcome)
        if not self._finished.is_set() and any(s.token is token for s in self._slots):
            self._post(RestartDue(token))

    def _hold(self, slot: Slot, reason: str) -> None:
        if slot.state is SlotState.HELD and slot.held == reason:
            return
        slot.state, slot.held, slot.restart_at = SlotState.HELD, reason, None
        logger.info(
            "child %s/%s is held: %s",
            self.path,
            slot.spec.name,
            reason,
            extra={"action": "hold_child"},
        )
        self.bus.publish(ChildHeld(self.path, slot.spec.name, self.clock.now(), reason))
