"""Jobs and their tasks: submit, resume, and every read of them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, func, insert, select

from watchkeeper.clock import to_epoch
from watchkeeper.errors import Conflict, NotFound
from watchkeeper.records.queue import Event, Job, NewJob, Task, TaskStatus, UnreadableTask
from watchkeeper.store.base import record_from_row
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.ledger import log_events
from watchkeeper.store.queue.rows import (
    ACTIVE,
    QUEUED,
    J,
    T,
    columns_of,
    found,
    new_id,
    task_from_row,
    unreadable_task,
)
from watchkeeper.store.schema.queue import (
    queue_events,
    queue_job_results,
    queue_jobs,
    queue_tasks,
)
from watchkeeper.store.unreadable import (
    UNREADABLE,
    each_readable,
    read_or_refuse,
    tell_unreadable,
)


class Jobs(Part):
    """Submits jobs and reads them back."""

    def submit(self, new: NewJob, now: datetime) -> Job:
        """Record a job and its first task, queued."""
        at = to_epoch(now)
        job_id = new_id("j")
        with self._write("submitting a job") as conn:
            conn.execute(insert(queue_jobs).values(_job_values(new, job_id, at)))
            _add_task(conn, job_id, 0, new, new.payload, at)
            if new.origin is not None:
                conn.execute(insert(queue_job_results).values(job_id=job_id, state="waiting"))
        return self.job(job_id)

    def resume(self, job_id: str, payload: dict[str, Any] | None, now: datetime) -> Task:
        """Add a continuation task to a job whose tasks have all ended."""
        at = to_epoch(now)
        with self._write("resuming a job") as conn:
            job = found(conn, select(queue_jobs).where(J.id == job_id), f"no job {job_id!r}")
            last = conn.execute(
                select(queue_tasks).where(T.job_id == job_id).order_by(T.seq.desc()).limit(1)
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
            task_id = _add_task(conn, job_id, last.seq + 1, template, payload or job.payload, at)
        return self.task(task_id)

    def submit_many(self, news: Sequence[NewJob], now: datetime) -> list[str]:
        """Record many jobs at once (benchmarks, imports); returns their first tasks' ids."""
        at = to_epoch(now)
        jobs: list[dict[str, Any]] = []
        tasks: list[dict[str, Any]] = []
        for new in news:
            job_id = new_id("j")
            jobs.append(_job_values(new, job_id, at))
            tasks.append(_task_values(new, job_id, new_id("t"), 0, new.payload, at))
        with self._write("submitting jobs") as conn:
            if jobs:
                conn.execute(insert(queue_jobs), jobs)
                conn.execute(insert(queue_tasks), tasks)
            journal = [{"job_id": job["id"], "state": "waiting"} for job in jobs if job["origin"]]
            if journal:
                conn.execute(insert(queue_job_results), journal)
        return [str(task["id"]) for task in tasks]

    def job(self, job_id: str) -> Job:
        """One job with its tasks, or :class:`NotFound`; :class:`StoredDataUnreadable`
        when the job's own row cannot be read (a task's that cannot is named in
        ``unreadable_tasks``)."""
        with self._read("reading a job") as conn:
            found, _ = _jobs(conn, select(queue_jobs).where(J.id == job_id), refuse=True)
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
        text: str | None = None,
    ) -> list[Job]:
        """Jobs newest first; ``active`` keeps jobs with (or without) an unfinished task.

        ``text`` (ASCII) keeps the jobs whose id, title or submitter may contain it,
        ignoring case: a superset of those that do, for the caller's own rule to decide.
        """
        return self.jobs_page(
            fleet=fleet, org=org, active=active, limit=limit, offset=offset, text=text
        )[0]

    def jobs_page(
        self,
        *,
        fleet: str | None = None,
        org: str | None = None,
        active: bool | None = None,
        limit: int = 200,
        offset: int = 0,
        text: str | None = None,
    ) -> tuple[list[Job], int]:
        """:meth:`jobs`, and how many rows the page read: more than the jobs when a job's
        row cannot be read (left out), so a reader paging on knows where the next starts."""
        statement = select(queue_jobs).order_by(J.created_at.desc(), J.id)
        if text:
            statement = statement.where(_may_contain(text, sqlite=self._sqlite))
        if fleet is not None:
            statement = statement.where(J.fleet == fleet)
        if org is not None:
            statement = statement.where(J.org == org)
        if active is not None:
            unfinished = select(T.job_id).where(T.status.in_(ACTIVE)).scalar_subquery()
            statement = statement.where(J.id.in_(unfinished) if active else J.id.not_in(unfinished))
        statement = statement.limit(limit).offset(offset)
        with self._read("listing jobs") as conn:
            return _jobs(conn, statement)

    def task(self, task_id: str) -> Task:
        """One task, or :class:`NotFound` (:class:`StoredDataUnreadable` when its row
        cannot be read)."""
        with self._read("reading a task") as conn:
            row = found(conn, select(queue_tasks).where(T.id == task_id), f"no task {task_id!r}")
        return read_or_refuse("queue_tasks", row, task_from_row)

    def title_of(self, task_id: str) -> str:
        """The title of a task's job."""
        statement = select(J.title).join(queue_tasks, T.job_id == J.id).where(T.id == task_id)
        with self._read("reading a task") as conn:
            return str(found(conn, statement, f"no task {task_id!r}").title)

    def events(self, job_id: str) -> list[Event]:
        """A job's timeline, oldest first."""
        statement = (
            select(queue_events).where(queue_events.c.job_id == job_id).order_by(queue_events.c.id)
        )
        with self._read("reading a timeline") as conn:
            return list(each_readable("queue_events", conn.execute(statement), _event))

    def for_judging(
        self, finished_since: datetime, task_id: str | None = None
    ) -> list[tuple[Task, str]]:
        """Unfinished tasks and those that ended after ``finished_since``, with job titles."""
        since = to_epoch(finished_since)
        statement = select(queue_tasks, J.title.label("job_title")).join(
            queue_jobs, J.id == T.job_id
        )
        if task_id is not None:
            statement = statement.where(T.id == task_id)
        else:
            statement = statement.where(T.status.in_(ACTIVE) | (T.finished_at >= since))
        with self._read("reading tasks") as conn:
            return list(each_readable("queue_tasks", conn.execute(statement), _with_title))


