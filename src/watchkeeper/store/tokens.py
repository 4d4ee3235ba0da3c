"""API tokens, stored only as SHA-256 hashes.

Operator tokens carry a :class:`Role`, are made by people (``watchkeeper token
create``) and live in ``api_tokens``. Task tokens speak only for one leased
queue task and are stored nowhere: :func:`task_token` derives one from the
task's id and its lease token (an HMAC keyed by the lease token, which only the
server and the runner holding the lease know). A lookup recomputes it from the
task row, so the token lives exactly as long as the lease: ending, lapsing or
re-leasing the task clears or replaces the lease token, and the old task token
stops matching. Writing no row per lease keeps a claim and an end to one row
each. Rows of role ``task`` in ``api_tokens`` are from before; each stays valid
only while the lease it was minted for lasts.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, exists, func, insert, literal, select, text, update

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.errors import InvalidInput, NotFound
from watchkeeper.records.queue import TaskStatus
from watchkeeper.store.base import Accessor
from watchkeeper.store.schema import api_tokens
from watchkeeper.store.schema.queue import queue_tasks

TOKEN_PREFIX = "wk_"  # noqa: S105 - a prefix that makes tokens recognisable in leaks
#: Every token's random (or derived) part is this long; a task token adds its task's id.
_SECRET_LENGTH = len(TOKEN_PREFIX) + 43
_TASK_ID_START = "t-"
#: The stored role of a token bound to one queue task; never a :class:`Role`.
TASK_ROLE = "task"
_OPERATOR = api_tokens.c.role != TASK_ROLE
_RUNNING_VALUE = TaskStatus.RUNNING.value
#: Held (PostgreSQL, per transaction) while the first admin is made, so replicas take turns.
_FIRST_ADMIN_LOCK = "wk-first-admin"


class Role(StrEnum):
    """What a token may do: admins act, reporters report work, viewers read."""

    ADMIN = "admin"
    REPORTER = "reporter"
    VIEWER = "viewer"

    def allows(self, needed: Role) -> bool:
        """Whether this role includes everything ``needed`` may do."""
        return _RANK[self] >= _RANK[needed]


_RANK = {Role.VIEWER: 0, Role.REPORTER: 1, Role.ADMIN: 2}


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token as listed: never its secret."""

    id: int
    name: str
    role: Role
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class TaskToken:
    """A token bound to one leased queue task: it may report only about that task."""

    task_id: str
    job_id: str

    @property
    def name(self) -> str:
        """How its reports are attributed."""
        return f"task {self.task_id}"


