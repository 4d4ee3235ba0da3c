"""The job queue's store: jobs, tasks, runners, leases, provisions, spend and timelines.

Moves only; the rules live in ``queue/``. Leasing is one write transaction:
candidates are read with ``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL
(inside ``BEGIN IMMEDIATE`` on SQLite, which holds the write lock), the lease
rule passed in by the caller admits them, and each admitted task is claimed
with ``UPDATE ... WHERE status = 'queued' RETURNING``. Every later move of a
leased task is ``UPDATE ... WHERE id = ? AND lease_token = ?`` and the lease
still live (``COALESCE(last_renewed_at, leased_at) + lease_s`` in the future):
zero rows means the lease is gone.

A lease also mints the task's own API token (``store/tokens.py``); every move
that ends a lease (completion, failure, cancel, recovery of a lapsed or
abandoned lease, a new lease) removes it in the same transaction.
"""

from __future__ import annotations

import dataclasses
import functools
import secrets
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Float,
    Integer,
    Row,
    String,
    and_,
    bindparam,
    cast,
    delete,
    func,
    insert,
    literal,
    select,
    text,
    update,
)

from watchkeeper.clock import from_epoch, rfc3339, to_epoch
from watchkeeper.errors import Conflict, NotFound
from watchkeeper.queue.records import (
    CANCELLABLE,
    OUT_OF_ATTEMPTS,
    RETRYABLE,
    Event,
    Job,
    Lease,
    NewJob,
    NewRunner,
    OrgLoad,
    Provision,
    QueuedTask,
    Recovery,
    Runner,
    Snapshot,
    Task,
    TaskStatus,
)
from watchkeeper.store.engine import is_sqlite, translate_errors, write_transaction
from watchkeeper.store.schema import api_tokens
from watchkeeper.store.schema_queue import (
    queue_events,
    queue_jobs,
    queue_provisions,
    queue_runners,
    queue_spend,
    queue_tasks,
)
from watchkeeper.store.tokens import mint_task_tokens, revoke_task_tokens

_T = queue_tasks.c
_J = queue_jobs.c
_R = queue_runners.c
_QUEUED = TaskStatus.QUEUED.value
_RUNNING = TaskStatus.RUNNING.value
_ACTIVE = [TaskStatus.QUEUED.value, TaskStatus.RUNNING.value, TaskStatus.STUCK.value]
_META = queue_tasks.c["metadata"]
#: The metadata key a start-up reconciliation sets on a task a restart interrupted.
INTERRUPTED = "interrupted_at"
#: Admits a queued task for a runner given the org's load; the lease rule of ``queue/rules.py``.
Admit = Callable[[QueuedTask, Runner, OrgLoad], bool]


def _aware(value: float) -> datetime:
    result = from_epoch(value)
    assert result is not None  # the column is NOT NULL
    return result


def _at(now: datetime) -> float:
    at = to_epoch(now)
    assert at is not None
    return at


def month_of(now: datetime) -> str:
    """The spend month ``now`` falls in (UTC), as stored."""
    return now.strftime("%Y-%m")


def new_id(prefix: str) -> str:
    """A fresh id: short, unguessable, safe in paths and URLs."""
    return f"{prefix}-{secrets.token_hex(6)}"


def task_from_row(row: Row[Any]) -> Task:
    """A ``queue_tasks`` row as a record."""
    m = row._mapping
    return Task(
        id=m["id"],
        job_id=m["job_id"],
        seq=m["seq"],
        org=m["org"],
        fleet=m["fleet"],
        payload=m["payload"],
        status=TaskStatus(m["status"]),
        rerunnable=bool(m["rerunnable"]),
        attempt=m["attempt"],
        max_attempts=m["max_attempts"],
        version=m["version"],
        lease_s=m["lease_s"],
        queued_at=_aware(m["queued_at"]),
        runner_id=m["runner_id"],
        leased_at=from_epoch(m["leased_at"]),
        last_renewed_at=from_epoch(m["last_renewed_at"]),
        progress_at=from_epoch(m["progress_at"]),
        finished_at=from_epoch(m["finished_at"]),
        step=m["step"],
        exit_code=m["exit_code"],
        failure_reason=m["failure_reason"],
        failure_fingerprint=m["failure_fingerprint"],
    )


def runner_from_row(row: Row[Any], running: int = 0) -> Runner:
    """A ``queue_runners`` row as a record, with how many tasks it runs."""
    m = row._mapping
    return Runner(
        id=m["id"],
        fleet=m["fleet"],
        capacity=m["capacity"],
        host=m["host"],
        pid=m["pid"],
        org=m["org"],
        name=m["name"],
        registered_at=_aware(m["registered_at"]),
        heartbeat_at=_aware(m["heartbeat_at"]),
        stopped_at=from_epoch(m["stopped_at"]),
        running=running,
    )


def _live_lease(at: float) -> ColumnElement[bool]:
    # Liveness counts from the last renewal, or from the lease itself: never from a NULL.
    return func.coalesce(_T.last_renewed_at, _T.leased_at) + _T.lease_s > at


def _held(task_id: str, token: str, at: float) -> ColumnElement[bool]:
    return and_(_T.id == task_id, _T.lease_token == token, _T.status == _RUNNING, _live_lease(at))


