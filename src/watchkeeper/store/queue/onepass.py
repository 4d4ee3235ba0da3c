"""PostgreSQL, no capped org: a runner's pass (its outcomes, then a lease) in one statement.

The general path of :meth:`Leases.end_and_lease` takes four statements and a
``BEGIN`` for a pass: the outcomes, the runner's row, the locking read and the
claim. With no capped org the lease rule depends on the runner alone (its
fleet, its org, its heartbeat and its free slots), so one statement can do it
all: record the outcomes (each fenced by its lease), move the runner's
heartbeat (a lease is proof of life), count what the runner still holds once
they are recorded, lock the oldest queued rows of its fleet
no other lease holds (``FOR UPDATE SKIP LOCKED``) up to its free slots, claim
them and write every timeline entry. Task tokens are derived from the new lease
tokens afterwards (``store/tokens.py``): nothing is written for them.

The statement only counts slots; the rule still decides. Before the commit
each claimed task is judged by the lease rule against the runner row the same
statement read, counting what the lease adds as it goes. When the rule refuses
any (an offline runner, say), the transaction is rolled back and the pass is
made again on the general path, so what is leased is always what the rule
admits. An unknown or stopped runner is refused as on the general path: the
rollback leaves its outcomes unrecorded.

The claimed rows are read back from the statement's answer before the commit
too: one that cannot be read is set aside as failed in the same transaction
(``setaside.py``), and the caller claims past it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection

from watchkeeper.clock import to_epoch
from watchkeeper.errors import Conflict, NotFound, WatchkeeperError
from watchkeeper.records.queue import Lease, OrgLoad, QueuedTask, Runner, Task
from watchkeeper.store.queue.ends import End, batch_params
from watchkeeper.store.queue.ledger import SPEND_SLOTS
from watchkeeper.store.queue.rows import runner_from_row, task_from_row
from watchkeeper.store.queue.setaside import read_claimed, set_aside

Admit = Callable[[QueuedTask, Runner, OrgLoad], bool]


class RuleRefused(WatchkeeperError):
    """The lease rule refused a task the statement claimed: roll back, take the general path."""


class OnePass(NamedTuple):
    """What a pass in one statement did: the outcomes (``None`` for a lost lease), the
    leases, the leased tasks a restart had marked interrupted, the runner as read before
    the pass beat for it and as it is now, and how many claimed rows were set aside."""

    ended: list[Task | None]
    leases: list[Lease]
    marked: set[str]
    seen: Runner
    runner: Runner
    set_aside: int


# Every data-modifying part sees the tables as they were before the statement: the
# runner's count is read from before and the outcomes it recorded are taken off it.
END_AND_LEASE_SQL = """
WITH given AS (
    SELECT * FROM unnest(
        %(ids)s::varchar[], %(tokens)s::varchar[], %(statuses)s::varchar[],
        %(exits)s::integer[], %(reasons)s::varchar[], %(fingerprints)s::varchar[]
    ) AS g(id, token, status, exit_code, reason, fingerprint)
), moved AS (
    UPDATE queue_tasks t
    SET status = g.status, lease_token = NULL, finished_at = %(at)s, updated_at = %(at)s,
        exit_code = g.exit_code, failure_reason = g.reason,
        failure_fingerprint = g.fingerprint, version = t.version + 1
    FROM given g
    WHERE t.id = ANY(%(ids)s::varchar[]) AND t.id = g.id AND t.lease_token = g.token
      AND t.status = 'running' AND coalesce(t.last_renewed_at, t.leased_at) + t.lease_s > %(at)s
    RETURNING t.*
), per_org AS (
    SELECT org, sum(%(at)s - leased_at) AS seconds FROM moved GROUP BY org
), spent AS (
    INSERT INTO queue_spend (org, month, slot, agent_seconds)
    SELECT p.org, %(month)s, coalesce(
        (SELECT s FROM generate_series(0, %(slots)s - 1) AS s
         WHERE pg_try_advisory_xact_lock(hashtext('wk-spend:' || p.org), s) LIMIT 1),
        pg_backend_pid() %% %(slots)s), p.seconds
    FROM per_org p
    ON CONFLICT (org, month, slot)
    DO UPDATE SET agent_seconds = queue_spend.agent_seconds + excluded.agent_seconds
), ended_logged AS (
    INSERT INTO queue_events (task_id, job_id, at, type, detail)
    SELECT id, job_id, %(at)s, status, failure_reason FROM moved
), beat AS (
    UPDATE queue_runners SET heartbeat_at = %(at)s
    WHERE id = %(runner)s AND stopped_at IS NULL AND heartbeat_at < %(beat_before)s
), runner AS (
    SELECT r.*,
        (SELECT count(*) FROM queue_tasks t WHERE t.runner_id = r.id AND t.status = 'running')
        - (SELECT count(*) FROM moved m WHERE m.runner_id = r.id) AS running
    FROM queue_runners r WHERE r.id = %(runner)s
), picked AS (
    SELECT id FROM queue_tasks
    WHERE status = 'queued'
      AND fleet = (SELECT fleet FROM runner WHERE stopped_at IS NULL)
      AND ((SELECT org FROM runner) IS NULL OR org = (SELECT org FROM runner))
    ORDER BY queued_at, id
    LIMIT greatest(0, least(%(limit)s, (SELECT capacity - running FROM runner)))
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE queue_tasks t
    SET status = 'running', runner_id = %(runner)s,
        lease_token = replace(gen_random_uuid()::text, '-', ''), leased_at = %(at)s,
        last_renewed_at = NULL, progress_at = %(at)s, attempt = t.attempt + 1,
        version = t.version + 1, updated_at = %(at)s
    WHERE t.id = ANY(ARRAY(SELECT id FROM picked)) AND t.status = 'queued'
    RETURNING t.*
), leased_logged AS (
    INSERT INTO queue_events (task_id, job_id, at, type, detail)
    SELECT id, job_id, %(at)s, 'leased', runner_id FROM claimed
)
SELECT
    (SELECT row_to_json(r) FROM runner r) AS runner,
    (SELECT coalesce(json_agg(m), '[]') FROM moved m) AS ended,
    (SELECT coalesce(json_agg(c ORDER BY c.queued_at, c.id), '[]') FROM claimed c) AS claimed
