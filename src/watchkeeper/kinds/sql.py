"""The ``sql`` kind: another system's table, read-only.

Options (in ``[kinds.NAME]``)::

    adapter = "sql"
    url = "sqlite:////srv/crawler/state.db"      # or postgresql+psycopg://...
    query = "SELECT id AS run_id, state AS status, updated AS progress_at FROM crawls"
    status_map = { done = "succeeded", error = "failed" }

The query's columns are named after RunView fields (see ``COLUMNS``); only
``run_id`` and ``status`` are required. SQLite is opened with ``mode=ro`` and
PostgreSQL sessions are read-only, so the adapter cannot write even if the
query tried to.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from watchkeeper.config import KindConfig
from watchkeeper.contract import (
    NO_ORIGIN,
    Effects,
    Failure,
    Origin,
    Owner,
    OwnerKind,
    RunStatus,
    RunView,
    fingerprint,
)
from watchkeeper.errors import ConfigError, KindUnreadable
from watchkeeper.kinds.base import Adapter, AdapterContext

#: Column names the query may return, and what each means.
COLUMNS: Mapping[str, str] = {
    "run_id": "the work's id (required)",
    "status": "queued, running, waiting, succeeded, failed or cancelled, "
    "after status_map (required)",
    "title": "a short human name",
    "progress_at": "when something meaningful last changed",
    "started_at": "when the work started",
    "finished_at": "when the work ended",
    "owner_id": "who runs it (a pid, a worker name)",
    "owner_alive": "true, false or null (cannot tell: never stuck)",
    "owner_expires_at": "when the owner's lease runs out",
    "expected_s": "seconds the work is expected to take (for slow)",
    "budget_s": "seconds without progress before stalled, overriding the kind's",
    "effects": "none or unknown",
    "failure_reason": "why it failed",
    "failure_fingerprint": "identifies the same failure; defaults to a hash of the reason",
    "step": "the latest step, shown to people",
    "origin_platform": "telegram, discord, slack or web",
    "origin_chat_id": "chat to send cards to",
    "origin_thread_id": "thread or topic",
    "origin_message_id": "message that started the work",
    "state_token": "changes when the work moves; defaults to a hash of the row",
}
_TIME_COLUMNS = ("progress_at", "started_at", "finished_at", "owner_expires_at")


class SqlOptions(BaseModel):
    """The ``sql`` adapter's options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(min_length=1)
    query: str = Field(min_length=1)
    status_map: dict[str, RunStatus] = Field(default_factory=dict)

    @field_validator("query")
    @classmethod
    def _select_only(cls, value: str) -> str:
        first = value.lstrip().split(None, 1)[0].upper() if value.strip() else ""
        if first not in {"SELECT", "WITH"}:
            raise ValueError("must be a single SELECT (or WITH ... SELECT) statement")
        return value

    @field_validator("url")
    @classmethod
    def _supported(cls, value: str) -> str:
        backend = make_url(value).get_backend_name()
        if backend not in {"sqlite", "postgresql"}:
            raise ValueError(
                "only sqlite:/// and postgresql+psycopg:// URLs can be opened read-only"
            )
        return value