class QueueStore:
    """Reads and moves the queue's rows. Every move is one transaction."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sqlite = is_sqlite(engine)

    # Jobs ----------------------------------------------------------------------------

    def submit(self, new: NewJob, now: datetime) -> Job:
        """Record a job and its first task, queued."""
        at = _at(now)
        job_id = new_id("j")
        with translate_errors("submitting a job"), write_transaction(self._engine) as conn:
            conn.execute(
                insert(queue_jobs).values(
                    id=job_id,
                    title=new.title,
                    org=new.org,
                    fleet=new.fleet,
                    payload=new.payload,
                    submitted_by=new.submitted_by,
                    created_at=at,
                )
            )
            self._add_task(conn, job_id, 0, new, new.payload, at)
        return self.job(job_id)

    def resume(self, job_id: str, payload: dict[str, Any] | None, now: datetime) -> Task:
        """Add a continuation task to a job whose tasks have all ended."""
        at = _at(now)
        with translate_errors("resuming a job"), write_transaction(self._engine) as conn:
            job = conn.execute(select(queue_jobs).where(_J.id == job_id)).first()
            if job is None:
                raise NotFound(f"no job {job_id!r}")
            last = conn.execute(
                select(queue_tasks).where(_T.job_id == job_id).order_by(_T.seq.desc()).limit(1)
            ).one()
            if not TaskStatus(last.status).ended:
                raise Conflict(
                    f"job {job_id} still has task {last.id} {last.status}: "
                    "wait for it or cancel it before resuming"
                )
            template = NewJob(
                title=job.title,
                org=job.org,
                fleet=job.fleet,
                payload=job.payload,
                submitted_by=job.submitted_by,
                rerunnable=bool(last.rerunnable),
                max_attempts=last.max_attempts,
                lease_s=last.lease_s,
            )
            task_id = self._add_task(
                conn, job_id, last.seq + 1, template, payload or job.payload, at
            )
        return self.task(task_id)

    def _add_task(
        self,
        conn: Connection,
        job_id: str,
        seq: int,
        new: NewJob,
        payload: dict[str, Any],
        at: float,
    ) -> str:
        task_id = new_id("t")
        conn.execute(
            insert(queue_tasks).values(
                id=task_id,
                job_id=job_id,
                seq=seq,
                org=new.org,
                fleet=new.fleet,
                payload=payload,
                status=_QUEUED,
                rerunnable=new.rerunnable,
                attempt=0,
                max_attempts=new.max_attempts,
                version=1,
                lease_s=new.lease_s,
                queued_at=at,
                updated_at=at,
            )
        )
        self._events(conn, [(task_id, job_id)], at, "queued", None)
        return task_id

    def submit_many(self, news: Sequence[NewJob], now: datetime) -> list[str]:
        """Record many jobs at once (benchmarks, imports); returns their first tasks' ids."""
        at = _at(now)
        jobs: list[dict[str, Any]] = []
        tasks: list[dict[str, Any]] = []
        for new in news:
            job_id, task_id = new_id("j"), new_id("t")
            jobs.append(
                {"id": job_id, "title": new.title, "org": new.org, "fleet": new.fleet,
                 "payload": new.payload, "submitted_by": new.submitted_by, "created_at": at}
            )  # fmt: skip
            tasks.append(
                {"id": task_id, "job_id": job_id, "seq": 0, "org": new.org, "fleet": new.fleet,
                 "payload": new.payload, "status": _QUEUED, "rerunnable": new.rerunnable,
                 "attempt": 0, "max_attempts": new.max_attempts, "version": 1,
                 "lease_s": new.lease_s, "queued_at": at, "updated_at": at}
            )  # fmt: skip
        with translate_errors("submitting jobs"), write_transaction(self._engine) as conn:
            if jobs:
                conn.execute(insert(queue_jobs), jobs)
                conn.execute(insert(queue_tasks), tasks)
        return [str(task["id"]) for task in tasks]

    def job(self, job_id: str) -> Job:
        """One job with its tasks, or :class:`NotFound`."""
        with translate_errors("reading a job"), self._engine.connect() as conn:
            found = self._jobs(conn, select(queue_jobs).where(_J.id == job_id))
        if not found:
            raise NotFound(f"no job {job_id!r}: see `watchkeeper jobs`")
        return found[0]

    def jobs(
        self,
        *,
        fleet: str | None = None,
        org: str | None = None,
        active: bool | None = None,
        limit: int = 200,
        offset: int = 0,
    ) -> list[Job]:
        """Jobs newest first; ``active`` keeps jobs with (or without) an unfinished task."""
        statement = select(queue_jobs).order_by(_J.created_at.desc(), _J.id)
        if fleet is not None:
            statement = statement.where(_J.fleet == fleet)
        if org is not None:
            statement = statement.where(_J.org == org)
        if active is not None:
            unfinished = select(_T.job_id).where(_T.status.in_(_ACTIVE)).scalar_subquery()
            statement = statement.where(
                _J.id.in_(unfinished) if active else _J.id.not_in(unfinished)
            )
        statement = statement.limit(limit).offset(offset)
        with translate_errors("listing jobs"), self._engine.connect() as conn:
            return self._jobs(conn, statement)

    def _jobs(self, conn: Connection, statement: Any) -> list[Job]:
        rows = conn.execute(statement).all()
        if not rows:
            return []
        ids = [row.id for row in rows]
        tasks: dict[str, list[Task]] = {job_id: [] for job_id in ids}
        for row in conn.execute(
            select(queue_tasks).where(_T.job_id.in_(ids)).order_by(_T.job_id, _T.seq)
        ):
            tasks[row.job_id].append(task_from_row(row))
        return [
            Job(
                id=row.id,
                title=row.title,
                org=row.org,
                fleet=row.fleet,
                payload=row.payload,
                submitted_by=row.submitted_by,
                created_at=_aware(row.created_at),
                tasks=tuple(tasks[row.id]),
            )
            for row in rows
        ]

    def task(self, task_id: str) -> Task:
        """One task, or :class:`NotFound`."""
        with translate_errors("reading a task"), self._engine.connect() as conn:
            row = conn.execute(select(queue_tasks).where(_T.id == task_id)).first()
        if row is None:
            raise NotFound(f"no task {task_id!r}")
        return task_from_row(row)

    def title_of(self, task_id: str) -> str:
        """The title of a task's job."""
        statement = select(_J.title).join(queue_tasks, _T.job_id == _J.id).where(_T.id == task_id)
        with translate_errors("reading a task"), self._engine.connect() as conn:
            title = conn.execute(statement).scalar()
        if title is None:
            raise NotFound(f"no task {task_id!r}")
        return str(title)

    def events(self, job_id: str) -> list[Event]:
        """A job's timeline, oldest first."""
        statement = (
            select(queue_events).where(queue_events.c.job_id == job_id).order_by(queue_events.c.id)
        )
        with translate_errors("reading a timeline"), self._engine.connect() as conn:
            return [
                Event(row.task_id, _aware(row.at), row.type, row.detail)
                for row in conn.execute(statement)
            ]

    # Job control ---------------------------------------------------------------------

    def cancel(
        self, now: datetime, *, job_id: str | None = None, task_ids: Collection[str] = ()
    ) -> list[str]:
        """Cancel the unfinished tasks of a job (or the given tasks); returns their ids.

        A running task's lease is revoked with it: its runner's next renewal fails.
        """
        at = _at(now)
        with translate_errors("cancelling"), write_transaction(self._engine) as conn:
            scope = self._scope(conn, job_id, task_ids)
            rows = self._locked(
                conn,
                select(_T.id, _T.job_id, _T.org, _T.status, _T.leased_at).where(
                    scope, _T.status.in_([status.value for status in CANCELLABLE])
                ),
            )
            if not rows:
                return []
            ids = [row.id for row in rows]
            conn.execute(
                update(queue_tasks)
                .where(_T.id.in_(ids), _T.status.in_([s.value for s in CANCELLABLE]))
                .values(
                    status=TaskStatus.CANCELLED.value,
                    lease_token=None,
                    finished_at=at,
                    updated_at=at,
                    version=_T.version + 1,
                )
            )
            revoke_task_tokens(conn, [row.id for row in rows if row.status == _RUNNING])
            for row in rows:
                if row.status == _RUNNING and row.leased_at is not None:
                    self._spend(conn, row.org, now, at - row.leased_at)
            self._events(conn, [(row.id, row.job_id) for row in rows], at, "cancelled", None)
        return ids

    def retry(
        self, now: datetime, *, job_id: str | None = None, task_ids: Collection[str] = ()
    ) -> list[str]:
        """Queue failed, cancelled and stuck tasks again, with fresh attempts; returns their ids."""
        at = _at(now)
        retryable = [status.value for status in RETRYABLE]
        with translate_errors("retrying"), write_transaction(self._engine) as conn:
            scope = self._scope(conn, job_id, task_ids)
            rows = self._locked(
                conn, select(_T.id, _T.job_id).where(scope, _T.status.in_(retryable))
            )
            if not rows:
                return []
            ids = [row.id for row in rows]
            conn.execute(
                update(queue_tasks)
                .where(_T.id.in_(ids), _T.status.in_(retryable))
                .values(_requeue_values(at) | {"attempt": 0, "queued_at": at})
            )
            self._events(conn, [(row.id, row.job_id) for row in rows], at, "retried", None)
        return ids

    def delete(self, job_id: str) -> int:
        """Delete a job whose tasks are not running; returns how many tasks went with it."""
        with translate_errors("deleting a job"), write_transaction(self._engine) as conn:
            self._scope(conn, job_id, ())
            rows = self._locked(conn, select(_T.id, _T.status).where(_T.job_id == job_id))
            running = [row.id for row in rows if row.status == _RUNNING]
            if running:
                raise Conflict(
                    f"job {job_id} has {len(running)} running task(s): cancel it first "
                    f"(`watchkeeper cancel {job_id}`)"
                )
            # SQLite enforces the cascade only with foreign keys on; delete children explicitly.
            conn.execute(delete(queue_events).where(queue_events.c.job_id == job_id))
            conn.execute(delete(queue_tasks).where(_T.job_id == job_id))
            conn.execute(delete(queue_jobs).where(_J.id == job_id))
        return len(rows)

    def _scope(
        self, conn: Connection, job_id: str | None, task_ids: Collection[str]
    ) -> ColumnElement[bool]:
        if job_id is None:
            return _T.id.in_(list(task_ids))
        if conn.execute(select(_J.id).where(_J.id == job_id)).first() is None:
            raise NotFound(f"no job {job_id!r}: see `watchkeeper jobs`")
        return _T.job_id == job_id

    def _locked(self, conn: Connection, statement: Any) -> Sequence[Row[Any]]:
        if not self._sqlite:
            statement = statement.with_for_update()
        return conn.execute(statement).all()

    # Runners -------------------------------------------------------------------------

    def register(self, new: NewRunner, now: datetime) -> Runner:
        """Record a runner; it counts as alive from this first heartbeat."""
        at = _at(now)
        runner_id = new_id("r")
        with translate_errors("registering a runner"), write_transaction(self._engine) as conn:
            conn.execute(
                insert(queue_runners).values(
                    id=runner_id,
                    name=new.name,
                    fleet=new.fleet,
                    org=new.org,
                    capacity=new.capacity,
                    host=new.host,
                    pid=new.pid,
                    registered_at=at,
                    heartbeat_at=at,
                )
            )
        return self.runner(runner_id)

    def heartbeat(self, runner_id: str, now: datetime) -> Runner:
        """The runner is alive; a stopped runner must register again."""
        at = _at(now)
        with translate_errors("recording a heartbeat"), write_transaction(self._engine) as conn:
            moved = conn.execute(
                update(queue_runners)
                .where(_R.id == runner_id, _R.stopped_at.is_(None))
                .values(heartbeat_at=at)
            ).rowcount
        if not moved:
            self._explain_runner(runner_id)
        return self.runner(runner_id)

    def stop_runner(self, runner_id: str, now: datetime) -> None:
        """Mark a runner stopped (it said goodbye); its leases are recovered by the caller."""
        at = _at(now)
        with translate_errors("stopping a runner"), write_transaction(self._engine) as conn:
            moved = conn.execute(
                update(queue_runners)
                .where(_R.id == runner_id, _R.stopped_at.is_(None))
                .values(stopped_at=at)
            ).rowcount
        if not moved:
            self._explain_runner(runner_id)

    def _explain_runner(self, runner_id: str) -> None:
        runner = self.runner(runner_id)
        raise Conflict(
            f"runner {runner_id} stopped at {runner.stopped_at}: register again to serve"
        )

    def runner(self, runner_id: str) -> Runner:
        """One runner with its running count, or :class:`NotFound`."""
        with translate_errors("reading a runner"), self._engine.connect() as conn:
            row = conn.execute(select(queue_runners).where(_R.id == runner_id)).first()
            if row is None:
                raise NotFound(f"no runner {runner_id!r}: register first")
            running = self._running_of(conn, runner_id)
        return runner_from_row(row, running)

    def _running_of(self, conn: Connection, runner_id: str) -> int:
        statement = select(func.count()).where(_T.runner_id == runner_id, _T.status == _RUNNING)
        return int(conn.execute(statement).scalar_one())

    def runners(self, *, include_stopped: bool = False) -> list[Runner]:
        """Registered runners with how many tasks each runs."""
        with translate_errors("listing runners"), self._engine.connect() as conn:
            return self._runners(conn, include_stopped)

    def _runners(self, conn: Connection, include_stopped: bool) -> list[Runner]:
        statement = select(queue_runners).order_by(_R.fleet, _R.registered_at)
        if not include_stopped:
            statement = statement.where(_R.stopped_at.is_(None))
        rows = conn.execute(statement).all()
        counts: dict[str, int] = dict(
            conn.execute(
                select(_T.runner_id, func.count())
                .where(_T.status == _RUNNING, _T.runner_id.is_not(None))
                .group_by(_T.runner_id)
            ).all()
        )
        return [runner_from_row(row, int(counts.get(row.id, 0))) for row in rows]

    def running_tasks(self) -> list[Task]:
        """Every task a runner holds now."""
        statement = select(queue_tasks).where(_T.status == _RUNNING).order_by(_T.leased_at)
        with translate_errors("reading running tasks"), self._engine.connect() as conn:
            return [task_from_row(row) for row in conn.execute(statement)]

    # Leasing -------------------------------------------------------------------------

    def lease(
        self,
        runner_id: str,
        now: datetime,
        *,
        limit: int,
        admit: Admit,
        load_needed: Callable[[str], bool],
        window: int = 64,
    ) -> list[Lease]:
        """Lease up to ``limit`` queued tasks of the runner's fleet that ``admit`` allows.

        Candidates are the oldest ``window`` queued tasks (locked rows skipped);
        the org loads ``admit`` reads are counted in the same transaction, and
        on PostgreSQL an org with caps is locked for its duration, so two
        runners never both take the last slot of an org.
        """
        at = _at(now)
        with translate_errors("leasing tasks"), write_transaction(self._engine) as conn:
            row = conn.execute(_RUNNER_WITH_LOAD, {"p_runner": runner_id}).first()
            if row is None:
                raise NotFound(f"no runner {runner_id!r}: register first")
            if row.stopped_at is not None:
                raise Conflict(f"runner {runner_id} has stopped: register again to serve")
            runner = runner_from_row(row, int(row.running))
            candidates = self._candidates(conn, runner, max(window, limit))
            if not candidates:
                return []
            chosen = self._admit(conn, runner, candidates, limit, admit, load_needed, now)
            leases = self._claim(conn, runner_id, chosen, at) if chosen else []
            self._events(
                conn, [(x.task.id, x.task.job_id) for x in leases], at, "leased", runner_id
            )
        return leases

    def _candidates(self, conn: Connection, runner: Runner, window: int) -> Sequence[Any]:
        statement = _candidates_statement(runner.org is not None, self._sqlite)
        params = {"p_fleet": runner.fleet, "p_org": runner.org, "p_window": window}
        return conn.execute(statement, params).all()

    def _admit(
        self,
        conn: Connection,
        runner: Runner,
        candidates: Sequence[Any],
        limit: int,
        admit: Admit,
        load_needed: Callable[[str], bool],
        now: datetime,
    ) -> list[str]:
        capped = sorted({row.org for row in candidates if load_needed(row.org)})
        loads = self._loads(conn, capped, now, lock=True) if capped else {}
        running_jobs: set[str] = set()
        if capped:
            jobs = list({row.job_id for row in candidates})
            running_jobs = set(
                conn.execute(
                    select(_T.job_id).where(_T.job_id.in_(jobs), _T.status == _RUNNING).distinct()
                ).scalars()
            )
        chosen: list[str] = []
        for row in candidates:
            if len(chosen) >= limit:
                break
            task = QueuedTask(row.id, row.job_id, row.org, row.fleet, row.job_id in running_jobs)
            load = loads.get(row.org) or OrgLoad(row.org)
            if not admit(task, runner, load):
                continue
            chosen.append(row.id)
            # Count what this lease adds, so the next candidate is judged against it.
            runner = dataclasses.replace(runner, running=runner.running + 1)
            if not task.job_running:
                running_jobs.add(row.job_id)
                loads[row.org] = dataclasses.replace(load, running_jobs=load.running_jobs + 1)
        return chosen

    def _claim(
        self, conn: Connection, runner_id: str, task_ids: list[str], at: float
    ) -> list[Lease]:
        rows = conn.execute(
            _claim_statement(self._sqlite),
            {"p_ids": task_ids, "p_runner": runner_id, "p_at": at},
        ).all()
        order = {task_id: index for index, task_id in enumerate(task_ids)}
        minted = mint_task_tokens(conn, [(row.id, row.job_id) for row in rows], at)
        leases = [Lease(task_from_row(row), row.lease_token, minted[row.id]) for row in rows]
        return sorted(leases, key=lambda lease: order[lease.task.id])

    def renew(
        self,
        task_id: str,
        token: str,
        now: datetime,
        *,
        progressed: bool = False,
        step: str | None = None,
    ) -> Task | None:
        """Renew a live lease (and record progress); ``None`` when the lease is gone."""
        at = _at(now)
        values: dict[str, Any] = {"last_renewed_at": at, "updated_at": at}
        if progressed or step is not None:
            values.update(progress_at=at, version=_T.version + 1)
        if step is not None:
            values["step"] = step[:2000]
        with translate_errors("renewing a lease"), write_transaction(self._engine) as conn:
            row = conn.execute(
                update(queue_tasks)
                .where(_held(task_id, token, at))
                .values(**values)
                .returning(*queue_tasks.c)
            ).first()
        return None if row is None else task_from_row(row)

    def complete(
        self, task_id: str, token: str, now: datetime, *, exit_code: int | None = 0
    ) -> Task | None:
        """The task succeeded; ``None`` when the lease is gone (the outcome is not recorded)."""
        return self._end(task_id, token, now, TaskStatus.SUCCEEDED, exit_code, None, None)

    def fail(
        self,
        task_id: str,
        token: str,
        now: datetime,
        *,
        reason: str,
        fingerprint: str,
        exit_code: int | None = None,
    ) -> Task | None:
        """The task failed; ``None`` when the lease is gone."""
        return self._end(task_id, token, now, TaskStatus.FAILED, exit_code, reason, fingerprint)

    def _end(
        self,
        task_id: str,
        token: str,
        now: datetime,
        status: TaskStatus,
        exit_code: int | None,
        reason: str | None,
        fingerprint: str | None,
    ) -> Task | None:
        at = _at(now)
        params = {
            "p_id": task_id,
            "p_token": token,
            "p_at": at,
            "p_exit": exit_code,
            "p_reason": None if reason is None else reason[:2000],
            "p_fingerprint": fingerprint,
            "p_month": month_of(now),
        }
        statement = _end_statement(status.value, self._sqlite)
        with (
            translate_errors(f"recording a task {status.value}"),
            write_transaction(self._engine) as conn,
        ):
            row = conn.execute(statement, params).first()
            if row is None:
                return None
            if self._sqlite:  # PostgreSQL did these in the same statement
                self._spend(conn, row.org, now, at - row.leased_at)
                self._events(conn, [(row.id, row.job_id)], at, status.value, reason)
                revoke_task_tokens(conn, [row.id])
        return task_from_row(row)

    def recover(self, now: datetime, *, runner_id: str | None = None) -> Recovery:
        """Take back lapsed leases (or every lease of ``runner_id``, which said goodbye).

        A re-runnable task goes back to the queue as a new attempt, until its
        attempts run out (then it fails as ``out_of_attempts``); a task that is
        not re-runnable (its effects are unknown) becomes stuck for a person.
        """
        at = _at(now)
        lapsed = (
            _T.runner_id == runner_id
            if runner_id is not None
            else func.coalesce(_T.last_renewed_at, _T.leased_at) + _T.lease_s <= at
        )
        columns = (_T.id, _T.job_id, _T.org, _T.rerunnable, _T.attempt, _T.max_attempts,
                   _T.leased_at, _T.last_renewed_at, _T.lease_s)  # fmt: skip
        with translate_errors("recovering lapsed leases"), write_transaction(self._engine) as conn:
            statement = select(*columns).where(_T.status == _RUNNING, lapsed)
            if not self._sqlite:
                statement = statement.with_for_update(skip_locked=True)
            rows = conn.execute(statement).all()
            if not rows:
                return Recovery()
            return self._recover_rows(conn, rows, at, now)

    def _recover_rows(
        self, conn: Connection, rows: Sequence[Any], at: float, now: datetime
    ) -> Recovery:
        stuck = [row for row in rows if not row.rerunnable]
        spent = [row for row in rows if row.rerunnable and row.attempt >= row.max_attempts]
        again = [row for row in rows if row.rerunnable and row.attempt < row.max_attempts]
        for row in rows:
            ended = min(at, (row.last_renewed_at or row.leased_at) + row.lease_s)
            self._spend(conn, row.org, now, ended - row.leased_at)
        revoke_task_tokens(conn, [row.id for row in rows])
        guard = _T.status == _RUNNING
        if stuck:
            conn.execute(
                update(queue_tasks)
                .where(_T.id.in_([row.id for row in stuck]), guard)
                .values(
                    status=TaskStatus.STUCK.value,
                    lease_token=None,
                    updated_at=at,
                    version=_T.version + 1,
                )
            )
        for row in spent:
            conn.execute(
                update(queue_tasks)
                .where(_T.id == row.id, guard)
                .values(
                    status=TaskStatus.FAILED.value,
                    lease_token=None,
                    finished_at=at,
                    updated_at=at,
                    failure_reason=f"its lease lapsed on attempt {row.attempt} of "
                    f"{row.max_attempts}: out of attempts",
                    failure_fingerprint=OUT_OF_ATTEMPTS,
                    version=_T.version + 1,
                )
            )
        if again:
            conn.execute(
                update(queue_tasks)
                .where(_T.id.in_([row.id for row in again]), guard)
                .values(_requeue_values(at))
            )
        for rows_, kind in ((stuck, "stuck"), (spent, OUT_OF_ATTEMPTS), (again, "requeued")):
            self._events(conn, [(row.id, row.job_id) for row in rows_], at, kind, "lease lapsed")
        return Recovery(
            tuple(row.id for row in again),
            tuple(row.id for row in stuck),
            tuple(row.id for row in spent),
        )

    # The interrupted marker ------------------------------------------------------------

    def mark_interrupted(self, now: datetime) -> list[str]:
        """Mark every running task ``interrupted_at`` (RFC 3339 UTC) in its metadata.

        A task already marked keeps its first marker. Returns the ids newly marked.
        """
        stamp = rfc3339(now)
        marked: list[str] = []
        with translate_errors("marking interrupted tasks"), write_transaction(self._engine) as conn:
            rows = conn.execute(select(_T.id, _META).where(_T.status == _RUNNING)).all()
            for row in rows:
                meta = dict(row._mapping["metadata"] or {})
                if meta.get(INTERRUPTED):
                    continue
                meta[INTERRUPTED] = stamp
                conn.execute(
                    update(queue_tasks)
                    .where(_T.id == row.id, _T.status == _RUNNING)
                    .values({_META: meta})
                )
                marked.append(row.id)
        return marked

    def interrupted(self, task_ids: Collection[str]) -> dict[str, str]:
        """``interrupted_at`` of each of ``task_ids`` that carries the marker."""
        if not task_ids:
            return {}
        statement = select(_T.id, _META).where(_T.id.in_(list(task_ids)), _META.is_not(None))
        with translate_errors("reading task markers"), self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        found: dict[str, str] = {}
        for row in rows:
            meta = row._mapping["metadata"]
            if isinstance(meta, dict) and meta.get(INTERRUPTED):
                found[row.id] = str(meta[INTERRUPTED])
        return found

    def clear_interrupted(self, task_ids: Collection[str], now: datetime) -> list[str]:
        """Remove the marker from those of ``task_ids`` that carry it (they run again).

        Returns the ids whose marker this call removed: a concurrent call never
        reports the same removal. Reads first, so an unmarked task costs no write.
        """
        if not self.interrupted(task_ids):
            return []
        at = _at(now)
        removed: list[str] = []
        with translate_errors("clearing task markers"), write_transaction(self._engine) as conn:
            statement = select(_T.id, _META).where(_T.id.in_(list(task_ids)), _META.is_not(None))
            if not self._sqlite:
                statement = statement.with_for_update()
            for row in conn.execute(statement).all():
                meta = row._mapping["metadata"]
                if not isinstance(meta, dict) or not meta.get(INTERRUPTED):
                    continue
                rest = {key: value for key, value in meta.items() if key != INTERRUPTED}
                conn.execute(
                    update(queue_tasks)
                    .where(_T.id == row.id)
                    .values({_META: rest, _T.updated_at: at})
                )
                removed.append(row.id)
        return removed

    # Facts for the rules -------------------------------------------------------------

    def snapshot(self, now: datetime, orgs: Collection[str]) -> Snapshot:
        """Runners, the loads of ``orgs`` and the provisions, read in one transaction."""
        with translate_errors("reading the queue's facts"), self._engine.connect() as conn:
            runners = tuple(self._runners(conn, include_stopped=False))
            loads = self._loads(conn, sorted(orgs), now, lock=False) if orgs else {}
            provisions = {(p.org, p.fleet): p for p in self._provisions(conn)}
        return Snapshot(now, runners, loads, provisions)

    def _loads(
        self, conn: Connection, orgs: Sequence[str], now: datetime, *, lock: bool
    ) -> dict[str, OrgLoad]:
        at = _at(now)
        if lock and not self._sqlite:
            for org in orgs:  # sorted by the caller: two leases never wait on each other in turn
                conn.execute(
                    text("SELECT pg_advisory_xact_lock(hashtext(:org))"), {"org": f"wk-org:{org}"}
                )
        running = conn.execute(
            select(
                _T.org,
                func.count(_T.job_id.distinct()),
                func.coalesce(func.sum(literal(at) - _T.leased_at), 0.0),
            )
            .where(_T.status == _RUNNING, _T.org.in_(list(orgs)))
            .group_by(_T.org)
        ).all()
        spent = dict(
            conn.execute(
                select(queue_spend.c.org, queue_spend.c.agent_seconds).where(
                    queue_spend.c.month == month_of(now), queue_spend.c.org.in_(list(orgs))
                )
            ).all()
        )
        loads = {org: OrgLoad(org, 0, float(spent.get(org, 0.0)) / 60.0) for org in orgs}
        for org, jobs, seconds in running:
            loads[org] = OrgLoad(org, int(jobs), (float(spent.get(org, 0.0)) + seconds) / 60.0)
        return loads

    def queued(
        self, *, job_ids: Collection[str] | None = None, task_ids: Collection[str] | None = None
    ) -> list[QueuedTask]:
        """Queued tasks (all, or of some jobs or ids), with whether their job already runs.

        One set-based query, however many tasks are queued.
        """
        running = select(_T.job_id.label("job_id")).where(_T.status == _RUNNING).distinct()
        busy = running.subquery("busy")
        statement = (
            select(_T.id, _T.job_id, _T.org, _T.fleet, busy.c.job_id)
            .outerjoin(busy, busy.c.job_id == _T.job_id)
            .where(_T.status == _QUEUED)
            .order_by(_T.queued_at, _T.id)
        )
        if job_ids is not None:
            statement = statement.where(_T.job_id.in_(list(job_ids)))
        if task_ids is not None:
            statement = statement.where(_T.id.in_(list(task_ids)))
        with translate_errors("reading queued tasks"), self._engine.connect() as conn:
            return [
                QueuedTask(row[0], row[1], row[2], row[3], row[4] is not None)
                for row in conn.execute(statement)
            ]

    def queued_orgs(self) -> list[str]:
        """Orgs that have queued tasks."""
        statement = select(_T.org).where(_T.status == _QUEUED).distinct()
        with translate_errors("reading queued orgs"), self._engine.connect() as conn:
            return list(conn.execute(statement).scalars())

    # Provisioning --------------------------------------------------------------------

    def record_provision(
        self, org: str, fleet: str, state: str, reason: str | None, now: datetime
    ) -> Provision:
        """Record a cold start beginning (``provisioning``) or failing (``failed``)."""
        at = _at(now)
        key = (queue_provisions.c.org == org) & (queue_provisions.c.fleet == fleet)
        with translate_errors("recording a provision"), write_transaction(self._engine) as conn:
            row = conn.execute(select(queue_provisions).where(key)).first()
            started = at if row is None or state == "provisioning" else row.started_at
            values = {"state": state, "reason": reason, "started_at": started, "updated_at": at}
            if row is None:
                conn.execute(insert(queue_provisions).values(org=org, fleet=fleet, **values))
            else:
                conn.execute(update(queue_provisions).where(key).values(**values))
        return Provision(org, fleet, state, reason, _aware(started), now)

    def clear_provisions(self, fleet: str, org: str | None) -> int:
        """Forget the cold starts a new runner of ``fleet`` (tied to ``org``, if any) answers."""
        key = queue_provisions.c.fleet == fleet
        if org is not None:
            key = key & (queue_provisions.c.org == org)
        with translate_errors("clearing provisions"), write_transaction(self._engine) as conn:
            return int(conn.execute(delete(queue_provisions).where(key)).rowcount)

    def provisions(self) -> list[Provision]:
        """Every recorded cold start."""
        with translate_errors("reading provisions"), self._engine.connect() as conn:
            return self._provisions(conn)

    def _provisions(self, conn: Connection) -> list[Provision]:
        return [
            Provision(
                row.org,
                row.fleet,
                row.state,
                row.reason,
                _aware(row.started_at),
                _aware(row.updated_at),
            )
            for row in conn.execute(select(queue_provisions))
        ]

    # Judging -------------------------------------------------------------------------

    def for_judging(
        self, finished_since: datetime, task_id: str | None = None
    ) -> list[tuple[Task, str]]:
        """Unfinished tasks and those that ended after ``finished_since``, with job titles."""
        since = _at(finished_since)
        statement = select(queue_tasks, _J.title.label("job_title")).join(
            queue_jobs, _J.id == _T.job_id
        )
        if task_id is not None:
            statement = statement.where(_T.id == task_id)
        else:
            statement = statement.where(_T.status.in_(_ACTIVE) | (_T.finished_at >= since))
        with translate_errors("reading tasks"), self._engine.connect() as conn:
            return [(task_from_row(row), row.job_title) for row in conn.execute(statement)]

    # Internals -----------------------------------------------------------------------

    def _spend(self, conn: Connection, org: str, now: datetime, seconds: float) -> None:
        if seconds <= 0:
            return
        key = {"org": org, "month": month_of(now)}
        if self._sqlite:
            from sqlalchemy.dialects.sqlite import insert as upsert
        else:
            from sqlalchemy.dialects.postgresql import insert as upsert  # type: ignore[assignment]
        statement = upsert(queue_spend).values(**key, agent_seconds=seconds)
        conn.execute(
            statement.on_conflict_do_update(
                index_elements=["org", "month"],
                set_={"agent_seconds": queue_spend.c.agent_seconds + seconds},
            )
        )

    def _events(
        self,
        conn: Connection,
        tasks: Iterable[tuple[str, str]],
        at: float,
        kind: str,
        detail: str | None,
    ) -> None:
        rows = [
            {"task_id": task_id, "job_id": job_id, "at": at, "type": kind,
             "detail": None if detail is None else detail[:2000]}
            for task_id, job_id in tasks
        ]  # fmt: skip
        if rows:
            conn.execute(insert(queue_events), rows)


