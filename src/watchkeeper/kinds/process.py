"""The ``process`` kind: processes watchkeeper started itself (``watchkeeper run``).

The owner is the shim that holds the command: alive when its pid still has the
recorded start time on this host and boot; another host's run is "cannot
tell" and never stuck on our word alone. Progress is a step reported on the
run or its log growing (read straight from the log file, so growth between
sweeps counts); output that only repeats the same lines is no progress: the run
is looping (:func:`~watchkeeper.kinds.repeats.repeated_lines`). A run whose
witness is there but not yet read is judged by the witness, never by what the
command said about itself.

A run another engine reports here (``watchkeeper run`` on a host that talks to
this server, :mod:`watchkeeper.procs.mirror`) is judged by what that engine says:
its output is shipped into the log here, its end is reported, and its owner is
that engine, alive while it reports (a lease), wherever it runs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from watchkeeper.contract import (
    Effects,
    Failure,
    Owner,
    OwnerKind,
    RunStatus,
    RunView,
    fingerprint,
    origin_of,
)
from watchkeeper.kinds.base import FINISHED_WINDOW, Adapter, AdapterContext
from watchkeeper.kinds.repeats import TAIL_BYTES, Repetition, repeated_lines
from watchkeeper.procs import identity, layout, mirror, settle, witness
from watchkeeper.records.procs import ProcRun, ProcStatus

if TYPE_CHECKING:
    from watchkeeper.config import KindConfig

_STATUS = {
    ProcStatus.STARTING: RunStatus.RUNNING,
    ProcStatus.RUNNING: RunStatus.RUNNING,
    ProcStatus.SUCCEEDED: RunStatus.SUCCEEDED,
    ProcStatus.FAILED: RunStatus.FAILED,
    ProcStatus.CANCELLED: RunStatus.CANCELLED,
}


class ProcessAdapter(Adapter):
    """Reads process runs from watchkeeper's own store; never writes it."""

    adapter_name = "process"

    def __init__(self, name: str, config: KindConfig, context: AdapterContext) -> None:
        super().__init__(name, config, context)
        #: Per running run whose output repeats: its step and what repeats, and when this
        #: server first saw it repeat (the log says what was written, not when).
        self._repeating: dict[str, tuple[str, datetime]] = {}

    def read(self, now: datetime) -> Sequence[RunView]:
        """Active runs and those that ended within the last day."""
        from watchkeeper.store.procs import ProcStore

        procs = ProcStore(self.own_store().engine)
        runs = procs.runs(active_only=False, finished_since=now - FINISHED_WINDOW, limit=100_000)
        data_dir = self.context.settings.data_dir
        # Only an active run's witness is read, so only its key is needed.
        keys = {run.run_id: procs.witness_key(run.run_id) for run in runs if not run.status.ended}
        views = [view(self.name, run, data_dir, now, keys.get(run.run_id)) for run in runs]
        running = {seen.run_id for seen in views if seen.status is RunStatus.RUNNING}
        for run_id in set(self._repeating) - running:
            del self._repeating[run_id]
        return [self._looked_at(seen, data_dir, now) for seen in views]

    def _looked_at(self, seen: RunView, data_dir: os.PathLike[str], now: datetime) -> RunView:
        """A running run as its output shows it: repeating the same lines, or not.

        While the same lines repeat, the run's progress is when this server first saw
        them repeat, its last report the log's last write, and its state token stays as
        it was then (each repeat is no move: a card's buttons stay good).
        """
        if seen.status is not RunStatus.RUNNING:
            return seen
        repetition = _repetition(layout.log_path(_path(data_dir), seen.run_id))
        if repetition is None:
            self._repeating.pop(seen.run_id, None)
            return seen
        # A step it reports between the repeated lines is a move: compared with both.
        said = f"{seen.step}\n{repetition.what}"
        what, first_at = self._repeating.get(seen.run_id, (None, None))
        if what != said or first_at is None:
            first_at = seen.progress_at or now
            self._repeating[seen.run_id] = (said, first_at)
        digest = hashlib.sha256(said.encode()).hexdigest()[:12]
        return replace(
            seen,
            progress_at=first_at,
            reported_at=seen.progress_at,
            repeats=repetition.count,
            repeating=repetition.what,
            state_token=f"repeating.{digest}",
        )


