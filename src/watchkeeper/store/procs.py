"""Process runs, parks and session wake breakers. Moves only; the rules live in ``procs/``.

Every move is one conditional statement in one transaction, so two engines
(or an engine and an ``abort`` from the command line) never both win.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, Row, insert, select, update

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.errors import Conflict, NotFound
from watchkeeper.records.procs import (
    ACTIVE,
    HookState,
    NewProc,
    Park,
    ParkState,
    ProcRun,
    ProcStatus,
    SessionBreaker,
    Started,
)
from watchkeeper.store.engine import is_sqlite, translate_errors
from watchkeeper.store.schema_procs import proc_parks, proc_runs, proc_sessions

if TYPE_CHECKING:
    from watchkeeper.store import Store

_ACTIVE = [status.value for status in ACTIVE]
_R = proc_runs.c


def run_from_row(row: Row[Any]) -> ProcRun:
    """A full ``proc_runs`` row as a record."""
    m = row._mapping
    return ProcRun(
        run_id=m["run_id"],
        name=m["name"],
        argv=tuple(m["argv"]),
        cwd=m["cwd"],
        host=m["host"],
        user=m["username"],
        boot_id=m["boot_id"],
        status=ProcStatus(m["status"]),
        detach=bool(m["detach"]),
        shim_pid=m["shim_pid"],
        shim_start=m["shim_start"],
        pid=m["pid"],
        pid_start=m["pid_start"],
        pgid=m["pgid"],
        budget_s=m["budget_s"],
        timeout_s=m["timeout_s"],
        origin=m["origin"],
        session=m["session"],
        on_done_cmd=m["on_done_cmd"],
        on_done_url=m["on_done_url"],
        created_at=from_epoch(m["created_at"]),
        started_at=from_epoch(m["started_at"]),
        progress_at=from_epoch(m["progress_at"]),
        finished_at=from_epoch(m["finished_at"]),
        updated_at=from_epoch(m["updated_at"]),
        abort_requested_at=from_epoch(m["abort_requested_at"]),
        exit_code=m["exit_code"],
        signal=m["signal"],
        reason=m["reason"],
        step=m["step"],
        log_size=m["log_size"],
        log_mtime=m["log_mtime"],
        version=m["version"],
        hook_state=HookState(m["hook_state"]),
        hook_error=m["hook_error"],
    )


def _park(row: Row[Any]) -> Park:
    m = row._mapping
    return Park(
        id=m["id"],
        session=m["session"],
        reason=m["reason"],
        until_run=m["until_run"],
        wake_cmd=m["wake_cmd"],
        state=ParkState(m["state"]),
        parked_at=from_epoch(m["parked_at"]),
        woken_at=from_epoch(m["woken_at"]),
        note=m["note"],
    )


class ProcStore:
    """Reads and moves process runs, parks and session breakers."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._write_options = {"sqlite_begin": "IMMEDIATE"} if is_sqlite(engine) else {}

    @contextmanager
    def _write(self, action: str) -> Iterator[Connection]:
        with translate_errors(action), self._engine.connect() as conn:
            conn = conn.execution_options(**self._write_options)
            with conn.begin():
                yield conn

    @contextmanager
    def _read(self, action: str) -> Iterator[Connection]:
        with translate_errors(action), self._engine.connect() as conn:
            yield conn

    # Runs ------------------------------------------------------------------------------

    def register(self, new: NewProc, now: datetime) -> ProcRun:
        """Commit a run in ``starting`` before its command exists."""
        at = to_epoch(now)
        hooks = HookState.WAITING if (new.on_done_cmd or new.on_done_url) else HookState.NONE
        values = {
            "run_id": new.run_id,
            "name": new.name,
            "argv": list(new.argv),
            "cwd": new.cwd,
            "host": new.host,
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
            changed = conn.execute(
                update(proc_runs)
                .where(_R.run_id == run_id, _R.status.in_(_ACTIVE))
                .values(**values)
            ).rowcount
            # Hooks become due in the same transaction that ends the run: none is ever lost.
            conn.execute(
                update(proc_runs)
                .where(_R.run_id == run_id, _R.hook_state == HookState.WAITING.value)
                .values(hook_state=HookState.PENDING.value)
            )
        return changed == 1

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
            done = conn.execute(
                update(proc_runs)
                .where(_R.run_id == run_id, _R.status.in_(_ACTIVE))
                .values(**values)
            ).rowcount
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
            changed = conn.execute(
                update(proc_runs)
                .where(_R.run_id == run_id, _R.status.in_(_ACTIVE))
                .values(**values)
            ).rowcount
        return changed == 1

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
            conn.execute(
                update(proc_runs)
                .where(_R.run_id == run_id, _R.status.in_(_ACTIVE))
                .values(**values)
            )

    def get(self, run_id: str) -> ProcRun:
        """One run, or :class:`NotFound`."""
        with self._read("reading a process run") as conn:
            row = conn.execute(select(proc_runs).where(_R.run_id == run_id)).first()
        if row is None:
            raise NotFound(f"no process run {run_id!r}: see `watchkeeper ps --all`")
        return run_from_row(row)

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
            return [run_from_row(row) for row in conn.execute(statement)]

    def active_on(self, host: str) -> list[ProcRun]:
        """Active runs recorded on ``host``: the ones this engine can check."""
        statement = select(proc_runs).where(_R.status.in_(_ACTIVE), _R.host == host)
        with self._read("reading active process runs") as conn:
            return [run_from_row(row) for row in conn.execute(statement)]

    def has_work(self, host: str) -> bool:
        """Whether a sweep has anything to do here: cheap, so an idle sweep stays idle."""
        busy = [*_ACTIVE, HookState.PENDING.value, HookState.FIRING.value]
        runs = (
            select(_R.run_id)
            .where(_R.host == host, _R.status.in_(busy) | _R.hook_state.in_(busy))
            .limit(1)
        )
        parks = select(proc_parks.c.id).where(proc_parks.c.state == ParkState.WAITING.value)
        with self._read("checking for process work") as conn:
            if conn.execute(runs).first() is not None:
                return True
            return conn.execute(parks.limit(1)).first() is not None

    # Hook journal ----------------------------------------------------------------------

    def due_hooks(self, host: str) -> list[ProcRun]:
        """Ended runs of ``host`` whose hooks have not been fired."""
        statement = select(proc_runs).where(
            _R.hook_state == HookState.PENDING.value, _R.host == host
        )
        with self._read("reading due hooks") as conn:
            return [run_from_row(row) for row in conn.execute(statement)]

    def claim_hook(self, run_id: str, now: datetime) -> bool:
        """``pending`` -> ``firing``, committed before anything fires; ``False`` if lost."""
        with self._write("claiming a completion hook") as conn:
            return (
                conn.execute(
                    update(proc_runs)
                    .where(_R.run_id == run_id, _R.hook_state == HookState.PENDING.value)
                    .values(hook_state=HookState.FIRING.value, hook_at=to_epoch(now))
                ).rowcount
                == 1
            )

    def settle_hook(self, run_id: str, state: HookState, error: str | None, now: datetime) -> None:
        """``firing`` -> ``fired`` or ``failed``."""
        with self._write("settling a completion hook") as conn:
            conn.execute(
                update(proc_runs)
                .where(_R.run_id == run_id, _R.hook_state == HookState.FIRING.value)
                .values(hook_state=state.value, hook_error=error, hook_at=to_epoch(now))
            )

    def reconcile_hooks(self, host: str, claimed_before: float) -> int:
        """Hooks caught ``firing`` since before ``claimed_before`` may have fired: never refire.

        The cut-off keeps a second watchkeeper process on the same host (a CLI
        command, say) from marking a hook another one is firing right now.
        """
        with self._write("reconciling completion hooks") as conn:
            return int(
                conn.execute(
                    update(proc_runs)
                    .where(
                        _R.hook_state == HookState.FIRING.value,
                        _R.host == host,
                        _R.hook_at < claimed_before,
                    )
                    .values(
                        hook_state=HookState.MAYBE_FIRED.value,
                        hook_error="watchkeeper stopped while firing: it may or may not have run",
                    )
                ).rowcount
            )

    # Parks and sessions ----------------------------------------------------------------

    def park(
        self, session: str, reason: str, until_run: str, wake_cmd: str | None, now: datetime
    ) -> Park:
        """Record that ``session`` handed back, waiting on ``until_run``."""
        values = {
            "session": session,
            "reason": reason,
            "until_run": until_run,
            "wake_cmd": wake_cmd,
            "state": ParkState.WAITING.value,
            "parked_at": to_epoch(now),
        }
        with self._write("parking a session") as conn:
            if conn.execute(select(_R.run_id).where(_R.run_id == until_run)).first() is None:
                raise NotFound(f"no process run {until_run!r} to wait on")
            inserted = conn.execute(insert(proc_parks).values(**values)).inserted_primary_key
            assert inserted is not None  # an autoincrement key is always returned
            new_id = inserted[0]
            row = conn.execute(select(proc_parks).where(proc_parks.c.id == new_id)).one()
        return _park(row)

    def parks(self, *, state: ParkState | None = None, limit: int = 500) -> list[Park]:
        """Parks, newest first."""
        statement = select(proc_parks).order_by(proc_parks.c.id.desc()).limit(limit)
        if state is not None:
            statement = statement.where(proc_parks.c.state == state.value)
        with self._read("listing parked sessions") as conn:
            return [_park(row) for row in conn.execute(statement)]

    def wakeable_parks(self) -> list[tuple[Park, ProcRun]]:
        """Waiting parks whose run has ended, with the run."""
        statement = (
            select(proc_parks, proc_runs)
            .join(proc_runs, _R.run_id == proc_parks.c.until_run)
            .where(proc_parks.c.state == ParkState.WAITING.value, _R.status.not_in(_ACTIVE))
            .order_by(proc_parks.c.id)
        )
        with self._read("reading wakeable parks") as conn:
            rows = conn.execute(statement).all()
        return [(_park(row), run_from_row(row)) for row in rows]

    def move_park(
        self, park_id: int, to: ParkState, now: datetime, note: str | None = None
    ) -> bool:
        """``waiting`` -> ``to``; ``False`` if another engine moved it first."""
        values: dict[str, Any] = {"state": to.value, "note": note}
        if to is ParkState.WOKEN:
            values["woken_at"] = to_epoch(now)
        with self._write("moving a parked session") as conn:
            return (
                conn.execute(
                    update(proc_parks)
                    .where(
                        proc_parks.c.id == park_id, proc_parks.c.state == ParkState.WAITING.value
                    )
                    .values(**values)
                ).rowcount
                == 1
            )

    def session(self, session: str) -> SessionBreaker:
        """The wake breaker of ``session`` (a fresh one if it never woke)."""
        with self._read("reading a session") as conn:
            row = conn.execute(
                select(proc_sessions).where(proc_sessions.c.session == session)
            ).first()
        if row is None:
            return SessionBreaker(session, 0, None, None, None)
        return SessionBreaker(
            session,
            row.wakes_without_progress,
            from_epoch(row.progress_at),
            row.progress_note,
            from_epoch(row.last_wake_at),
        )

    def sessions(self, names: Sequence[str]) -> dict[str, SessionBreaker]:
        """Breakers of several sessions at once."""
        return {name: self.session(name) for name in dict.fromkeys(names)}

    def record_wake(self, session: str, now: datetime) -> None:
        """One more wake without progress."""
        at = to_epoch(now)
        with self._write("recording a wake") as conn:
            self._ensure_session(conn, session, at)
            conn.execute(
                update(proc_sessions)
                .where(proc_sessions.c.session == session)
                .values(
                    wakes_without_progress=proc_sessions.c.wakes_without_progress + 1,
                    last_wake_at=at,
                    updated_at=at,
                )
            )

    def session_progress(self, session: str, note: str | None, now: datetime) -> int:
        """The session moved: reset its breaker and release its suppressed parks (count)."""
        at = to_epoch(now)
        with self._write("recording session progress") as conn:
            self._ensure_session(conn, session, at)
            conn.execute(
                update(proc_sessions)
                .where(proc_sessions.c.session == session)
                .values(wakes_without_progress=0, progress_at=at, progress_note=note, updated_at=at)
            )
            return int(
                conn.execute(
                    update(proc_parks)
                    .where(
                        proc_parks.c.session == session,
                        proc_parks.c.state == ParkState.SUPPRESSED.value,
                    )
                    .values(state=ParkState.WAITING.value, note=None)
                ).rowcount
            )

    def _ensure_session(self, conn: Connection, session: str, at: float | None) -> None:
        found = conn.execute(
            select(proc_sessions.c.session).where(proc_sessions.c.session == session)
        ).first()
        if found is None:
            conn.execute(
                insert(proc_sessions).values(
                    session=session, wakes_without_progress=0, updated_at=at
                )
            )


def open_store(url: str) -> Store:
    """Open the store, running Alembic only when the schema is behind the shipped migrations.

    Commands that start processes pay for every millisecond: checking the
    revision is one query, while a full ``upgrade`` loads every migration script.
    """
    from watchkeeper.store import Store
    from watchkeeper.store.migrate import current_revision, upgrade

    store = Store(url, migrate=False)
    try:
        head = _shipped_head()
        if head is None or current_revision(store.engine) != head:
            upgrade(store.engine)
    except BaseException:
        store.close()
        raise
    return store


def _shipped_head() -> str | None:
    """The newest ``NNNN_name.py`` revision shipped; ``None`` if the names do not say."""
    import re

    from watchkeeper.store.migrate import MIGRATIONS

    names = [p.name for p in (MIGRATIONS / "versions").glob("*.py") if p.name != "__init__.py"]
    found = [re.match(r"^(\d{4})_\w+\.py$", name) for name in names]
    if not found or not all(found):
        return None
    return max(match.group(1) for match in found if match)