# The runner and how many tasks it holds, in one read.
_RUNNER_WITH_LOAD = select(
    queue_runners,
    select(func.count())
    .where(_T.runner_id == _R.id, _T.status == _RUNNING)
    .scalar_subquery()
    .label("running"),
).where(_R.id == bindparam("p_runner"))


@functools.lru_cache(maxsize=4)
def _candidates_statement(tied_to_org: bool, sqlite: bool) -> Any:
    """The oldest queued tasks of a fleet; on PostgreSQL, rows others hold are skipped."""
    statement = (
        select(_T.id, _T.job_id, _T.org, _T.fleet)
        .where(_T.status == _QUEUED, _T.fleet == bindparam("p_fleet"))
        .order_by(_T.queued_at, _T.id)
        .limit(bindparam("p_window", type_=Integer))
    )
    if tied_to_org:
        statement = statement.where(_T.org == bindparam("p_org"))
    if not sqlite:
        statement = statement.with_for_update(skip_locked=True, of=queue_tasks)
    return statement


@functools.lru_cache(maxsize=2)
def _claim_statement(sqlite: bool) -> Any:
    """Claim a batch in one statement; each row gets a fresh random token from the
    database (PostgreSQL's gen_random_uuid, SQLite's randomblob)."""
    if sqlite:
        token: Any = func.lower(func.hex(func.randomblob(16)))
    else:
        token = func.replace(cast(func.gen_random_uuid(), String), "-", "")
    at = bindparam("p_at", type_=Float)
    return (
        update(queue_tasks)
        .where(_T.id.in_(bindparam("p_ids", expanding=True)), _T.status == _QUEUED)
        .values(
            status=_RUNNING,
            runner_id=bindparam("p_runner", type_=String),
            lease_token=token,
            leased_at=at,
            last_renewed_at=None,
            progress_at=at,
            attempt=_T.attempt + 1,
            version=_T.version + 1,
            updated_at=at,
        )
        .returning(*queue_tasks.c)
    )


