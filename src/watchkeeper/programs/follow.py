"""What the host does with what a group's supervisor says: each program's history, its log,
its run in the store, and its health checks.

One follower task per group supervisor reads its events in order. Store writes run
in a worker thread, one at a time, so a program's run moves in the order things
happened to it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from watchkeeper.programs.records import CRASH_LOOP, ProgramRecords
from watchkeeper.programs.state import NOT_WANTED, GroupRun, Moment, ProgramState
from watchkeeper.supervise import (
    ChildExited,
    ChildHeld,
    ChildRestarting,
    ChildStarted,
    Event,
    ExitReason,
    SupervisorGaveUp,
)

log = logging.getLogger(__name__)

#: Told that a program started running (``True``) or stopped (``False``).
HealthHook = Callable[[str, bool], None]


class Follower:
    """Turns a group's events into history, log lines, store moves and health checks."""

    def __init__(
        self,
        programs: dict[str, ProgramState],
        records: ProgramRecords,
        host: str,
        wall: Callable[[float], datetime],
        health: HealthHook,
        changed: Callable[[], None],
    ) -> None:
        self.programs = programs
        self.records = records
        self.host = host
        self.wall = wall
        self.health = health
        self.changed = changed

    async def follow(self, group: GroupRun) -> None:
        """Handle the group's events until cancelled."""
        while True:
            event = await group.events.get()
            group.handling = True
            try:
                await self.handle(group, event)
            except Exception:  # a bug here must not stop the record of what follows
                log.exception("Could not handle %r", event, extra={"action": "program_event"})
            finally:
                group.handling = False
                group.idle.set()

    async def handle(self, group: GroupRun, event: Event) -> None:
        """One event of the group's supervisor."""
        if isinstance(event, SupervisorGaveUp):
            self._gave_up(group, event)
        elif isinstance(event, ChildStarted):
            await self._started(event)
        elif isinstance(event, ChildExited):
            await self._exited(group, event)
        elif isinstance(event, ChildRestarting):
            await self._restarting(event)
        elif isinstance(event, ChildHeld):
            await self._held(event)
        else:
            return  # heartbeats: programs send none
        self.changed()

    def _note(self, state: ProgramState, at: float, event: str, text: str) -> None:
        state.history.append(Moment(self.wall(at), event, text))  # type: ignore[arg-type]
        state.log.note(text)

    async def _write(self, fn: Callable[..., None], *args: object) -> None:
        await asyncio.to_thread(fn, *args)

    async def _started(self, event: ChildStarted) -> None:
        state = self.programs[event.child]
        pid = f"pid {event.pid}" if event.pid is not None else "no pid"
        text = "started" if event.attempt == 0 else f"started again (attempt {event.attempt})"
        self._note(state, event.at, "started", f"{text}, {pid}")
        self.health(state.name, True)
        state.recorded = True
        await self._write(self.records.started, state.name, state.plan.title(self.host), text)

    async def _restarting(self, event: ChildRestarting) -> None:
        state = self.programs[event.child]
        state.restarts += 1
        when = "now" if event.delay_s <= 0 else f"in {event.delay_s:.2g} s"
        self._note(state, event.at, "restarting", f"restart {state.restarts} {when}")
        if state.recorded:
            await self._write(self.records.moved, state.name, f"restarting {when}")

    async def _held(self, event: ChildHeld) -> None:
        state = self.programs[event.child]
        if event.reason == NOT_WANTED:
            return  # stopped on purpose: not news
        self._note(state, event.at, "paused", f"start paused: {event.reason}")
        log.warning(
            "Program %s does not start: %s",
            state.name,
            event.reason,
            extra={"action": "program_paused"},
        )
        if state.recorded:
            await self._write(self.records.moved, state.name, f"start paused: {event.reason}")

    def _gave_up(self, group: GroupRun, event: SupervisorGaveUp) -> None:
        group.state, group.gave_up, group.gave_up_at = "gave_up", event, self.wall(event.at)
        log.error(
            "Program group %s gave up: more than %d restarts within %g s; its programs are "
            "stopped until someone restarts them",
            group.name,
            group.plan.intensity.restarts,
            event.period_s,
            extra={"action": "program_gave_up"},
        )

    async def _exited(self, group: GroupRun, event: ChildExited) -> None:
        state = self.programs[event.child]
        self.health(state.name, False)
        how = f"{event.reason.value}: {event.detail}"
        if event.will_restart:
            self._note(
                state,
                event.at,
                "unhealthy" if event.reason is ExitReason.UNHEALTHY else "exited",
                f"exited ({how})",
            )
            return
        if group.gave_up is not None:
            await self._down_with_group(group, state, event, how)
            return
        self._note(
            state,
            event.at,
            "stopped" if event.reason is ExitReason.SHUTDOWN else "exited",
            f"exited ({how}); not restarted",
        )
        if not state.recorded:
            return
        if event.reason is ExitReason.SHUTDOWN:
            why = group.stopping or "stopped by request"
            await self._write(self.records.stopped, state.name, why)
        elif event.reason is ExitReason.NORMAL:
            await self._write(self.records.exited, state.name, f"exited normally ({how})")
        else:
            await self._write(self.records.failed, state.name, f"exited: {how}")

    async def _down_with_group(
        self, group: GroupRun, state: ProgramState, event: ChildExited, how: str
    ) -> None:
        """After the give-up: the first abnormal exit is the crash loop's; the rest are stopped."""
        gave_up = group.gave_up
        assert gave_up is not None
        limit = group.plan.intensity
        if group.culprit is None and event.reason.abnormal:
            group.culprit = state.name
            reason = (
                f"crash loop: more than {limit.restarts} restarts within {limit.within_s:g} s; "
                f"last exit {how}"
            )
            whose = f"its group {group.name}" if group.plan.declared else "its supervisor"
            self._note(state, event.at, "gave_up", f"{reason}; {whose} gave up")
            if state.recorded:
                await self._write(self.records.failed, state.name, reason, CRASH_LOOP)
            return
        why = f"stopped: its group {group.name} gave up after {group.culprit}'s crash loop"
        self._note(state, event.at, "stopped", why)
        if state.recorded:
            await self._write(self.records.stopped, state.name, why)
