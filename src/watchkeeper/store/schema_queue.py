"""Tables of the job queue (``queue/``), on the shared ``metadata``.

A task row carries its lease: the runner, a fresh token per lease, when it
was leased and last renewed. Every move of a leased task is one conditional
``UPDATE ... WHERE id = ? AND lease_token = ?``. Timeline events are
append-only. Agent-minutes are kept per org and month, so deleting a job never
gives its minutes back.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    true,
)

from watchkeeper.store.schema import epoch_column as _time
from watchkeeper.store.schema import metadata

queue_jobs = Table(
    "queue_jobs",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("title", String(500), nullable=False),
    Column("org", String(100), nullable=False),
    Column("fleet", String(100), nullable=False),
    Column("payload", JSON, nullable=False),
    Column("submitted_by", String(200), nullable=False),
    _time("created_at", nullable=False),
    Index(None, "org"),
    Index(None, "fleet"),
    Index(None, "created_at"),
)

queue_tasks = Table(
    "queue_tasks",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("job_id", String(64), ForeignKey("queue_jobs.id", ondelete="CASCADE"), nullable=False),
    Column("seq", Integer, nullable=False),
    # Copied from the job: leasing filters on them without a join.
    Column("org", String(100), nullable=False),
    Column("fleet", String(100), nullable=False),
    Column("payload", JSON, nullable=False),
    Column("status", String(16), nullable=False),
    Column("rerunnable", Boolean, nullable=False, default=True, server_default=true()),
    Column("attempt", Integer, nullable=False, default=0),
    Column("max_attempts", Integer, nullable=False),
    Column("version", Integer, nullable=False, default=1),
    Column("lease_s", Float, nullable=False),
    Column("runner_id", String(64), nullable=True),
    Column("lease_token", String(64), nullable=True),
    _time("queued_at", nullable=False),
    _time("leased_at"),
    _time("last_renewed_at"),
    _time("progress_at"),
    _time("finished_at"),
    _time("updated_at", nullable=False),
    Column("step", String(2000), nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("failure_reason", String(2000), nullable=True),
    Column("failure_fingerprint", String(200), nullable=True),
    # Free-form marks on the task, e.g. ``interrupted_at`` (``queue/reconcile.py``).
    Column("metadata", JSON, nullable=True),
    Index(None, "status", "fleet", "queued_at"),
    Index(None, "job_id"),
    Index(None, "runner_id"),
    Index(None, "finished_at"),
)

queue_runners = Table(
    "queue_runners",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(200), nullable=True),
    Column("fleet", String(100), nullable=False),
    Column("org", String(100), nullable=True),
    Column("capacity", Integer, nullable=False),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    _time("registered_at", nullable=False),
    _time("heartbeat_at", nullable=False),
    _time("stopped_at"),
    Index(None, "fleet"),
)

# The last cold start of a runner per (org, fleet): provisioning, or failed with its reason.
queue_provisions = Table(
    "queue_provisions",
    metadata,
    Column("org", String(100), primary_key=True),
    Column("fleet", String(100), primary_key=True),
    Column("state", String(16), nullable=False),
    Column("reason", String(2000), nullable=True),
    _time("started_at", nullable=False),
    _time("updated_at", nullable=False),
)

queue_spend = Table(
    "queue_spend",
    metadata,
    Column("org", String(100), primary_key=True),
    Column("month", String(7), primary_key=True),
    Column("agent_seconds", Float, nullable=False, default=0.0),
)

queue_events = Table(
    "queue_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("task_id", String(64), nullable=False),
    Column("job_id", String(64), ForeignKey("queue_jobs.id", ondelete="CASCADE"), nullable=False),
    _time("at", nullable=False),
    Column("type", String(32), nullable=False),
    Column("detail", String(2000), nullable=True),
    Index(None, "job_id"),
)