@functools.lru_cache(maxsize=16)
def _end_statement(status: str, sqlite: bool) -> Any:
    """The end of a held task, built once: building it costs more than running it.

    On PostgreSQL the move, its agent-minutes, its timeline entry and the
    removal of the task's token are one statement (data-modifying CTEs), so
    ending a task is one round trip.
    """
    at = bindparam("p_at", type_=Float)
    moved = (
        update(queue_tasks)
        .where(
            _T.id == bindparam("p_id"),
            _T.lease_token == bindparam("p_token"),
            _T.status == _RUNNING,
            func.coalesce(_T.last_renewed_at, _T.leased_at) + _T.lease_s > at,
        )
        .values(
            status=status,
            lease_token=None,
            finished_at=at,
            updated_at=at,
            exit_code=bindparam("p_exit", type_=Integer),
            failure_reason=bindparam("p_reason", type_=String),
            failure_fingerprint=bindparam("p_fingerprint", type_=String),
            version=_T.version + 1,
        )
        .returning(*queue_tasks.c)
    )
    if sqlite:
        return moved
    from sqlalchemy.dialects.postgresql import insert as pg_insert

    task = moved.cte("moved")
    spent = pg_insert(queue_spend).from_select(
        ["org", "month", "agent_seconds"],
        select(task.c.org, bindparam("p_month", type_=String), at - task.c.leased_at),
    )
    spent = spent.on_conflict_do_update(
        index_elements=["org", "month"],
        set_={"agent_seconds": queue_spend.c.agent_seconds + spent.excluded.agent_seconds},
    )
    logged = insert(queue_events).from_select(
        ["task_id", "job_id", "at", "type", "detail"],
        select(task.c.id, task.c.job_id, at, literal(status, String), task.c.failure_reason),
    )
    revoked = delete(api_tokens).where(api_tokens.c.task_id.in_(select(task.c.id)))
    return select(task).add_cte(spent.cte("spent"), logged.cte("logged"), revoked.cte("revoked"))


def _requeue_values(at: float) -> dict[str, Any]:
    return {
        "status": _QUEUED,
        "runner_id": None,
        "lease_token": None,
        "leased_at": None,
        "last_renewed_at": None,
        "finished_at": None,
        "exit_code": None,
        "failure_reason": None,
        "failure_fingerprint": None,
        "updated_at": at,
        "version": _T.version + 1,
    }
