"""Tables of the job queue (``queue/``), on the shared ``metadata``.

A task row carries its lease: the runner, a fresh token per lease, when it
was leased and last renewed. Every move of a leased task is one conditional
``UPDATE ... WHERE id = ? AND lease_token = ?``. Timeline events are
append-only. Agent-minutes are kept per org and month, so deleting a job never
gives its minutes back.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    Index,
    String,
    Table,
)

from watchkeeper.store import schema_columns as col

queue_jobs = Table(
    "queue_jobs",
    col.metadata,
    col.key("id", 64),
    col.string("title", 500, nullable=False),
    col.string("org", 100, nullable=False),
    col.string("fleet", 100, nullable=False),
    col.json("payload", nullable=False),
    col.string("submitted_by", 200, nullable=False),
    col.epoch("created_at", nullable=False),
    Index(None, "org"),
    Index(None, "fleet"),
    Index(None, "created_at"),
)

queue_tasks = Table(
    "queue_tasks",
    col.metadata,
    col.key("id", 64),
    col.cascade("job_id", "queue_jobs", String(64)),
    col.integer("seq", nullable=False),
    # Copied from the job: leasing filters on them without a join.
    col.string("org", 100, nullable=False),
    col.string("fleet", 100, nullable=False),
    col.json("payload", nullable=False),
    col.string("status", 16, nullable=False),
    col.flag("rerunnable", default=True),
    col.integer("attempt", nullable=False, default=0),
    col.integer("max_attempts", nullable=False),
    col.integer("version", nullable=False, default=1),
    col.number("lease_s", nullable=False),
    col.string("runner_id", 64),
    col.string("lease_token", 64),
    col.epoch("queued_at", nullable=False),
    col.epoch("leased_at"),
    col.epoch("last_renewed_at"),
    col.epoch("progress_at"),
    col.epoch("finished_at"),
    col.epoch("updated_at", nullable=False),
    col.string("step", 2000),
    col.integer("exit_code"),
    col.string("failure_reason", 2000),
    col.string("failure_fingerprint", 200),
    # Free-form marks on the task, e.g. ``interrupted_at`` (``queue/reconcile.py``).
    col.json("metadata"),
    Index(None, "status", "fleet", "queued_at"),
    Index(None, "job_id"),
    Index(None, "runner_id"),
    Index(None, "finished_at"),
)

queue_runners = Table(
    "queue_runners",
    col.metadata,
    col.key("id", 64),
    col.string("name", 200),
    col.string("fleet", 100, nullable=False),
    col.string("org", 100),
    col.integer("capacity", nullable=False),
    col.string("host", 255, nullable=False),
    col.integer("pid", nullable=False),
    col.epoch("registered_at", nullable=False),
    col.epoch("heartbeat_at", nullable=False),
    col.epoch("stopped_at"),
    Index(None, "fleet"),
)

# The last cold start of a runner per (org, fleet): provisioning, or failed with its reason.
queue_provisions = Table(
    "queue_provisions",
    col.metadata,
    col.key("org", 100),
    col.key("fleet", 100),
    col.string("state", 16, nullable=False),
    col.string("reason", 2000),
    col.epoch("started_at", nullable=False),
    col.epoch("updated_at", nullable=False),
)

queue_spend = Table(
    "queue_spend",
    col.metadata,
    col.key("org", 100),
    col.key("month", 7),
    Column("agent_seconds", Float, nullable=False, default=0.0),
)

queue_events = Table(
    "queue_events",
    col.metadata,
    col.serial_id(),
    col.string("task_id", 64, nullable=False),
    col.cascade("job_id", "queue_jobs", String(64)),
    col.epoch("at", nullable=False),
    col.string("type", 32, nullable=False),
    col.string("detail", 2000),
    Index(None, "job_id"),
)
