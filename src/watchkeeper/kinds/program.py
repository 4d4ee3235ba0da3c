"""The ``program`` kind: programs ``serve`` keeps running (``[programs.NAME]``).

Each program's life on a host is one run, ``NAME@HOST``, that the host's server
writes (:mod:`watchkeeper.programs.records`). A running program is never stalled:
its supervisor restarts it when it exits or fails its health checks, so it moves
on or fails. It *fails* when its group gives up on it (a crash loop), which opens
the incident with **Restart** and **Stop**; both are carried out by the server
that runs it. Its owner is that server: alive while this server runs its programs
(for its own host) or while a replica on its host beats (another host), so a
program whose server died is stuck.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from watchkeeper.contract import (
    Action,
    Effects,
    Failure,
    Owner,
    OwnerKind,
    RunStatus,
    RunView,
)
from watchkeeper.errors import WatchkeeperError
from watchkeeper.kinds.actions import ActionFailed, ActionRequest
from watchkeeper.kinds.base import FINISHED_WINDOW, Adapter
from watchkeeper.programs.records import name_and_host
from watchkeeper.store.runs import state_token

_STATUS = {status.value: status for status in RunStatus}
_ACTIONS = frozenset({Action.RESTART, Action.STOP})
#: A replica whose last heartbeat is older than this many check intervals is gone.
_REPLICA_GONE_INTERVALS = 1.5


class ProgramControl(Protocol):
    """What the adapter needs of the server that runs this host's programs."""

    host: str
    running: bool

    def act_from_thread(self, run_id: str, action: str) -> str: ...


class ProgramAdapter(Adapter):
    """Reads program runs from watchkeeper's own store; acts through this host's programs."""

    adapter_name = "program"
    #: This server's programs, once the runtime hands them over (made on first use).
    control_of: Callable[[], ProgramControl] | None = None

    @property
    def control(self) -> ProgramControl | None:
        """This server's programs, if it has them."""
        return None if self.control_of is None else self.control_of()

    def read(self, now: datetime) -> Sequence[RunView]:
        """Every program run that is active or ended within the last day."""
        store = self.own_store()
        rows = store.runs.rows_for_judging(self.name, now - FINISHED_WINDOW)
        hosts = self._live_hosts(now)
        return [self._view(row, now, hosts) for row in rows]

    def capabilities(self) -> frozenset[Action]:
        """Restart and Stop, carried out by the server that runs the program."""
        return _ACTIONS

    def perform(self, request: ActionRequest) -> str:
        """Restart or stop the program of ``request.run_id`` on this host."""
        if request.action not in _ACTIONS:
            raise ActionFailed(f"a program can be restarted or stopped, not {request.action}")
        control = self.control
        if control is None:
            raise ActionFailed("this server does not run programs", "no server runs it here")
        try:
            return control.act_from_thread(request.run_id, request.action.value)
        except WatchkeeperError as exc:
            raise ActionFailed(str(exc)) from exc
        except TimeoutError as exc:
            raise ActionFailed("the program did not answer in time") from exc

    def evidence(self, run_id: str) -> dict[str, str]:
        """What its run says: the step it was at, the host that runs it."""
        run = self.stored_run(run_id)
        if run is None:
            return {}
        name, host = name_and_host(run_id)
        facts = {"program": name, "host": host, "attempt": str(run.attempt)}
        if run.step:
            facts["step"] = run.step
        return facts

    def _live_hosts(self, now: datetime) -> tuple[set[str], set[str]]:
        """Hosts with a live replica, and hosts with any replica on record."""
        store = self.own_store()
        within = timedelta(seconds=self.context.settings.check_interval_s * _REPLICA_GONE_INTERVALS)
        members = store.cluster.members()
        live = {m.host for m in members if now - m.beat_at <= within}
        return live, {m.host for m in members}

    def _alive(self, host: str, hosts: tuple[set[str], set[str]]) -> bool | None:
        control = self.control
        if control is not None and control.host == host and control.running:
            return True
        live, known = hosts
        if host in live:
            return True
        return False if host in known else None

    def _view(self, row: Any, now: datetime, hosts: tuple[set[str], set[str]]) -> RunView:
        (
            run_id,
            title,
            status,
            attempt,
            version,
            _origin,
            _effects,
            _budget,
            _expected,
            _lease,
            started_at,
            progress_at,
            _seen,
            finished_at,
            step,
            failure_reason,
            failure_fingerprint,
        ) = row
        run_status = _STATUS[status]
        _, host = name_and_host(run_id)
        alive = self._alive(host, hosts) if not run_status.ended else False
        fromts = datetime.fromtimestamp
        return RunView(
            kind=self.name,
            run_id=run_id,
            title=title,
            status=run_status,
            state_token=state_token(attempt, version),
            owner=Owner(OwnerKind.PID, f"the server on {host}", alive, None),
            # Running is progress: a program that stops making it is restarted or fails.
            progress_at=now if run_status is RunStatus.RUNNING else fromts(progress_at, UTC),
            started_at=fromts(started_at, UTC),
            finished_at=None if finished_at is None else fromts(finished_at, UTC),
            effects=Effects.UNKNOWN,
            failure=None
            if failure_reason is None
            else Failure(failure_reason, failure_fingerprint or ""),
            step=step,
        )
