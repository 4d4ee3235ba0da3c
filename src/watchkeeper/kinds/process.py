"""The ``process`` kind: processes watchkeeper started itself (``watchkeeper run``).

The owner is the shim that holds the command: alive when its pid still has the
recorded start time on this host and boot; another host's run is "cannot
tell" and never stuck on our word alone. Progress is a step reported on the
run or its log growing (read straight from the log file, so growth between
sweeps counts). A run whose witness is there but not yet read is judged by the
witness, never by what the command said about itself.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

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
from watchkeeper.kinds.base import FINISHED_WINDOW, Adapter
from watchkeeper.procs import identity, layout, settle, witness
from watchkeeper.records.procs import ProcRun, ProcStatus

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

    def read(self, now: datetime) -> Sequence[RunView]:
        """Active runs and those that ended within the last day."""
        from watchkeeper.store.procs import ProcStore

        procs = ProcStore(self.own_store().engine)
        runs = procs.runs(active_only=False, finished_since=now - FINISHED_WINDOW, limit=100_000)
        data_dir = self.context.settings.data_dir
        # Only an active run's witness is read, so only its key is needed.
        keys = {run.run_id: procs.witness_key(run.run_id) for run in runs if not run.status.ended}
        return [view(self.name, run, data_dir, now, keys.get(run.run_id)) for run in runs]


def view(
    kind: str, run: ProcRun, data_dir: os.PathLike[str], now: datetime, key: str | None = None
) -> RunView:
    """One process run in the read model; ``key`` is the run's witness key, if it has one."""
    status, failure, finished = _status(run, data_dir, key)
    progress_at, log_moved = _progress(run, data_dir)
    owner = Owner(OwnerKind.PID, f"{run.host}:{run.shim_pid}", _alive(run, status), None)
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
    try:
        found = witness.read(layout.run_dir(_path(data_dir), run.run_id), run.run_id, key)
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
