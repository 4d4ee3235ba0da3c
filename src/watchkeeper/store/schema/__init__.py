"""The tables, declared once; migrations create them and a test compares the two.

The metadata and the time column live in ``columns``, a leaf every schema module
imports; importing this package registers the tables of all its modules.
"""

from __future__ import annotations

import sqlalchemy as sa

# Aggregates that keep their tables in modules of their own register them on ``metadata``.
from watchkeeper.store.schema import (  # noqa: F401
    cluster,
    notify,
    prices,
    procs,
    queue,
    silences,
    timeline,
    web,
)
from watchkeeper.store.schema.columns import epoch
from watchkeeper.store.schema.columns import metadata as metadata

push_runs = sa.Table(
    "push_runs",
    metadata,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("kind", sa.String(63), nullable=False),
    sa.Column("title", sa.String(500), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False, default=1),
    sa.Column("version", sa.Integer, nullable=False, default=1),
    sa.Column("origin", sa.JSON, nullable=True),
    sa.Column("effects", sa.String(16), nullable=False),
    sa.Column("budget_s", sa.Float, nullable=True),
    sa.Column("expected_s", sa.Float, nullable=True),
    sa.Column("lease_s", sa.Float, nullable=False),
    epoch("started_at", nullable=False),
    epoch("progress_at", nullable=False),
    epoch("seen_at", nullable=False),
    epoch("finished_at"),
    epoch("updated_at", nullable=False),
    sa.Column("step", sa.String(2000), nullable=True),
    sa.Column("failure_reason", sa.String(2000), nullable=True),
    sa.Column("failure_fingerprint", sa.String(200), nullable=True),
    sa.Column("detail", sa.Text, nullable=True),
    # The latest progress report, moving or not; NULL on rows older than it: progress_at.
    epoch("reported_at"),
    # Progress reports in a row that said the same thing (0: nothing to compare).
    sa.Column("repeats", sa.Integer, nullable=False, default=0, server_default="0"),
    sa.Column("step_budget_s", sa.Float, nullable=True),
    sa.Column("step_expected_s", sa.Float, nullable=True),
    sa.Column("done", sa.BigInteger, nullable=True),
    sa.Column("total", sa.BigInteger, nullable=True),
    sa.Index(None, "kind", "status"),
    sa.Index(None, "finished_at"),
)

incidents = sa.Table(
    "incidents",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String(63), nullable=False),
    sa.Column("run_id", sa.String(200), nullable=False),
    sa.Column("condition", sa.String(16), nullable=False),
    sa.Column("fingerprint", sa.String(200), nullable=False, default=""),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("title", sa.String(500), nullable=False),
    sa.Column("reason", sa.String(2000), nullable=False),
    epoch("since", nullable=False),
    epoch("opened_at", nullable=False),
    epoch("updated_at", nullable=False),
    epoch("resolved_at"),
    sa.Column("resolution", sa.String(500), nullable=True),
    sa.Column("state_token", sa.String(100), nullable=False),
    sa.Column("origin", sa.JSON, nullable=True),
    sa.Column("effects", sa.String(16), nullable=False),
    sa.Column("episodes", sa.Integer, nullable=False, default=1),
    # The first decision wins: one conditional UPDATE ... WHERE decided_at IS NULL.
    epoch("decided_at"),
    sa.Column("decided_by", sa.String(200), nullable=True),
    sa.Column("decided_via", sa.String(32), nullable=True),
    sa.Column("decided_action", sa.String(32), nullable=True),
    # Dismissed: the same failure of the same work is never reported again.
    sa.Column("suppressed", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
    sa.UniqueConstraint("kind", "run_id", "condition", "fingerprint"),
    sa.Index(None, "status"),
    sa.Index(None, "suppressed"),
)

incident_events = sa.Table(
    "incident_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "incident_id",
        sa.Integer,
        sa.ForeignKey("incidents.id", ondelete="CASCADE"),
        nullable=False,
    ),
    epoch("at", nullable=False),
    sa.Column("type", sa.String(32), nullable=False),
    sa.Column("detail", sa.String(2000), nullable=True),
    # Set in the transaction that enqueues the event's messages: routing reads what is unset,
    # so an event committed after a higher id is routed on the next pass, never skipped.
    epoch("routed_at"),
    sa.Index(None, "incident_id"),
    sa.Index(
        "ix_incident_events_unrouted",
        "id",
        sqlite_where=sa.text("routed_at IS NULL"),
        postgresql_where=sa.text("routed_at IS NULL"),
    ),
)

# Every press on every channel, winners and losers alike: append-only.
presses = sa.Table(
    "presses",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "incident_id", sa.Integer, sa.ForeignKey("incidents.id", ondelete="CASCADE"), nullable=False
    ),
    epoch("at", nullable=False),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("via", sa.String(32), nullable=False),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("state_token", sa.String(100), nullable=True),
    sa.Column("outcome", sa.String(32), nullable=False),
    sa.Column("detail", sa.String(2000), nullable=True),
    sa.Index(None, "incident_id"),
)

# The action journal: a row is committed as started before the kind's function runs.
actions = sa.Table(
    "actions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "incident_id", sa.Integer, sa.ForeignKey("incidents.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("kind", sa.String(63), nullable=False),
    sa.Column("run_id", sa.String(200), nullable=False),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("via", sa.String(32), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    epoch("started_at", nullable=False),
    epoch("finished_at"),
    sa.Column("answer", sa.String(2000), nullable=True),
    sa.Column("host", sa.String(200), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    # The replica that ran it: once that replica is gone, any other marks the action interrupted.
    sa.Column("replica", sa.String(200), nullable=True),
    sa.Index(None, "status"),
    sa.Index(None, "kind", "run_id"),
)

runbook_switches = sa.Table(
    "runbook_switches",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("updated_by", sa.String(200), nullable=False),
    epoch("updated_at", nullable=False),
)

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    epoch("created_at", nullable=False),
    epoch("revoked_at"),
    # A ``task`` token speaks only for this queue task; revoked when the task's lease ends.
    sa.Column("task_id", sa.String(64), nullable=True),
    sa.Column("job_id", sa.String(64), nullable=True),
    sa.Index(None, "task_id"),
)

watch_heartbeats = sa.Table(
    "watch_heartbeats",
    metadata,
    sa.Column("replica", sa.String(200), primary_key=True),
    epoch("last_sweep_at", nullable=False),
    epoch("last_ok_at"),
    sa.Column("duration_s", sa.Float, nullable=False),
    sa.Column("runs", sa.Integer, nullable=False),
    sa.Column("error", sa.String(2000), nullable=True),
)