"""


def pass_in_one(
    conn: Connection,
    ends: Sequence[End],
    runner_id: str,
    now: datetime,
    *,
    limit: int,
    admit: Admit,
    load_needed: Callable[[str], bool],
    marked: Callable[[Any], bool],
    beat_before: datetime,
) -> OnePass:
    """Record ``ends`` and lease up to ``limit`` tasks in one statement, inside the
    caller's transaction; :class:`RuleRefused` when the rule refuses a claimed task
    (the caller rolls back and takes the general path). The runner's heartbeat becomes
    ``now`` when older than ``beat_before`` (a lease is proof of life). A claimed row
    that cannot be read is set aside (failed) before the commit, not leased."""
    params = {
        **batch_params(ends, now, ""),
        "runner": runner_id,
        "limit": limit,
        "slots": SPEND_SLOTS,
        "beat_before": to_epoch(beat_before),
    }
    runner_row, ended_rows, claimed_rows = conn.exec_driver_sql(END_AND_LEASE_SQL, params).one()
    if runner_row is None:
        raise NotFound(f"no runner {runner_id!r}: register first")
    if runner_row["stopped_at"] is not None:
        raise Conflict(f"runner {runner_id} has stopped: register again to serve")
    seen = runner_from_row(runner_row, int(runner_row["running"]))
    runner = dataclasses.replace(seen, heartbeat_at=max(seen.heartbeat_at, now))
    for row in claimed_rows:
        task = QueuedTask(row["id"], row["job_id"], row["org"], row["fleet"], False)
        if load_needed(row["org"]) or not admit(task, runner, OrgLoad(row["org"])):
            raise RuleRefused(row["id"])
        runner = dataclasses.replace(runner, running=runner.running + 1)
    leases, odd = read_claimed(claimed_rows)
    if odd:
        set_aside(conn, odd, params["at"])
        runner = dataclasses.replace(runner, running=runner.running - len(odd))
    moved = {row["id"]: task_from_row(row) for row in ended_rows}
    leased = {lease.task.id for lease in leases}
    done = {row["id"] for row in claimed_rows if row["id"] in leased and marked(row["metadata"])}
    ended = [moved.pop(end.task_id, None) for end in ends]
    return OnePass(ended, leases, done, seen, runner, len(odd))
