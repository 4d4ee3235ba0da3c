"""Tables of the job queue (``queue/``), on the shared ``metadata``.

A task row carries its lease: the runner, a fresh token per lease, when it
was leased and last renewed. Every move of a leased task is one conditional
``UPDATE ... WHERE id = ? AND lease_token = ?``. Timeline events are
append-only. Agent-minutes are kept per org and month, so deleting a job never
gives its minutes back.
"""

from __future__ import annotations

import sqlalchemy as sa

from watchkeeper.store.schema.columns import epoch, metadata

queue_jobs = sa.Table(
    "queue_jobs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("title", sa.String(500), nullable=False),
    sa.Column("org", sa.String(100), nullable=False),
    sa.Column("fleet", sa.String(100), nullable=False),
    sa.Column("payload", sa.JSON, nullable=False),
    sa.Column("submitted_by", sa.String(200), nullable=False),
    epoch("created_at", nullable=False),
    # Where the job came from (``github:OWNER/REPO#N``), to say there how it ended.
    sa.Column("origin", sa.String(300), nullable=True),
    sa.Index(None, "org"),
    sa.Index(None, "fleet"),
    sa.Index(None, "created_at"),
)

#: The statuses of unfinished tasks; on PostgreSQL the lease index holds only these rows.
UNFINISHED_PREDICATE = "status IN ('queued', 'running', 'stuck')"

queue_tasks = sa.Table(
    "queue_tasks",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column(
        "job_id", sa.String(64), sa.ForeignKey("queue_jobs.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("seq", sa.Integer, nullable=False),
    # Copied from the job: leasing filters on them without a join.
    sa.Column("org", sa.String(100), nullable=False),
    sa.Column("fleet", sa.String(100), nullable=False),
    sa.Column("payload", sa.JSON, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("rerunnable", sa.Boolean, nullable=False, default=True, server_default=sa.true()),
    sa.Column("attempt", sa.Integer, nullable=False, default=0),
    sa.Column("max_attempts", sa.Integer, nullable=False),
    sa.Column("version", sa.Integer, nullable=False, default=1),
    sa.Column("lease_s", sa.Float, nullable=False),
    sa.Column("runner_id", sa.String(64), nullable=True),
    sa.Column("lease_token", sa.String(64), nullable=True),
    epoch("queued_at", nullable=False),
    epoch("leased_at"),
    epoch("last_renewed_at"),
    epoch("progress_at"),
    epoch("finished_at"),
    epoch("updated_at", nullable=False),
    sa.Column("step", sa.String(2000), nullable=True),
    sa.Column("exit_code", sa.Integer, nullable=True),
    sa.Column("failure_reason", sa.String(2000), nullable=True),
    sa.Column("failure_fingerprint", sa.String(200), nullable=True),
    # Free-form marks on the task, e.g. ``interrupted_at`` (``queue/reconcile.py``).
    sa.Column("metadata", sa.JSON, nullable=True),
    # Matches the lease's filter and order, so a page is read without sorting the queue.
    # On PostgreSQL the status, runner and finish indexes are partial: a finished task
    # leaves the first two, an unfinished one is in no third, so a task's two moves
    # (claimed, ended) write three fewer index entries each. SQLite plans a partial index
    # only for literal filters, and the store binds its values, so there they stay whole.
    sa.Index(
        None, "status", "fleet", "queued_at", "id", postgresql_where=sa.text(UNFINISHED_PREDICATE)
    ),
    sa.Index(None, "job_id"),
    sa.Index(None, "runner_id", postgresql_where=sa.text("status = 'running'")),
    sa.Index(None, "finished_at", postgresql_where=sa.text("finished_at IS NOT NULL")),
)

queue_runners = sa.Table(
    "queue_runners",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(200), nullable=True),
    sa.Column("fleet", sa.String(100), nullable=False),
    sa.Column("org", sa.String(100), nullable=True),
    sa.Column("capacity", sa.Integer, nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    epoch("registered_at", nullable=False),
    epoch("heartbeat_at", nullable=False),
    epoch("stopped_at"),
    sa.Index(None, "fleet"),
)

# The last cold start of a runner per (org, fleet): provisioning, or failed with its reason.
queue_provisions = sa.Table(
    "queue_provisions",
    metadata,
    sa.Column("org", sa.String(100), primary_key=True),
    sa.Column("fleet", sa.String(100), primary_key=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("reason", sa.String(2000), nullable=True),
    epoch("started_at", nullable=False),
    epoch("updated_at", nullable=False),
)

# An org's month is spread over a few rows (``slot``): completions of one org running
# at once each add to a row no other holds, and every reader sums the slots.
queue_spend = sa.Table(
    "queue_spend",
    metadata,
    sa.Column("org", sa.String(100), primary_key=True),
    sa.Column("month", sa.String(7), primary_key=True),
    sa.Column(
        "slot", sa.Integer, primary_key=True, autoincrement=False, default=0, server_default="0"
    ),
    sa.Column("agent_seconds", sa.Float, nullable=False, default=0.0),
)

queue_events = sa.Table(
    "queue_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.String(64), nullable=False),
    # No foreign key: checking one locks the job's row for every entry written, and
    # deleting a job deletes its entries itself (``control.py``).
    sa.Column("job_id", sa.String(64), nullable=False),
    epoch("at", nullable=False),
    sa.Column("type", sa.String(32), nullable=False),
    sa.Column("detail", sa.String(2000), nullable=True),
    sa.Index(None, "job_id"),
)

# The redacted tail of what a task's command printed, sent by its runner when it ended.
# A table of its own so that reading tasks never drags their output along.
queue_task_output = sa.Table(
    "queue_task_output",
    metadata,
    sa.Column(
        "task_id",
        sa.String(64),
        sa.ForeignKey("queue_tasks.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("tail", sa.Text, nullable=False),
    epoch("recorded_at", nullable=False),
)

# The output a runner ships while its task runs: one row for the run being kept (a
# new lease starts afresh), its pieces in a table of their own, in log order.
queue_task_shipped = sa.Table(
    "queue_task_shipped",
    metadata,
    sa.Column(
        "task_id",
        sa.String(64),
        sa.ForeignKey("queue_tasks.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("lease_token", sa.String(64), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=True),
    sa.Column("host", sa.String(255), nullable=True),
    sa.Column("next_offset", sa.BigInteger, nullable=False),
    sa.Column("kept_bytes", sa.BigInteger, nullable=False),
    sa.Column("cut", sa.Boolean, nullable=False),
    sa.Column("complete", sa.Boolean, nullable=False),
    epoch("updated_at", nullable=False),
)

queue_task_shipped_pieces = sa.Table(
    "queue_task_shipped_pieces",
    metadata,
    sa.Column(
        "task_id",
        sa.String(64),
        sa.ForeignKey("queue_tasks.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("offset", sa.BigInteger, primary_key=True),
    sa.Column("text", sa.Text, nullable=False),
)

# Posting the end of a job that came from GitHub: ``waiting`` -> ``firing`` (claimed, one
# conditional update) -> ``fired`` | ``failed``; a claim left ``firing`` is ``maybe_fired``.
queue_job_results = sa.Table(
    "queue_job_results",
    metadata,
    sa.Column(
        "job_id",
        sa.String(64),
        sa.ForeignKey("queue_jobs.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("state", sa.String(16), nullable=False),
    # Which end was claimed: the last task and its version then.
    sa.Column("end_key", sa.String(100), nullable=True),
    epoch("claimed_at"),
    epoch("settled_at"),
    sa.Column("error", sa.String(2000), nullable=True),
    sa.Index(None, "state"),
)