def _may_contain(text: str, *, sqlite: bool) -> ColumnElement[bool]:
    """Whether a job's id, title or submitter may hold ``text`` (ASCII), in any case.

    Lowering is exact for ASCII on both databases; a row holding anything else
    (where case folding may turn ß into ss) is kept for the caller to judge.
    """
    if not text.isascii():
        raise ValueError("only an ASCII text can be looked for by the database")
    haystack = J.id + " " + J.title + " " + J.submitted_by
    unusual = haystack.op("GLOB")("*[^ -~]*") if sqlite else haystack.op("~")("[^ -~]")
    return func.lower(haystack).contains(text.lower(), autoescape=True) | unusual


def _add_task(
    conn: Connection, job_id: str, seq: int, new: NewJob, payload: dict[str, Any], at: float
) -> str:
    task_id = new_id("t")
    conn.execute(insert(queue_tasks).values(_task_values(new, job_id, task_id, seq, payload, at)))
    log_events(conn, [(task_id, job_id)], at, "queued", None)
    return task_id


def _job_values(new: NewJob, job_id: str, at: float) -> dict[str, Any]:
    """The row of a new job."""
    return {"id": job_id, "created_at": at, **columns_of(new, queue_jobs)}


def _task_values(
    new: NewJob, job_id: str, task_id: str, seq: int, payload: dict[str, Any], at: float
) -> dict[str, Any]:
    """The row of a new task of ``job_id``, queued with fresh attempts."""
    return columns_of(new, queue_tasks) | {
        "id": task_id,
        "job_id": job_id,
        "seq": seq,
        "payload": payload,
        "status": QUEUED,
        "attempt": 0,
        "version": 1,
        "queued_at": at,
        "updated_at": at,
    }


def _jobs(conn: Connection, statement: Any, *, refuse: bool = False) -> tuple[list[Job], int]:
    """The jobs ``statement`` reads, with their tasks, and how many rows it read. A job
    row that cannot be read is left out (logged once), or refused with ``refuse``; a task
    row that cannot be read is left out of its job's tasks, what can be read of it kept in
    ``unreadable``."""
    rows = conn.execute(statement).all()
    if not rows:
        return [], 0
    ids = [row.id for row in rows]
    tasks: dict[str, list[Task]] = {job_id: [] for job_id in ids}
    odd: dict[str, list[UnreadableTask]] = {job_id: [] for job_id in ids}
    for row in conn.execute(select(queue_tasks).where(T.job_id.in_(ids)).order_by(T.job_id, T.seq)):
        try:
            tasks[row.job_id].append(task_from_row(row))
        except UNREADABLE as exc:
            tell_unreadable("queue_tasks", str(row.id), exc, left_out=True)
            odd[row.job_id].append(unreadable_task(row, exc))

    def job_of(row: Any) -> Job:
        return record_from_row(
            Job,
            row,
            times=("created_at",),
            check=True,
            tasks=tuple(tasks[row.id]),
            unreadable=tuple(odd[row.id]),
        )

    if refuse:
        return [read_or_refuse("queue_jobs", row, job_of) for row in rows], len(rows)
    return list(each_readable("queue_jobs", rows, job_of)), len(rows)


def _event(row: Any) -> Event:
    return record_from_row(Event, row, times=("at",), check=True)


def _with_title(row: Any) -> tuple[Task, str]:
    return task_from_row(row), str(row.job_title)
