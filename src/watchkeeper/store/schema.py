"""The tables, declared once; migrations create them and a test compares the two.

Times are stored as UTC epoch seconds (double precision): exact enough, cheap
to read in bulk, and free of the SQLite-has-no-time-zone trap. They become
aware datetimes at the edge of each store module.
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
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def epoch_column(name: str, nullable: bool = True) -> Column[float]:
    """A time column: UTC epoch seconds in double precision (every aggregate's tables use it)."""
    return Column(name, Float(precision=53), nullable=nullable)


_time = epoch_column


push_runs = Table(
    "push_runs",
    metadata,
    Column("run_id", String(200), primary_key=True),
    Column("kind", String(63), nullable=False),
    Column("title", String(500), nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempt", Integer, nullable=False, default=1),
    Column("version", Integer, nullable=False, default=1),
    Column("origin", JSON, nullable=True),
    Column("effects", String(16), nullable=False),
    Column("budget_s", Float, nullable=True),
    Column("expected_s", Float, nullable=True),
    Column("lease_s", Float, nullable=False),
    _time("started_at", nullable=False),
    _time("progress_at", nullable=False),
    _time("seen_at", nullable=False),
    _time("finished_at"),
    _time("updated_at", nullable=False),
    Column("step", String(2000), nullable=True),
    Column("failure_reason", String(2000), nullable=True),
    Column("failure_fingerprint", String(200), nullable=True),
    Column("detail", Text, nullable=True),
    Index(None, "kind", "status"),
    Index(None, "finished_at"),
)

incidents = Table(
    "incidents",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(63), nullable=False),
    Column("run_id", String(200), nullable=False),
    Column("condition", String(16), nullable=False),
    Column("fingerprint", String(200), nullable=False, default=""),
    Column("status", String(16), nullable=False),
    Column("title", String(500), nullable=False),
    Column("reason", String(2000), nullable=False),
    _time("since", nullable=False),
    _time("opened_at", nullable=False),
    _time("updated_at", nullable=False),
    _time("resolved_at"),
    Column("resolution", String(500), nullable=True),
    Column("state_token", String(100), nullable=False),
    Column("origin", JSON, nullable=True),
    Column("effects", String(16), nullable=False),
    Column("episodes", Integer, nullable=False, default=1),
    # The first decision wins: one conditional UPDATE ... WHERE decided_at IS NULL.
    _time("decided_at"),
    Column("decided_by", String(200), nullable=True),
    Column("decided_via", String(32), nullable=True),
    Column("decided_action", String(32), nullable=True),
    # Dismissed: the same failure of the same work is never reported again.
    Column("suppressed", Boolean, nullable=False, default=False, server_default=false()),
    UniqueConstraint("kind", "run_id", "condition", "fingerprint"),
    Index(None, "status"),
    Index(None, "suppressed"),
)

incident_events = Table(
    "incident_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "incident_id",
        Integer,
        ForeignKey("incidents.id", ondelete="CASCADE"),
        nullable=False,
    ),
    _time("at", nullable=False),
    Column("type", String(32), nullable=False),
    Column("detail", String(2000), nullable=True),
    Index(None, "incident_id"),
)

# Every press on every channel, winners and losers alike: append-only.
presses = Table(
    "presses",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("incident_id", Integer, ForeignKey("incidents.id", ondelete="CASCADE"), nullable=False),
    _time("at", nullable=False),
    Column("actor", String(200), nullable=False),
    Column("via", String(32), nullable=False),
    Column("action", String(32), nullable=False),
    Column("state_token", String(100), nullable=True),
    Column("outcome", String(32), nullable=False),
    Column("detail", String(2000), nullable=True),
    Index(None, "incident_id"),
)

# The action journal: a row is committed as started before the kind's function runs.
actions = Table(
    "actions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("incident_id", Integer, ForeignKey("incidents.id", ondelete="CASCADE"), nullable=False),
    Column("kind", String(63), nullable=False),
    Column("run_id", String(200), nullable=False),
    Column("action", String(32), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("via", String(32), nullable=False),
    Column("status", String(16), nullable=False),
    _time("started_at", nullable=False),
    _time("finished_at"),
    Column("answer", String(2000), nullable=True),
    Column("host", String(200), nullable=False),
    Column("pid", Integer, nullable=False),
    Index(None, "status"),
    Index(None, "kind", "run_id"),
)

runbook_switches = Table(
    "runbook_switches",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("enabled", Boolean, nullable=False),
    Column("updated_by", String(200), nullable=False),
    _time("updated_at", nullable=False),
)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(100), nullable=False),
    Column("role", String(16), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    _time("created_at", nullable=False),
    _time("revoked_at"),
    # A ``task`` token speaks only for this queue task; revoked when the task's lease ends.
    Column("task_id", String(64), nullable=True),
    Column("job_id", String(64), nullable=True),
    Index(None, "task_id"),
)

watch_heartbeats = Table(
    "watch_heartbeats",
    metadata,
    Column("replica", String(200), primary_key=True),
    _time("last_sweep_at", nullable=False),
    _time("last_ok_at"),
    Column("duration_s", Float, nullable=False),
    Column("runs", Integer, nullable=False),
    Column("error", String(2000), nullable=True),
)

# Aggregates that keep their tables in modules of their own register them on ``metadata``.
from watchkeeper.store import (  # noqa: E402,F401
    schema_notify,
    schema_procs,
    schema_queue,
    schema_timeline,
    schema_web,
)
