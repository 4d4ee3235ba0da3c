"""Tables of run timelines, spend, execution-record links and forge webhooks, on ``metadata``.

Timeline events are append-only and outlive the tasks they describe: they
keep ``job_id``, ``task_id`` and ``org`` as plain columns, with no foreign
key. Each event that carries token usage is also a spend row: its cost was
computed when it arrived, with the matched model, provider and the version of
the price data kept beside it (``unpriced`` when no price was known).
"""

from __future__ import annotations

import sqlalchemy as sa

from watchkeeper.store.schema.columns import epoch, metadata

TEXT_MAX = 1000


def _tokens(name: str) -> sa.Column[int]:
    return sa.Column(name, sa.Integer, nullable=False, default=0, server_default="0")


timeline_events = sa.Table(
    "timeline_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("org", sa.String(100), nullable=True),
    sa.Column("job_id", sa.String(64), nullable=True),
    sa.Column("task_id", sa.String(64), nullable=True),
    epoch("at", nullable=False),
    sa.Column("day", sa.String(10), nullable=False),
    epoch("received_at", nullable=False),
    sa.Column("phase", sa.String(32), nullable=False),
    sa.Column("round", sa.Integer, nullable=True),
    sa.Column("fingerprint", sa.String(128), nullable=True),
    sa.Column("outcome", sa.String(32), nullable=True),
    sa.Column("duration_s", sa.Float, nullable=True),
    sa.Column("name", sa.String(200), nullable=True),
    sa.Column("role", sa.String(64), nullable=True),
    sa.Column("model", sa.String(200), nullable=True),
    sa.Column("provider", sa.String(100), nullable=True),
    _tokens("input_tokens"),
    _tokens("output_tokens"),
    _tokens("cache_read_tokens"),
    _tokens("cache_write_tokens"),
    sa.Column("cost", sa.Float(precision=53), nullable=True),
    sa.Column("unpriced", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
    sa.Column("price_model", sa.String(200), nullable=True),
    sa.Column("price_provider", sa.String(100), nullable=True),
    sa.Column("price_version", sa.String(64), nullable=True),
    sa.Column("rationale", sa.String(TEXT_MAX), nullable=True),
    sa.Column("detail", sa.String(TEXT_MAX), nullable=True),
    sa.Column("reporter", sa.String(200), nullable=False),
    sa.Index(None, "job_id"),
    sa.Index(None, "task_id"),
    sa.Index(None, "at"),
)

# Links appended to a job's execution record (a merged pull request), each signed.
timeline_links = sa.Table(
    "timeline_links",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("url", sa.String(2000), nullable=False),
    sa.Column("title", sa.String(500), nullable=True),
    sa.Column("actor", sa.String(200), nullable=True),
    epoch("at", nullable=False),
    sa.Column("detail", sa.JSON, nullable=False),
    # ``ed25519:<key id>:<signature>``, or (links from before 0020) an HMAC's hex.
    sa.Column("signature", sa.String(200), nullable=False),
    sa.Index(None, "job_id"),
)

# Execution records, each signed once when first assembled after its job ended, and kept
# as signed. ``tasks`` is how many tasks the job had then: a job resumed and ended again
# gets a new record.
job_records = sa.Table(
    "job_records",
    metadata,
    sa.Column("job_id", sa.String(64), primary_key=True),
    sa.Column("tasks", sa.Integer, primary_key=True),
    sa.Column("body", sa.Text, nullable=False),
    epoch("signed_at", nullable=False),
)

# Webhook deliveries already handled, so a redelivery changes nothing.
forge_deliveries = sa.Table(
    "forge_deliveries",
    metadata,
    sa.Column("source", sa.String(16), primary_key=True),
    sa.Column("delivery_id", sa.String(200), primary_key=True),
    epoch("received_at", nullable=False),
)

# One job request per forge item (a Linear issue): submitted with its job, or pending.
forge_requests = sa.Table(
    "forge_requests",
    metadata,
    sa.Column("source", sa.String(16), primary_key=True),
    sa.Column("external_id", sa.String(200), primary_key=True),
    sa.Column("title", sa.String(500), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("job_id", sa.String(64), nullable=True),
    sa.Column("reason", sa.String(2000), nullable=True),
    sa.Column("detail", sa.JSON, nullable=False),
    epoch("created_at", nullable=False),
    epoch("updated_at", nullable=False),
)
