"""The programs one server keeps running on its host: start, stop, restart, and their picture.

Each group (or program alone) is one supervisor of :mod:`watchkeeper.supervise`,
started in the background: a failed start is restarted by the group's policy, and
a crash loop past its intensity makes the group give up, stop its programs and
fail the run of the program that looped (the incident with Restart and Stop).
A new supervisor replaces one that gave up or was stopped when the group is
started again. Each program's ``hold`` keeps it from starting while nobody
wants it running or a host check pauses it (:mod:`.gates`).

The host runs on the server's event loop; :meth:`ProgramHost.act_from_thread`
carries an incident's press (a worker thread) over to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from watchkeeper.clock import Now
from watchkeeper.config import BackoffConfig, IntensityConfig, Settings
from watchkeeper.errors import Conflict, NotFound
from watchkeeper.procs import identity
from watchkeeper.programs import health, plan, routes
from watchkeeper.programs.follow import Follower
from watchkeeper.programs.gates import Gate, Gates
from watchkeeper.programs.output import ProgramLog
from watchkeeper.programs.records import ProgramRecords, name_and_host
from watchkeeper.programs.state import NOT_WANTED, GroupRun, ProgramState
from watchkeeper.store import Store
from watchkeeper.supervise import (
    Clock,
    MonotonicClock,
    StartError,
    Strategy,
    SuperviseError,
    strategies,
)

log = logging.getLogger(__name__)

#: How long an action waits for a program to count as started before answering anyway.
ANSWER_WITHIN_S = 5.0
#: How long a press from a worker thread waits for the host to carry it out.
PRESS_WITHIN_S = 60.0


class ProgramHost:
    """This host's programs and their group supervisors."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        clock: Now,
        *,
        supervision_clock: Clock | None = None,
        host: str | None = None,
        wake: Callable[[datetime], None] = lambda _at: None,
    ) -> None:
        self.host = host or identity.host()
        self.clock = clock
        self.sv_clock: Clock = supervision_clock or MonotonicClock()
        self.plans = plan.plans(settings, self.host)
        #: Programs of the file another host runs: name to host.
        self.elsewhere = plan.elsewhere(settings, self.host)
        self.ops_channels = tuple(settings.ops.channels)
        self.records = ProgramRecords(store, self.host, clock, wake, self._origin_of)
        self.programs: dict[str, ProgramState] = {}
        for group in self.plans:
            for program in group.programs:
                folder = plan.log_folder(settings.data_dir, program.name)
                size = int(program.config.log_max_mb * 2**20)
                log_file = ProgramLog(folder, size, program.config.log_backups)
                self.programs[program.name] = ProgramState(
                    program, log_file, program.config.autostart
                )
        self.gates = Gates(settings.host_checks, self.plans, self.sv_clock)
        self.groups: dict[str, GroupRun] = {}
        #: Called (on the event loop) whenever a program, a group or a host check changes.
        self.on_change: list[Callable[[], None]] = []
        self.running = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self._gate_task: asyncio.Task[None] | None = None
        self._follower = Follower(
            self.programs, self.records, self.host, self.wall, self._health, self._changed
        )

    # -- running ------------------------------------------------------------------

    async def start(self) -> None:
        """Look at the host checks once, then start every group (each in the background)."""
        if self.running or not self.plans:
            return
        self.loop = asyncio.get_running_loop()
        self.running = True
        await self.gates.look(self._gate_changed)
        if self.gates.interval_s is not None:
            watching = self.gates.watch(self._gate_changed, self._release)
            self._gate_task = asyncio.create_task(watching, name="program-gates")
        for group in self.plans:
            await self._start_group(group.name)

    async def stop(self) -> None:
        """Stop every group in reverse order, each program in reverse start order."""
        if not self.running:
            return
        self.running = False
        if self._gate_task is not None:
            self._gate_task.cancel()
        for group in reversed(list(self.groups.values())):
            await self._stop_group(group, "stopped: the server stopped")
            if group.follower is not None:
                group.follower.cancel()
        for state in self.programs.values():
            state.log.close()

    async def _start_group(self, name: str) -> None:
        group_plan = next(g for g in self.plans if g.name == name)
        builder = plan.builder(group_plan)
        for program in group_plan.programs:
            state = self.programs[program.name]
            hold = functools.partial(self._hold, program.name)
            builder.child(plan.child(program, state.log.attach, hold))
        supervisor = builder.build(self.sv_clock)
        group = GroupRun(group_plan, supervisor, supervisor.subscribe())
        before = self.groups.get(name)
        if before is not None:
            await self._retire(before)
            group.restarts_before = before.restarts_before + before.supervisor.statistics().restarts
        self.groups[name] = group
        group.follower = asyncio.create_task(self._follower.follow(group), name=f"program {name}")
        await supervisor.start()
        self._changed()

    async def _stop_group(self, group: GroupRun, why: str) -> None:
        group.stopping = why
        await group.supervisor.stop()
        await group.settled()
        if group.state == "running":
            group.state = "stopped"
        group.stopping = None
        self._changed()

    async def _retire(self, group: GroupRun) -> None:
        """A finished supervisor's last events handled, its follower ended."""
        await group.settled()
        if group.follower is not None:
            group.follower.cancel()
        group.events.close()

    def _hold(self, name: str) -> str | None:
        if not self.programs[name].wanted:
            return NOT_WANTED
        return self.gates.reason_for(name)

    def _gate_changed(self, gate: Gate) -> None:
        if gate.closed:
            log.warning(
                "Host check %s fails (%s): the start of %s waits until it clears",
                gate.name,
                gate.detail,
                ", ".join(sorted(gate.pauses)),
                extra={"action": "host_check"},
            )
        else:
            log.info(
                "Host check %s cleared (%s): %s may start",
                gate.name,
                gate.detail,
                ", ".join(sorted(gate.pauses)),
                extra={"action": "host_check"},
            )
        self._changed()

    def _release(self) -> None:
        for group in self.groups.values():
            if not group.supervisor.finished:
                group.supervisor.release_held()

    def _health(self, name: str, running: bool) -> None:
        state = self.programs[name]
        if state.health_task is not None:
            state.health_task.cancel()
            state.health_task = None
        config = state.plan.config.health
        if not running:
            state.health.clear()
        if not running or config is None:
            return
        group = self.groups[state.plan.group]
        tree = state.plan.config.contain == "tree"
        root = functools.partial(self._pid, name)
        checks = health.checks_of(config, root, include_root=not tree)

        def seen(check: str, status: object, detail: str) -> None:
            state.health[check] = (str(status), detail)

        async def fail(detail: str) -> None:
            with contextlib.suppress(SuperviseError):
                await group.supervisor.fail_child(name, f"health: {detail}")

        watching = health.watch(
            config, checks, self.sv_clock, state.plan.config.start_s, seen, fail
        )
        state.health_task = asyncio.create_task(watching, name=f"program {name} health")

    def _changed(self) -> None:
        for callback in tuple(self.on_change):
            try:
                callback()
            except Exception:  # a listener's bug must not stop the programs
                log.exception("A program listener failed", extra={"action": "program_event"})

    # -- reading ------------------------------------------------------------------------

    def wall(self, at: float) -> datetime:
        """The wall time of ``at`` on the supervision clock."""
        return self.clock() - timedelta(seconds=self.sv_clock.now() - at)

    def _pid(self, name: str) -> int | None:
        """The pid the supervisor started for ``name`` (its keeper, or the command itself)."""
        state = self.programs[name]
        group = self.groups.get(state.plan.group)
        if group is None:
            return None
        info = next((c for c in group.supervisor.children() if c.name == name), None)
        return None if info is None else info.pid

    def find(self, name: str) -> tuple[GroupRun | None, ProgramState | None]:
        """The group or the program called ``name``; :class:`NotFound` naming what there is."""
        if name in self.programs:
            return self.groups.get(self.programs[name].plan.group), self.programs[name]
        declared = {g.name for g in self.plans if g.declared}
        if name in declared:
            return self.groups.get(name), None
        if name in self.elsewhere:
            raise Conflict(
                f"program {name} runs on host {self.elsewhere[name]}, not {self.host}: "
                "act on it through the server there"
            )
        known = ", ".join(sorted([*self.programs, *declared])) or "none"
        raise NotFound(f"no program or group {name!r} on {self.host}; there are: {known}")

    # -- acting ---------------------------------------------------------------------------

    async def start_program(self, name: str) -> str:
        """Start ``name`` (a program, or every program of a group) if it is not running."""
        group, state = self.find(name)
        if state is None:
            return await self._start_whole(group, name)
        self._refuse_paused(name)
        if group is None or group.supervisor.finished:
            return await self._start_again(name)
        info = next(c for c in group.supervisor.children() if c.name == name)
        if info.state in ("running", "starting", "restart_pending"):
            return (
                f"{name} is already running"
                if info.state != "restart_pending"
                else (f"{name} is restarting")
            )
        state.wanted = True
        if info.state == "held":
            group.supervisor.release_held()
            return f"{name} is starting"
        return await self._restart_child(group, name, "started")

    async def stop_program(self, name: str) -> str:
        """Stop ``name`` (a program, or a whole group) and keep it stopped."""
        group, state = self.find(name)
        if state is None:
            for member in self._members(name):
                self.programs[member].wanted = False
            if group is not None and not group.supervisor.finished:
                await self._stop_group(group, "stopped by request")
            return f"group {name} stopped"
        state.wanted = False
        if group is None or group.supervisor.finished:
            return f"{name} is not running"
        group.stopping = "stopped by request"
        try:
            await group.supervisor.stop_child(name)
            await group.settled()
        finally:
            group.stopping = None
        self._changed()
        return f"{name} stopped; start it with `watchkeeper programs start {name}`"

    async def restart_program(self, name: str) -> str:
        """Stop ``name`` if it runs and start it again (a group: the whole group)."""
        group, state = self.find(name)
        if state is None:
            if group is not None and not group.supervisor.finished:
                await self._stop_group(group, "restarted by request")
            return await self._start_whole(group, name, "restarted")
        self._refuse_paused(name)
        state.wanted = True
        if group is None or group.supervisor.finished:
            return await self._start_again(name)
        return await self._restart_child(group, name, "restarted")

    def set_strategy(self, name: str, strategy: Strategy) -> str:
        """Give group ``name`` another strategy in the running configuration, its running
        supervisor included; watchkeeper.toml is left as it is, and the answer says so."""
        index = next((i for i, g in enumerate(self.plans) if g.name == name), None)
        if index is None or not self.plans[index].declared:
            declared = ", ".join(g.name for g in self.plans if g.declared) or "none"
            raise NotFound(f"no program group {name!r} on {self.host}; the groups are: {declared}")
        self.plans[index] = dataclasses.replace(self.plans[index], strategy=strategy)
        group = self.groups.get(name)
        if group is not None and not group.supervisor.finished:
            strategies.switch(group.supervisor, strategy)
        self._changed()
        log.info(
            "Program group %s switched to %s in the running configuration",
            name,
            strategy.value,
            extra={"action": "program_strategy"},
        )
        return (
            f"group {name} is {strategy.value.replace('_', '-')} now: saved to the running "
            "configuration; watchkeeper.toml still says what it said, so a restart of the "
            "server goes back to it"
        )

    def notify_of(self, name: str) -> tuple[str, routes.SetBy]:
        """Where program ``name``'s notices go in the running configuration, and who chose it."""
        program = self.programs[name].plan
        # Read from worker threads too, so a group being rebuilt reads as none, never fails.
        group = next((g for g in tuple(self.plans) if g.name == program.group), None)
        return routes.notify_of(program, group)

    def _origin_of(self, name: str) -> dict[str, str] | None:
        return routes.origin_of_place(self.notify_of(name)[0]) if name in self.programs else None

    async def route_to(self, name: str, group: str | None) -> str:
        """Send program ``name``'s notices where group ``group``'s go (``None``: the ops
        channels), in the running configuration and on its run; watchkeeper.toml is left as
        it is, and the answer says so."""
        _, state = self.find(name)
        if state is None:
            raise Conflict(f"{name} is a group: only a program's notices are routed")
        notify, why = routes.chosen(self.plans, state.plan, group, self.host)
        moved = dataclasses.replace(
            state.plan, config=state.plan.config.model_copy(update={"notify": notify})
        )
        state.plan = moved
        at = next(i for i, g in enumerate(self.plans) if g.name == moved.group)
        members = tuple(moved if p.name == name else p for p in self.plans[at].programs)
        self.plans[at] = dataclasses.replace(self.plans[at], programs=members)
        await asyncio.to_thread(self.records.routed, name)
        self._changed()
        place, _ = self.notify_of(name)
        log.info(
            "Program %s's notices go to %s in the running configuration",
            name,
            place,
            extra={"action": "program_notify"},
        )
        return routes.answer(name, place, why, self.ops_channels)

    async def build_group(self, name: str, members: list[str]) -> str:
        """Make group ``name`` (one-for-one) of programs that run alone, in the running
        configuration: each stops under its own supervisor and starts under the group's."""
        if any(g.name == name for g in self.plans) or name in self.programs:
            raise Conflict(f"{name} is taken: name the new group something else")
        if len(set(members)) < 2:
            raise Conflict("a group takes two programs or more")
        for member in members:
            _, state = self.find(member)
            if state is None:
                raise Conflict(f"{member} is a group: only programs join a new group")
            if state.plan.grouped:
                raise Conflict(f"{member} is in group {state.plan.group} already")
        for member in members:
            group = self.groups.pop(member, None)
            if group is not None:
                if not group.supervisor.finished:
                    await self._stop_group(group, f"moved into group {name}")
                await self._retire(group)
        order = [p.name for g in self.plans for p in g.programs if p.name in members]
        joined = tuple(plan.ProgramPlan(m, self.programs[m].plan.config, name, True) for m in order)
        at = next(i for i, g in enumerate(self.plans) if g.name in members)
        built = plan.GroupPlan(
            name, Strategy.ONE_FOR_ONE, IntensityConfig(), BackoffConfig(), joined, True
        )
        kept = [g for g in self.plans if g.name not in members]
        kept.insert(min(at, len(kept)), built)
        self.plans[:] = kept
        for program in joined:
            self.programs[program.name].plan = program
        await self._start_group(name)
        log.info(
            "Program group %s built of %s in the running configuration",
            name,
            ", ".join(order),
            extra={"action": "program_group"},
        )
        return (
            f"group {name} built of {', '.join(order)} (one-for-one): saved to the running "
            "configuration; watchkeeper.toml is unchanged"
        )

    async def set_floor(self, name: str, mb: float) -> str:
        """Move host check ``name``'s floor to ``mb`` in the running configuration and look
        at once: the starts it pauses wait, or go ahead, by the new floor from now."""
        gate = self.gates.set_floor(name, mb)
        if await self.gates.look(self._gate_changed):
            self._release()
        self._changed()
        floor = "free space" if gate.config.kind == "disk" else "available memory"
        return (
            f"host check {name} fails below {mb:g} MB of {floor} now (the running "
            f"configuration; watchkeeper.toml is unchanged): {gate.status.value}, {gate.detail}"
        )

    def act_from_thread(self, run_id: str, action: str) -> str:
        """``restart`` or ``stop`` the program of run ``run_id``, from a worker thread."""
        name, host = name_and_host(run_id)
        if host != self.host:
            raise Conflict(
                f"program {name} runs on host {host}: act on it through the server there"
            )
        if self.loop is None or not self.running:
            raise Conflict(
                f"this server does not run its programs now, so {name} cannot be acted on"
            )
        act = self.restart_program if action == "restart" else self.stop_program
        future = asyncio.run_coroutine_threadsafe(act(name), self.loop)
        return future.result(timeout=PRESS_WITHIN_S)

    def _refuse_paused(self, name: str) -> None:
        reason = self.gates.reason_for(name)
        if reason is not None:
            raise Conflict(f"{name} cannot start now: {reason}; it starts once that clears")

    def _members(self, group: str) -> list[str]:
        return [p.name for p in next(g for g in self.plans if g.name == group).programs]

    async def _start_whole(self, group: GroupRun | None, name: str, done: str = "started") -> str:
        for member in self._members(name):
            self.programs[member].wanted = True
        if group is not None and not group.supervisor.finished:
            group.supervisor.release_held()
            for info in group.supervisor.children():
                if info.state == "done":
                    await self._restart_child(group, info.name, "started")
            return f"group {name} {done}"
        await self._start_group(name)
        return f"group {name} {done}"

    async def _start_again(self, name: str) -> str:
        """Start the group of ``name`` anew (it gave up or was stopped), with what ``name``
        needs: under rest-for-one the programs before it, under one-for-all all of them."""
        group_plan = next(g for g in self.plans if g.member(name) is not None)
        names = [p.name for p in group_plan.programs]
        needed = {
            Strategy.ONE_FOR_ONE: [name],
            Strategy.REST_FOR_ONE: names[: names.index(name) + 1],
            Strategy.ONE_FOR_ALL: names,
        }[group_plan.strategy]
        for member in needed:
            self.programs[member].wanted = True
        await self._start_group(group_plan.name)
        if group_plan.declared:
            return f"group {group_plan.name} started again with {', '.join(needed)}"
        return f"{name} started again"

    async def _restart_child(self, group: GroupRun, name: str, done: str) -> str:
        restarting = asyncio.ensure_future(group.supervisor.restart_child(name))
        restarting.add_done_callback(lambda f: f.cancelled() or f.exception())
        finished, _ = await asyncio.wait({restarting}, timeout=ANSWER_WITHIN_S)
        if not finished:
            return f"{name} is starting; it counts as started once it has run start_s"
        try:
            restarting.result()
        except StartError as exc:
            raise Conflict(f"{name} failed to start: {exc.reason}") from None
        except SuperviseError as exc:
            raise Conflict(str(exc)) from None
        return f"{name} {done}"