def hash_token(secret: str) -> str:
    """The stored form of a token (tokens are random, so a plain hash suffices)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def task_token(task_id: str, lease_token: str) -> str:
    """The API token of a leased task's own process, derived from its lease.

    It carries the task's id in the clear (ids are not secret) so a lookup reads
    one task row by key; the rest is an HMAC of that id keyed by the lease token,
    which does not reveal the lease token to the task.
    """
    mac = hmac.new(lease_token.encode(), f"task-token:{task_id}".encode(), hashlib.sha256)
    return TOKEN_PREFIX + base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=") + task_id


def _task_of(secret: str) -> str | None:
    """The task id a task token names, or ``None`` when ``secret`` has not that shape."""
    if len(secret) > _SECRET_LENGTH and secret.startswith(_TASK_ID_START, _SECRET_LENGTH):
        return secret[_SECRET_LENGTH:]
    return None


def parse_role(value: str) -> Role:
    """A role from user input, or a message listing the valid ones."""
    try:
        return Role(value)
    except ValueError:
        valid = ", ".join(role.value for role in Role)
        raise InvalidInput(f"unknown role {value!r}: use one of {valid}", "role") from None


class TokenStore(Accessor):
    """Creates, checks and revokes API tokens."""

    def create(self, role: Role, name: str, now: datetime) -> tuple[TokenInfo, str]:
        """Create a token; the secret is returned once and never stored."""
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self._write("creating a token") as conn:
            token_id = conn.execute(
                insert(api_tokens)
                .values(
                    name=name[:100],
                    role=role.value,
                    token_hash=hash_token(secret),
                    created_at=to_epoch(now),
                )
                .returning(api_tokens.c.id)
            ).scalar_one()
        return TokenInfo(int(token_id), name[:100], role, now, None), secret

    def create_first(self, role: Role, name: str, now: datetime) -> tuple[TokenInfo, str] | None:
        """Create a token only while no live operator token exists; ``None`` when one does.

        One conditional insert decides, so replicas starting together make one
        token between them. Under PostgreSQL's read committed, two such inserts
        could both see an empty table, so they queue on an advisory lock: the
        second one's snapshot is taken after the first committed. On SQLite the
        write transaction (``BEGIN IMMEDIATE``) already queues them.
        """
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        created = {
            api_tokens.c.name: name[:100],
            api_tokens.c.role: role.value,
            api_tokens.c.token_hash: hash_token(secret),
            api_tokens.c.created_at: to_epoch(now),
        }
        live = select(api_tokens.c.id).where(api_tokens.c.revoked_at.is_(None), _OPERATOR)
        statement = (
            insert(api_tokens)
            .from_select(
                [column.name for column in created],
                select(*(literal(value, column.type) for column, value in created.items())).where(
                    ~exists(live)
                ),
            )
            .returning(api_tokens.c.id)
        )
        with self._write("creating the first token") as conn:
            if not self._sqlite:
                conn.execute(
                    text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": _FIRST_ADMIN_LOCK}
                )
            token_id = conn.execute(statement).scalar_one_or_none()
        if token_id is None:
            return None
        return TokenInfo(int(token_id), name[:100], role, now, None), secret

    def authenticate(self, secret: str) -> TokenInfo | None:
        """The live operator token matching ``secret``, or ``None`` (task tokens included)."""
        found = self.lookup(secret)
        return found if isinstance(found, TokenInfo) else None

    def lookup(self, secret: str) -> TokenInfo | TaskToken | None:
        """The live token matching ``secret``, of either kind, or ``None``."""
        task_id = _task_of(secret)
        if task_id is not None:
            return self._task_lookup(task_id, secret)
        statement = select(api_tokens).where(
            api_tokens.c.token_hash == hash_token(secret), api_tokens.c.revoked_at.is_(None)
        )
        with self._read("checking a token") as conn:
            row = conn.execute(statement).first()
            if row is not None and row.role == TASK_ROLE:
                return self._stored_task_token(conn, row)
        if row is None:
            return None
        return TokenInfo(row.id, row.name, Role(row.role), from_epoch(row.created_at), None)

    def _task_lookup(self, task_id: str, secret: str) -> TaskToken | None:
        statement = select(queue_tasks.c.job_id, queue_tasks.c.lease_token).where(
            queue_tasks.c.id == task_id, queue_tasks.c.status == _RUNNING_VALUE
        )
        with self._read("checking a task token") as conn:
            row = conn.execute(statement).first()
        if row is None or row.lease_token is None:
            return None
        if not hmac.compare_digest(task_token(task_id, row.lease_token), secret):
            return None
        return TaskToken(task_id, row.job_id)

    @staticmethod
    def _stored_task_token(conn: Connection, row: Any) -> TaskToken | None:
        """A task token stored before they were derived: live while its lease lasts
        (minted in the leasing transaction, so at the lease's own time)."""
        statement = select(queue_tasks.c.id).where(
            queue_tasks.c.id == row.task_id,
            queue_tasks.c.status == _RUNNING_VALUE,
            queue_tasks.c.leased_at == row.created_at,
        )
        if conn.execute(statement).first() is None:
            return None
        return TaskToken(row.task_id, row.job_id)

    def count_live(self) -> int:
        """How many operator tokens have not been revoked."""
        statement = select(func.count()).where(api_tokens.c.revoked_at.is_(None), _OPERATOR)
        with self._read("counting tokens") as conn:
            return int(conn.execute(statement).scalar_one())

    def list(self) -> list[TokenInfo]:
        """Every operator token, oldest first (task tokens come and go with their leases)."""
        statement = select(api_tokens).where(_OPERATOR).order_by(api_tokens.c.id)
        with self._read("listing tokens") as conn:
            rows = conn.execute(statement).all()
        return [
            TokenInfo(
                r.id, r.name, Role(r.role), from_epoch(r.created_at), from_epoch(r.revoked_at)
            )
            for r in rows
        ]

    def revoke(self, token_id: int, now: datetime) -> None:
        """Revoke a token; revoking twice is harmless."""
        with self._write("revoking a token") as conn:
            found = conn.execute(select(api_tokens.c.id).where(api_tokens.c.id == token_id)).first()
            if found is None:
                raise NotFound(f"no token {token_id}; see `watchkeeper token list`")
            conn.execute(
                update(api_tokens)
                .where(api_tokens.c.id == token_id, api_tokens.c.revoked_at.is_(None))
                .values(revoked_at=to_epoch(now))
            )