def view(
    kind: str, run: ProcRun, data_dir: os.PathLike[str], now: datetime, key: str | None = None
) -> RunView:
    """One process run in the read model; ``key`` is the run's witness key, if it has one."""
    status, failure, finished = _status(run, data_dir, key)
    progress_at, log_moved = _progress(run, data_dir)
    owner = _owner(run, status, now)
    return RunView(
        kind=kind,
        run_id=run.run_id,
        title=run.name,
        status=status,
        state_token=f"{run.state_token}.{log_moved}",
        owner=owner,
        progress_at=progress_at,
        started_at=run.started_at or run.created_at,
        finished_at=finished,
        budget_s=run.budget_s,
        origin=origin_of(run.origin),
        effects=Effects.UNKNOWN,
        failure=failure,
        step=run.step,
    )


def _status(
    run: ProcRun, data_dir: os.PathLike[str], key: str | None
) -> tuple[RunStatus, Failure | None, datetime | None]:
    if run.status.ended:
        failure = None
        if run.status is ProcStatus.FAILED:
            reason = run.reason or "failed"
            failure = Failure(reason, fingerprint(_stable(run.signal, run.exit_code, reason)))
        return _STATUS[run.status], failure, run.finished_at
    if run.reported:
        return RunStatus.RUNNING, None, None  # its witness is on its own host: it reports the end
    try:
        found = settle.believed_witness(layout.run_dir(_path(data_dir), run.run_id), run, key)
    except witness.WitnessForged:
        return RunStatus.RUNNING, None, None  # the command's own word: judge the owner
    except witness.WitnessCorrupt:
        return RunStatus.RUNNING, None, None  # the reaper records why; judge the owner meanwhile
    if found is None:
        return RunStatus.RUNNING, None, None
    ended = datetime.fromtimestamp(found.ended_at, UTC)
    if found.succeeded:
        return RunStatus.SUCCEEDED, None, ended
    status = settle.status_of(found, run.abort_requested_at is not None)
    reason = settle.describe(found)
    failure = None
    if status is ProcStatus.FAILED:
        # As the reaper will record it: the incident must not change once it has.
        failure = Failure(reason, fingerprint(_stable(found.signal, found.exit_code, reason)))
    return _STATUS[status], failure, ended


def _stable(signal: int | None, exit_code: int | None, reason: str) -> str:
    """The same way of ending is the same failure: exit status or signal, not the words."""
    if signal is not None:
        return f"signal {signal}"
    if exit_code is not None:
        return f"exit {exit_code}"
    return reason


def _owner(run: ProcRun, status: RunStatus, now: datetime) -> Owner:
    """The shim that holds the command, or for a reported run the engine that reports it."""
    ident = f"{run.host}:{run.shim_pid}"
    if run.reported and not status.ended:
        alive, until = mirror.reporter_alive(run, now)
        return Owner(OwnerKind.LEASE, ident, alive, until)
    return Owner(OwnerKind.PID, ident, _alive(run, status), None)


def _alive(run: ProcRun, status: RunStatus) -> bool | None:
    if status.ended:
        return False
    if run.shim_pid is None:
        return None  # still starting: the reaper decides after its grace period
    return identity.alive(identity.ownership(run.host, run.boot_id, run.shim_pid, run.shim_start))


def _progress(run: ProcRun, data_dir: os.PathLike[str]) -> tuple[datetime | None, int]:
    """Reported progress, or the log's last write if later (and how often it moved)."""
    progress_at = run.progress_at or run.started_at
    try:
        stat = layout.log_path(_path(data_dir), run.run_id).stat()
    except FileNotFoundError:
        return progress_at, 0
    grew = run.log_mtime is not None and stat.st_mtime != run.log_mtime
    if grew and stat.st_size > 0:
        written = datetime.fromtimestamp(stat.st_mtime, UTC)
        if progress_at is None or written > progress_at:
            progress_at = written
    return progress_at, stat.st_size


def _path(data_dir: os.PathLike[str]) -> Path:
    return Path(data_dir)


def _repetition(log: Path) -> Repetition | None:
    """The lines repeating at the end of ``log``, read from its last bytes only."""
    try:
        with log.open("rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - TAIL_BYTES))
            tail = file.read(TAIL_BYTES)
    except OSError:
        return None
    return repeated_lines(tail, whole=size <= TAIL_BYTES)