def read_only_engine(url: str) -> Engine:
    """An engine that cannot write: SQLite in ``mode=ro``, PostgreSQL in read-only sessions."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database.startswith("file:"):
            uri = (
                database
                if "mode=ro" in database
                else f"{database}{'&' if '?' in database else '?'}mode=ro"
            )
        else:
            uri = f"file:{database}?mode=ro"
        return create_engine(
            "sqlite+pysqlite://",
            creator=lambda: _sqlite_ro(uri),
        )
    # Keep the URL's own libpq options (a search_path, say) beside the read-only switch.
    existing = parsed.query.get("options", "")
    own = existing if isinstance(existing, str) else " ".join(existing)
    return create_engine(
        parsed.difference_update_query(["options"]),
        connect_args={"options": f"{own} -c default_transaction_read_only=on".strip()},
        pool_pre_ping=True,
        pool_size=2,
        max_overflow=2,
    )


def _sqlite_ro(uri: str) -> Any:
    import sqlite3

    return sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=5)


class SqlAdapter(Adapter):
    """Reads runs from another system's database with one SELECT."""

    adapter_name = "sql"

    def __init__(self, name: str, config: KindConfig, context: AdapterContext) -> None:
        super().__init__(name, config, context)
        self.settings = self.options(SqlOptions)
        try:
            self.engine = read_only_engine(self.settings.url)
        except (SQLAlchemyError, ValueError) as exc:
            raise ConfigError(f"kinds.{name}.url = {self.settings.url!r}: {exc}") from None

    def read(self, now: datetime) -> Sequence[RunView]:
        """Run the query and map each row onto a RunView."""
        try:
            with self.engine.connect() as conn:
                result = conn.execute(text(self.settings.query))
                columns = list(result.keys())
                rows = result.all()
        except SQLAlchemyError as exc:
            original = getattr(exc, "orig", None) or exc
            raise KindUnreadable(f"query failed: {str(original).strip().splitlines()[0]}") from exc
        self._check_columns(columns)
        return [self._view(dict(zip(columns, row, strict=True)), now) for row in rows]

    def close(self) -> None:
        """Release pooled connections."""
        self.engine.dispose()

    def _check_columns(self, columns: list[str]) -> None:
        unknown = [name for name in columns if name not in COLUMNS]
        if unknown:
            raise KindUnreadable(
                f"the query returns columns that are not RunView fields: {', '.join(unknown)}; "
                "rename them with AS (see the sql adapter's documented columns)"
            )
        missing = [name for name in ("run_id", "status") if name not in columns]
        if missing:
            raise KindUnreadable(f"the query must return {' and '.join(missing)}")

    def _view(self, row: dict[str, Any], now: datetime) -> RunView:
        status = self._status(row["status"], row["run_id"])
        times = {name: _as_time(row.get(name), name) for name in _TIME_COLUMNS}
        reason = row.get("failure_reason")
        failure = None
        if status is RunStatus.FAILED or reason:
            reason_text = str(reason or "failed")
            failure = Failure(
                reason_text, str(row.get("failure_fingerprint") or fingerprint(reason_text))
            )
        return RunView(
            kind=self.name,
            run_id=str(row["run_id"]),
            title=str(row.get("title") or row["run_id"]),
            status=status,
            state_token=str(row.get("state_token") or _digest(repr(sorted(row.items(), key=str)))),
            owner=_owner(row, times["owner_expires_at"], now),
            progress_at=times["progress_at"],
            started_at=times["started_at"],
            finished_at=times["finished_at"],
            expected_s=_as_float(row.get("expected_s")),
            budget_s=_as_float(row.get("budget_s")),
            origin=_origin(row),
            effects=Effects.NONE if str(row.get("effects") or "") == "none" else Effects.UNKNOWN,
            failure=failure,
            step=None if row.get("step") is None else str(row["step"])[:2000],
        )

    def _status(self, value: Any, run_id: Any) -> RunStatus:
        raw = str(value)
        mapped = self.settings.status_map.get(raw)
        if mapped is not None:
            return mapped
        try:
            return RunStatus(raw.lower())
        except ValueError:
            raise KindUnreadable(
                f"run {run_id!r} has status {raw!r}, which is not a watchkeeper status; "
                f"map it with kinds.{self.name}.status_map"
            ) from None


def _owner(row: dict[str, Any], expires_at: datetime | None, now: datetime) -> Owner:
    alive_raw = row.get("owner_alive")
    alive: bool | None = None if alive_raw is None else bool(alive_raw)
    if alive is None and expires_at is not None:
        alive = expires_at > now
    ident = row.get("owner_id")
    if ident is None and alive is None:
        return Owner()
    kind = OwnerKind.LEASE if expires_at is not None else OwnerKind.RUNNER
    return Owner(kind, None if ident is None else str(ident), alive, expires_at)


def _origin(row: dict[str, Any]) -> Origin:
    platform = row.get("origin_platform")
    if not platform:
        return NO_ORIGIN

    def text_of(key: str) -> str | None:
        return None if row.get(key) is None else str(row[key])

    return Origin(
        str(platform),
        text_of("origin_chat_id"),
        text_of("origin_thread_id"),
        text_of("origin_message_id"),
    )


def _as_time(value: Any, column: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise KindUnreadable(
            f"column {column} holds {value!r}, which is not a time: "
            "return a timestamp, ISO 8601 text or epoch seconds"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _as_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:16]
