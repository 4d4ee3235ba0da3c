"""The tables, declared once; migrations create them and a test compares the two.

The metadata and the column shapes live in ``schema_columns``; importing this
module registers every aggregate's tables on that metadata.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Column, Index, Table, Text, UniqueConstraint

from watchkeeper.store import schema_columns as col

# Aggregates that keep their tables in modules of their own register them on ``metadata``.
from watchkeeper.store import (  # noqa: F401
    schema_notify,
    schema_procs,
    schema_queue,
    schema_timeline,
    schema_web,
)
from watchkeeper.store.schema_columns import metadata as metadata

push_runs = Table(
    "push_runs",
    metadata,
    col.key("run_id", 200),
    col.string("kind", 63, nullable=False),
    col.string("title", 500, nullable=False),
    col.string("status", 16, nullable=False),
    col.integer("attempt", nullable=False, default=1),
    col.integer("version", nullable=False, default=1),
    col.json("origin"),
    col.string("effects", 16, nullable=False),
    col.number("budget_s"),
    col.number("expected_s"),
    col.number("lease_s", nullable=False),
    col.epoch("started_at", nullable=False),
    col.epoch("progress_at", nullable=False),
    col.epoch("seen_at", nullable=False),
    col.epoch("finished_at"),
    col.epoch("updated_at", nullable=False),
    col.string("step", 2000),
    col.string("failure_reason", 2000),
    col.string("failure_fingerprint", 200),
    Column("detail", Text, nullable=True),
    Index(None, "kind", "status"),
    Index(None, "finished_at"),
)

incidents = Table(
    "incidents",
    metadata,
    col.serial_id(),
    col.string("kind", 63, nullable=False),
    col.string("run_id", 200, nullable=False),
    col.string("condition", 16, nullable=False),
    col.string("fingerprint", 200, nullable=False, default=""),
    col.string("status", 16, nullable=False),
    col.string("title", 500, nullable=False),
    col.string("reason", 2000, nullable=False),
    col.epoch("since", nullable=False),
    col.epoch("opened_at", nullable=False),
    col.epoch("updated_at", nullable=False),
    col.epoch("resolved_at"),
    col.string("resolution", 500),
    col.string("state_token", 100, nullable=False),
    col.json("origin"),
    col.string("effects", 16, nullable=False),
    col.integer("episodes", nullable=False, default=1),
    # The first decision wins: one conditional UPDATE ... WHERE decided_at IS NULL.
    col.epoch("decided_at"),
    col.string("decided_by", 200),
    col.string("decided_via", 32),
    col.string("decided_action", 32),
    # Dismissed: the same failure of the same work is never reported again.
    col.flag("suppressed", default=False),
    UniqueConstraint("kind", "run_id", "condition", "fingerprint"),
    Index(None, "status"),
    Index(None, "suppressed"),
)

incident_events = Table(
    "incident_events",
    metadata,
    col.serial_id(),
    col.cascade("incident_id", "incidents"),
    col.epoch("at", nullable=False),
    col.string("type", 32, nullable=False),
    col.string("detail", 2000),
    Index(None, "incident_id"),
)

# Every press on every channel, winners and losers alike: append-only.
presses = Table(
    "presses",
    metadata,
    col.serial_id(),
    col.cascade("incident_id", "incidents"),
    col.epoch("at", nullable=False),
    col.string("actor", 200, nullable=False),
    col.string("via", 32, nullable=False),
    col.string("action", 32, nullable=False),
    col.string("state_token", 100),
    col.string("outcome", 32, nullable=False),
    col.string("detail", 2000),
    Index(None, "incident_id"),
)

# The action journal: a row is committed as started before the kind's function runs.
actions = Table(
    "actions",
    metadata,
    col.serial_id(),
    col.cascade("incident_id", "incidents"),
    col.string("kind", 63, nullable=False),
    col.string("run_id", 200, nullable=False),
    col.string("action", 32, nullable=False),
    col.string("actor", 200, nullable=False),
    col.string("via", 32, nullable=False),
    col.string("status", 16, nullable=False),
    col.epoch("started_at", nullable=False),
    col.epoch("finished_at"),
    col.string("answer", 2000),
    col.string("host", 200, nullable=False),
    col.integer("pid", nullable=False),
    Index(None, "status"),
    Index(None, "kind", "run_id"),
)

runbook_switches = Table(
    "runbook_switches",
    metadata,
    col.key("name", 64),
    Column("enabled", Boolean, nullable=False),
    col.string("updated_by", 200, nullable=False),
    col.epoch("updated_at", nullable=False),
)

api_tokens = Table(
    "api_tokens",
    metadata,
    col.serial_id(),
    col.string("name", 100, nullable=False),
    col.string("role", 16, nullable=False),
    col.string("token_hash", 64, nullable=False, unique=True),
    col.epoch("created_at", nullable=False),
    col.epoch("revoked_at"),
    # A ``task`` token speaks only for this queue task; revoked when the task's lease ends.
    col.string("task_id", 64),
    col.string("job_id", 64),
    Index(None, "task_id"),
)

watch_heartbeats = Table(
    "watch_heartbeats",
    metadata,
    col.key("replica", 200),
    col.epoch("last_sweep_at", nullable=False),
    col.epoch("last_ok_at"),
    col.number("duration_s", nullable=False),
    col.integer("runs", nullable=False),
    col.string("error", 2000),
)
