"""Tables of run timelines, spend, execution-record links and forge webhooks, on ``metadata``.

Timeline events are append-only and outlive the tasks they describe: they
keep ``job_id``, ``task_id`` and ``org`` as plain columns, with no foreign
key. Each event that carries token usage is also a spend row: its cost was
computed when it arrived, with the matched model, provider and the version of
the price data kept beside it (``unpriced`` when no price was known).
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    String,
    Table,
    false,
)

from watchkeeper.store.schema import epoch_column as _time
from watchkeeper.store.schema import metadata

TEXT_MAX = 1000


def _tokens(name: str) -> Column[int]:
    return Column(name, Integer, nullable=False, default=0, server_default="0")


timeline_events = Table(
    "timeline_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("org", String(100), nullable=True),
    Column("job_id", String(64), nullable=True),
    Column("task_id", String(64), nullable=True),
    _time("at", nullable=False),
    Column("day", String(10), nullable=False),
    _time("received_at", nullable=False),
    Column("phase", String(32), nullable=False),
    Column("round", Integer, nullable=True),
    Column("fingerprint", String(128), nullable=True),
    Column("outcome", String(32), nullable=True),
    Column("duration_s", Float, nullable=True),
    Column("name", String(200), nullable=True),
    Column("role", String(64), nullable=True),
    Column("model", String(200), nullable=True),
    Column("provider", String(100), nullable=True),
    _tokens("input_tokens"),
    _tokens("output_tokens"),
    _tokens("cache_read_tokens"),
    _tokens("cache_write_tokens"),
    Column("cost", Float(precision=53), nullable=True),
    Column("unpriced", Boolean, nullable=False, default=False, server_default=false()),
    Column("price_model", String(200), nullable=True),
    Column("price_provider", String(100), nullable=True),
    Column("price_version", String(64), nullable=True),
    Column("rationale", String(TEXT_MAX), nullable=True),
    Column("detail", String(TEXT_MAX), nullable=True),
    Column("reporter", String(200), nullable=False),
    Index(None, "job_id"),
    Index(None, "task_id"),
    Index(None, "at"),
)

# Links appended to a job's execution record (a merged pull request), each signed.
timeline_links = Table(
    "timeline_links",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", String(64), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("url", String(2000), nullable=False),
    Column("title", String(500), nullable=True),
    Column("actor", String(200), nullable=True),
    _time("at", nullable=False),
    Column("detail", JSON, nullable=False),
    Column("signature", String(64), nullable=False),
    Index(None, "job_id"),
)

# Webhook deliveries already handled, so a redelivery changes nothing.
forge_deliveries = Table(
    "forge_deliveries",
    metadata,
    Column("source", String(16), primary_key=True),
    Column("delivery_id", String(200), primary_key=True),
    _time("received_at", nullable=False),
)

# One job request per forge item (a Linear issue): submitted with its job, or pending.
forge_requests = Table(
    "forge_requests",
    metadata,
    Column("source", String(16), primary_key=True),
    Column("external_id", String(200), primary_key=True),
    Column("title", String(500), nullable=False),
    Column("status", String(16), nullable=False),
    Column("job_id", String(64), nullable=True),
    Column("reason", String(2000), nullable=True),
    Column("detail", JSON, nullable=False),
    _time("created_at", nullable=False),
    _time("updated_at", nullable=False),
)
