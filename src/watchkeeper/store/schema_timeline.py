"""Tables of run timelines, spend, execution-record links and forge webhooks, on ``metadata``.

Timeline events are append-only and outlive the tasks they describe: they
keep ``job_id``, ``task_id`` and ``org`` as plain columns, with no foreign
key. Each event that carries token usage is also a spend row: its cost was
computed when it arrived, with the matched model, provider and the version of
the price data kept beside it (``unpriced`` when no price was known).
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    Index,
    Integer,
    Table,
)

from watchkeeper.store import schema_columns as col

TEXT_MAX = 1000


def _tokens(name: str) -> Column[int]:
    return Column(name, Integer, nullable=False, default=0, server_default="0")


timeline_events = Table(
    "timeline_events",
    col.metadata,
    col.serial_id(),
    col.string("org", 100),
    col.string("job_id", 64),
    col.string("task_id", 64),
    col.epoch("at", nullable=False),
    col.string("day", 10, nullable=False),
    col.epoch("received_at", nullable=False),
    col.string("phase", 32, nullable=False),
    col.integer("round"),
    col.string("fingerprint", 128),
    col.string("outcome", 32),
    col.number("duration_s"),
    col.string("name", 200),
    col.string("role", 64),
    col.string("model", 200),
    col.string("provider", 100),
    _tokens("input_tokens"),
    _tokens("output_tokens"),
    _tokens("cache_read_tokens"),
    _tokens("cache_write_tokens"),
    Column("cost", Float(precision=53), nullable=True),
    col.flag("unpriced", default=False),
    col.string("price_model", 200),
    col.string("price_provider", 100),
    col.string("price_version", 64),
    col.string("rationale", TEXT_MAX),
    col.string("detail", TEXT_MAX),
    col.string("reporter", 200, nullable=False),
    Index(None, "job_id"),
    Index(None, "task_id"),
    Index(None, "at"),
)

# Links appended to a job's execution record (a merged pull request), each signed.
timeline_links = Table(
    "timeline_links",
    col.metadata,
    col.serial_id(),
    col.string("job_id", 64, nullable=False),
    col.string("kind", 32, nullable=False),
    col.string("url", 2000, nullable=False),
    col.string("title", 500),
    col.string("actor", 200),
    col.epoch("at", nullable=False),
    col.json("detail", nullable=False),
    col.string("signature", 64, nullable=False),
    Index(None, "job_id"),
)

# Webhook deliveries already handled, so a redelivery changes nothing.
forge_deliveries = Table(
    "forge_deliveries",
    col.metadata,
    col.key("source", 16),
    col.key("delivery_id", 200),
    col.epoch("received_at", nullable=False),
)

# One job request per forge item (a Linear issue): submitted with its job, or pending.
forge_requests = Table(
    "forge_requests",
    col.metadata,
    col.key("source", 16),
    col.key("external_id", 200),
    col.string("title", 500, nullable=False),
    col.string("status", 16, nullable=False),
    col.string("job_id", 64),
    col.string("reason", 2000),
    col.json("detail", nullable=False),
    col.epoch("created_at", nullable=False),
    col.epoch("updated_at", nullable=False),
)
