"""Leases: take queued tasks for a runner, renew them, and end them with an outcome.

Leasing is one write transaction (``BEGIN IMMEDIATE`` on SQLite, which holds
the write lock). The runner asking is alive: the lease moves its heartbeat, so
a runner slow to its first lease is not refused as offline. The fleet's queued
tasks are read oldest first, page after page, until the runner has what it
asked for or the queue is exhausted: no fixed window, so a backlog the caps
block never hides a task behind it, and the lease takes exactly the tasks the
blocked reasons call leasable. The lease
rule passed in by the caller judges each; on PostgreSQL an admitted task's row
is then locked alone with ``FOR UPDATE SKIP LOCKED``, so a lease holds only
the rows it takes and runners leasing together share the queue out. When no
capped org is in play the first read locks as it reads, as many rows as the
lease wants (one round trip when the rule admits them all; a refused one stays
locked, passed over by other leases, until this one commits). The
chosen tasks are claimed with ``UPDATE ... WHERE status = 'queued'
RETURNING``; a claimed row that cannot be read back is set aside as failed
before the commit (``setaside.py``) and the lease claims past it. Every later
move of a leased task is ``UPDATE ... WHERE id = ? AND lease_token = ?`` and the
lease still live: zero rows means the lease is gone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, update

from watchkeeper.clock import to_epoch
from watchkeeper.errors import Conflict
from watchkeeper.records.queue import Lease, Runner, Task, TaskStatus
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.ends import End, end_within
from watchkeeper.store.queue.ledger import add_spend, log_events
from watchkeeper.store.queue.markers import INTERRUPTED
from watchkeeper.store.queue.onepass import RuleRefused, pass_in_one
from watchkeeper.store.queue.picking import Admit, Picker
from watchkeeper.store.queue.rows import (
    R,
    T,
    found,
    held,
    month_of,
    runner_from_row,
    task_from_row,
)
from watchkeeper.store.queue.setaside import read_claimed, set_aside
from watchkeeper.store.queue.statements import (
    RUNNER_WITH_LOAD,
    claim_statement,
    end_statement,
)
from watchkeeper.store.schema.queue import queue_runners, queue_tasks


class Pass(NamedTuple):
    """What a runner's pass did: its outcomes (``None`` for a lost lease), its leases, the
    leased tasks a restart had marked interrupted, and the runner as read before this pass
    beat for it (``None`` when nothing was leased for: a pass of outcomes only)."""

    ended: list[Task | None]
    leases: list[Lease]
    marked: set[str]
    runner: Runner | None


class Leases(Part):
    """A runner's side of the queue: lease, renew, complete, fail."""

    def lease(
        self,
        runner_id: str,
        now: datetime,
        *,
        limit: int,
        admit: Admit,
        load_needed: Callable[[str], bool],
        page: int = 256,
        caps_possible: bool = True,
        beat_before: datetime | None = None,
    ) -> list[Lease]:
        """Lease up to ``limit`` queued tasks of the runner's fleet that ``admit`` allows.

        Every queued task of the fleet is a candidate, read ``page`` at a time,
        oldest first; rows other leases hold are passed over. The loads
        ``admit`` reads are counted in the same transaction, after every capped
        org with queued tasks is locked (on PostgreSQL), so two runners never
        both take the last slot of an org.
        """
        return self.lease_marked(
            runner_id,
            now,
            limit=limit,
            admit=admit,
            load_needed=load_needed,
            page=page,
            caps_possible=caps_possible,
            beat_before=beat_before,
        )[0]

    def lease_marked(
        self,
        runner_id: str,
        now: datetime,
        *,
        limit: int,
        admit: Admit,
        load_needed: Callable[[str], bool],
        page: int = 256,
        caps_possible: bool = True,
        beat_before: datetime | None = None,
    ) -> tuple[list[Lease], set[str]]:
        """:meth:`lease`, and the ids of the leased tasks a restart had marked
        interrupted (read from the claimed rows: no second read for the usual none).

        ``caps_possible=False`` (no org has a cap) spares reading the queued orgs. A
        lease is the runner's proof of life: its heartbeat becomes ``now`` when older
        than ``beat_before`` (always, without it).
        """
        with self._write("leasing tasks") as conn:
            leases, marked, _ = self._lease_within(
                conn, runner_id, now, limit, admit, load_needed, page, caps_possible, beat_before
            )
            return leases, marked

    def end_and_lease(
        self,
        ends: Sequence[End],
        runner_id: str,
        now: datetime,
        *,
        limit: int,
        admit: Admit,
        load_needed: Callable[[str], bool],
        page: int = 256,
        caps_possible: bool = True,
        beat_before: datetime | None = None,
    ) -> Pass:
        """Record ``ends`` (as :meth:`Ends.end_many`), then :meth:`lease_marked` up to
        ``limit`` tasks (none for 0), in one transaction: one commit for a runner's
        pass. The lease counts the slots the outcomes freed. All commit or none: when
        the lease is refused (the runner is unknown or stopped) no outcome is recorded.
        """
        action = f"recording {len(ends)} task outcome(s) and leasing" if ends else "leasing tasks"
        if limit > 0 and not self._sqlite and not caps_possible:
            try:
                with self._write(action) as conn:
                    done = pass_in_one(
                        conn,
                        ends,
                        runner_id,
                        now,
                        limit=limit,
                        admit=admit,
                        load_needed=load_needed,
                        marked=_marked,
                        beat_before=beat_before or now,
                    )
                    leases, marked = done.leases, done.marked
                    if done.set_aside and len(leases) < limit:
                        # Rows set aside took slots the statement counted: claim past them.
                        more, more_marked = self._pick_and_claim(
                            conn,
                            done.runner,
                            now,
                            limit - len(leases),
                            admit,
                            load_needed,
                            page,
                            caps_possible=False,
                        )
                        leases, marked = leases + more, marked | more_marked
                    return Pass(done.ended, leases, marked, done.seen)
            except RuleRefused:
                pass  # rolled back: the general path below judges task by task
        with self._write(action) as conn:
            ended = end_within(conn, self._sqlite, ends, now)
            if limit <= 0:
                return Pass(ended, [], set(), None)
            # Read after the outcomes, so the runner's count no longer holds the ended tasks.
            leases, marked, seen = self._lease_within(
                conn, runner_id, now, limit, admit, load_needed, page, caps_possible, beat_before
            )
            return Pass(ended, leases, marked, seen)

    def _lease_within(
        self,
        conn: Connection,
        runner_id: str,
        now: datetime,
        limit: int,
        admit: Admit,
        load_needed: Callable[[str], bool],
        page: int,
        caps_possible: bool,
        beat_before: datetime | None,
    ) -> tuple[list[Lease], set[str], Runner]:
        """The lease, the marked ids, and the runner as it was before this lease beat for it."""
        seen = _serving_runner(conn, runner_id)
        runner = _beat(conn, seen, now, beat_before or now)
        leases, marked = self._pick_and_claim(
            conn, runner, now, limit, admit, load_needed, page, caps_possible
        )
        return leases, marked, seen

    def _pick_and_claim(
        self,
        conn: Connection,
        runner: Runner,
        now: datetime,
        limit: int,
        admit: Admit,
        load_needed: Callable[[str], bool],
        page: int,
        caps_possible: bool,
    ) -> tuple[list[Lease], set[str]]:
        leases: list[Lease] = []
        marked: set[str] = set()
        while len(leases) < limit:
            picker = Picker(conn, runner, admit, now, lock_rows=not self._sqlite)
            chosen = picker.pick(
                limit - len(leases), load_needed, page, caps_possible=caps_possible
            )
            if not chosen:
                break
            taken, taken_marked, set_aside_count = self._claim(
                conn, runner.id, chosen, to_epoch(now)
            )
            leases += taken
            marked |= taken_marked
            if not set_aside_count:
                break
            # Rows set aside are no longer queued: the lease goes on past them.
            runner = dataclasses.replace(runner, running=runner.running + len(taken))
        return leases, marked

    def _claim(
        self, conn: Connection, runner_id: str, task_ids: list[str], at: float
    ) -> tuple[list[Lease], set[str], int]:
        """The leases of ``task_ids``, the marked ones among them, and how many claimed
        rows could not be read and were set aside instead."""
        params: dict[str, Any] = {"p_ids": task_ids, "p_runner": runner_id, "p_at": at}
        order = {task_id: index for index, task_id in enumerate(task_ids)}
        rows = conn.execute(claim_statement(self._sqlite), params).all()
        leases, odd = read_claimed(rows)
        if self._sqlite:  # PostgreSQL's claim writes the timeline entries itself
            taken = [(lease.task.id, lease.task.job_id) for lease in leases]
            log_events(conn, taken, at, "leased", runner_id)
        if odd:
            set_aside(conn, odd, at)
        leased = {lease.task.id for lease in leases}
        marked = {row.id for row in rows if row.id in leased and _marked(row._mapping["metadata"])}
        return sorted(leases, key=lambda lease: order[lease.task.id]), marked, len(odd)

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
        at = to_epoch(now)
        values: dict[str, Any] = {"last_renewed_at": at, "updated_at": at}
        if progressed or step is not None:
            values.update(progress_at=at, version=T.version + 1)
        if step is not None:
            values["step"] = step[:2000]
        with self._write("renewing a lease") as conn:
            row = conn.execute(
                update(queue_tasks)
                .where(held(task_id, token, at))
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
        at = to_epoch(now)
        params = {
            "p_id": task_id,
            "p_token": token,
            "p_at": at,
            "p_exit": exit_code,
            "p_reason": None if reason is None else reason[:2000],
            "p_fingerprint": fingerprint,
            "p_month": month_of(now),
        }
        statement = end_statement(status.value, self._sqlite)
        with self._write(f"recording a task {status.value}") as conn:
            row = conn.execute(statement, params).first()
            if row is None:
                return None
            if self._sqlite:  # PostgreSQL did these in the same statement
                add_spend(conn, self._sqlite, row.org, now, at - row.leased_at)
                log_events(conn, [(row.id, row.job_id)], at, status.value, reason)
        return task_from_row(row)


def _marked(meta: Any) -> bool:
    return isinstance(meta, dict) and bool(meta.get(INTERRUPTED))


def _beat(conn: Connection, runner: Runner, now: datetime, beat_before: datetime) -> Runner:
    """The runner asking for work is alive now: its heartbeat moves to ``now`` when older
    than ``beat_before`` (a lease every second need not write it every second)."""
    if runner.heartbeat_at < beat_before:
        at = to_epoch(now)
        conn.execute(update(queue_runners).where(R.id == runner.id).values(heartbeat_at=at))
    return dataclasses.replace(runner, heartbeat_at=max(runner.heartbeat_at, now))


def _serving_runner(conn: Connection, runner_id: str) -> Runner:
    missing = f"no runner {runner_id!r}: register first"
    row = found(conn, RUNNER_WITH_LOAD, missing, {"p_runner": runner_id})
    if row.stopped_at is not None:
        raise Conflict(f"runner {runner_id} has stopped: register again to serve")
    return runner_from_row(row, int(row.running))
