"""Process runs: register, start, progress, end, and every read of them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from watchkeeper.clock import to_epoch
from watchkeeper.errors import Conflict, NotFound
from watchkeeper.records.procs import HookState, NewProc, ParkState, ProcRun, ProcStatus, Started
from watchkeeper.store.base import Accessor
from watchkeeper.store.procs.rows import ACTIVE_STATUSES as _ACTIVE
from watchkeeper.store.procs.rows import R as _R
from watchkeeper.store.procs.rows import kept_by, run_from_row
from watchkeeper.store.schema.procs import proc_parks, proc_runs
from watchkeeper.store.unreadable import each_readable, read_or_refuse


class Runs(Accessor):
    """Moves a run through its life, one conditional statement each."""

    def register(
        self,
        new: NewProc,
        now: datetime,
        *,
        engine_key: str | None = None,
        witness_key: str | None = None,
    ) -> ProcRun:
        """Commit a run in ``starting`` before its command exists.

        ``engine_key`` names the engine that settles it; without one, the run is
        keyed on its bare host and any engine of that host settles it.
        ``witness_key`` is what its shim signs the witness with; without one,
        any well-formed witness settles the run.
        """
        at = to_epoch(now)
        # A run from GitHub posts its result there as one of its hooks: fired once.
        from_github = (new.origin or {}).get("platform") == "github"
        hooks = (
            HookState.WAITING
            if (new.on_done_cmd or new.on_done_url or from_github)
            else HookState.NONE
        )
        values = {
            "run_id": new.run_id,
            "name": new.name,
            "argv": list(new.argv),
            "cwd": new.cwd,
            "host": new.host,
            "engine_key": engine_key or new.host,
            "witness_key": witness_key,
            "username": new.user,
            "boot_id": new.boot_id,
            "status": ProcStatus.STARTING.value,
            "detach": new.detach,
            "budget_s": new.budget_s,
            "timeout_s": new.timeout_s,
            "origin": new.origin,
            "session": new.session,
            "on_done_cmd": new.on_done_cmd,
            "on_done_url": new.on_done_url,
            "created_at": at,
            "updated_at": at,
            "log_size": 0,
            "version": 1,
            "hook_state": hooks.value,
        }
        with self._write("registering a process run") as conn:
            conn.execute(insert(proc_runs).values(**values))
            row = conn.execute(select(proc_runs).where(_R.run_id == new.run_id)).one()
        return run_from_row(row)

    def mark_started(self, run_id: str, started: Started, now: datetime) -> None:
        """Record the owner the shim reported; ``starting`` becomes ``running``."""
        at = to_epoch(now)
        owner = {
            "shim_pid": started.shim_pid,
            "shim_start": started.shim_start,
            "pid": started.pid,
            "pid_start": started.pid_start,
            "pgid": started.pgid,
            "updated_at": at,
        }
        with self._write("recording a started process") as conn:
            conn.execute(update(proc_runs).where(_R.run_id == run_id).values(**owner))
            conn.execute(
                update(proc_runs)
                .where(_R.run_id == run_id, _R.status == ProcStatus.STARTING.value)
                .values(
                    status=ProcStatus.RUNNING.value,
                    started_at=at,
                    progress_at=at,
                    version=_R.version + 1,
                )
            )

    def finish(
        self,
        run_id: str,
        status: ProcStatus,
        now: datetime,
        *,
        exit_code: int | None = None,
        signal: int | None = None,
        reason: str | None = None,
        finished_at: datetime | None = None,
    ) -> bool:
        """End an active run; ``False`` if it had already ended (someone else won)."""
        at = to_epoch(now)
        values: dict[str, Any] = {
            "status": status.value,
            "exit_code": exit_code,
            "signal": signal,
            "reason": reason,
            "finished_at": to_epoch(finished_at or now),
            "updated_at": at,
            "version": _R.version + 1,
        }
        with self._write("ending a process run") as conn:
            changed = _move_active(conn, run_id, values)
            # Hooks become due in the same transaction that ends the run: none is ever lost.
            conn.execute(
                update(proc_runs)
                .where(_R.run_id == run_id, _R.hook_state == HookState.WAITING.value)
                .values(hook_state=HookState.PENDING.value)
            )
        return changed

    def witness_key(self, run_id: str) -> str | None:
        """The key the run's witness must be signed with; ``None`` for a run without one.

        Kept out of :class:`ProcRun`, which the API and ``status`` show.
        """
        with self._read("reading a witness key") as conn:
            return conn.execute(select(_R.witness_key).where(_R.run_id == run_id)).scalar()

    def note_forged(self, run_id: str, note: str, now: datetime) -> bool:
        """Say on an active run without a reason that its witness was forged; ``True`` if new."""
        at = to_epoch(now)
        with self._write("recording a forged witness") as conn:
            statement = update(proc_runs).where(
                _R.run_id == run_id, _R.status.in_(_ACTIVE), _R.reason.is_(None)
            )
            values = {"reason": note, "updated_at": at, "version": _R.version + 1}
            return conn.execute(statement.values(**values)).rowcount == 1

    def set_started_at(self, run_id: str, started_at: datetime) -> None:
        """Fill ``started_at`` of a run that ended before its start was recorded."""
        with self._write("recording a start time") as conn:
            conn.execute(
                update(proc_runs)
                .where(_R.run_id == run_id, _R.started_at.is_(None))
                .values(started_at=to_epoch(started_at))
            )

    def progress(self, run_id: str, now: datetime, step: str | None = None) -> ProcRun:
        """Something moved in an active run."""
        at = to_epoch(now)
        values: dict[str, Any] = {"progress_at": at, "updated_at": at, "version": _R.version + 1}
        if step is not None:
            values["step"] = step
        with self._write("recording progress") as conn:
            done = _move_active(conn, run_id, values)
            row = conn.execute(select(proc_runs).where(_R.run_id == run_id)).first()
        if row is None:
            raise NotFound(f"no process run {run_id!r}: see `watchkeeper ps --all`")
        if not done:
            raise Conflict(f"process run {run_id!r} has already ended ({row.status})")
        return run_from_row(row)

    def observe_log(
        self, run_id: str, size: int, mtime: float, now: datetime, *, progressed: bool
    ) -> bool:
        """Record the log's size and time; ``progressed`` also moves the run. ``True`` if stored."""
        at = to_epoch(now)
        values: dict[str, Any] = {"log_size": size, "log_mtime": mtime}
        if progressed:
            values.update(progress_at=at, updated_at=at, version=_R.version + 1)
        with self._write("recording log growth") as conn:
            return _move_active(conn, run_id, values)

    def heard_from(self, run_id: str, now: datetime) -> bool:
        """A reported run's engine said it is still there: ``updated_at`` is its last word.

        ``True`` if the run is still active.
        """
        with self._write("recording a report") as conn:
            return _move_active(conn, run_id, {"updated_at": to_epoch(now)})

    def request_abort(self, run_id: str, now: datetime, reason: str, *, cancel: bool) -> None:
        """Note why the run is being ended before signalling it.

        ``cancel`` marks a person's request (a death by signal then reads as
        cancelled); a timeout leaves it unset, so the run fails and is paged.
        """
        at = to_epoch(now)
        values: dict[str, Any] = {"reason": reason, "updated_at": at}
        if cancel:
            values["abort_requested_at"] = at
        with self._write("recording an abort") as conn:
            _move_active(conn, run_id, values)

    def get(self, run_id: str) -> ProcRun:
        """One run, or :class:`NotFound`."""
        with self._read("reading a process run") as conn:
            row = conn.execute(select(proc_runs).where(_R.run_id == run_id)).first()
        if row is None:
            raise NotFound(f"no process run {run_id!r}: see `watchkeeper ps --all`")
        return read_or_refuse("proc_runs", row, run_from_row, key="run_id")

    def runs(
        self, *, active_only: bool = True, finished_since: datetime | None = None, limit: int = 500
    ) -> list[ProcRun]:
        """Runs, newest first: active ones, plus (unless ``active_only``) ended ones."""
        statement = select(proc_runs).order_by(_R.created_at.desc()).limit(limit)
        if active_only:
            statement = statement.where(_R.status.in_(_ACTIVE))
        elif finished_since is not None:
            since = to_epoch(finished_since)
            statement = statement.where(_R.status.in_(_ACTIVE) | (_R.finished_at >= since))
        with self._read("listing process runs") as conn:
            rows = conn.execute(statement)
            return list(each_readable("proc_runs", rows, run_from_row, key="run_id"))

    def active_on(self, engine_key: str) -> list[ProcRun]:
        """Active runs the engine of ``engine_key`` settles: the ones it can check."""
        statement = select(proc_runs).where(_R.status.in_(_ACTIVE), kept_by(engine_key))
        with self._read("reading active process runs") as conn:
            return [run_from_row(row) for row in conn.execute(statement)]

    def has_work(self, engine_key: str) -> bool:
        """Whether a sweep has anything to do here: cheap, so an idle sweep stays idle."""
        busy = [*_ACTIVE, HookState.PENDING.value, HookState.FIRING.value]
        runs = (
            select(_R.run_id)
            .where(kept_by(engine_key), _R.status.in_(busy) | _R.hook_state.in_(busy))
            .limit(1)
        )
        parks = select(proc_parks.c.id).where(proc_parks.c.state == ParkState.WAITING.value)
        with self._read("checking for process work") as conn:
            if conn.execute(runs).first() is not None:
                return True
            return conn.execute(parks.limit(1)).first() is not None


def _move_active(conn: Connection, run_id: str, values: dict[str, Any]) -> bool:
    """Apply ``values`` to ``run_id`` if it is still active; whether it was."""
    statement = update(proc_runs).where(_R.run_id == run_id, _R.status.in_(_ACTIVE))
    return conn.execute(statement.values(**values)).rowcount == 1
