"""API tokens, stored only as SHA-256 hashes.

Two kinds share the table. Operator tokens carry a :class:`Role` and are made
by people (``watchkeeper token create``). Task tokens (role ``task``) are minted
by the queue when it leases a task, inside the leasing transaction, and speak
only for that task: :func:`mint_task_tokens` and :func:`revoke_task_tokens`
take the queue's open connection so a token never outlives its lease.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sqlalchemy import Connection, delete, exists, func, insert, literal, select, text, update

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.errors import InvalidInput, NotFound
from watchkeeper.store.base import Accessor
from watchkeeper.store.schema import api_tokens

TOKEN_PREFIX = "wk_"  # noqa: S105 - a prefix that makes tokens recognisable in leaks
#: The stored role of a token bound to one queue task; never a :class:`Role`.
TASK_ROLE = "task"
_OPERATOR = api_tokens.c.role != TASK_ROLE
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

    id: int
    task_id: str
    job_id: str

    @property
    def name(self) -> str:
        """How its reports are attributed."""
        return f"task {self.task_id}"


def hash_token(secret: str) -> str:
    """The stored form of a token (tokens are random, so a plain hash suffices)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


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
        statement = select(api_tokens).where(
            api_tokens.c.token_hash == hash_token(secret), api_tokens.c.revoked_at.is_(None)
        )
        with self._read("checking a token") as conn:
            row = conn.execute(statement).first()
        if row is None:
            return None
        if row.role == TASK_ROLE:
            return TaskToken(row.id, row.task_id, row.job_id)
        return TokenInfo(row.id, row.name, Role(row.role), from_epoch(row.created_at), None)

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


def mint_task_tokens(
    conn: Connection, tasks: Sequence[tuple[str, str]], now: float
) -> dict[str, str]:
    """Mint one token per ``(task_id, job_id)`` on ``conn``; returns the secrets by task id.

    Any token a task still had is removed first: a re-lease never leaves two alive.
    """
    if not tasks:
        return {}
    revoke_task_tokens(conn, [task_id for task_id, _ in tasks])
    minted = {task_id: TOKEN_PREFIX + secrets.token_urlsafe(32) for task_id, _ in tasks}
    conn.execute(
        insert(api_tokens),
        [
            {
                "name": f"task {task_id}"[:100],
                "role": TASK_ROLE,
                "token_hash": hash_token(minted[task_id]),
                "created_at": now,
                "task_id": task_id,
                "job_id": job_id,
            }
            for task_id, job_id in tasks
        ],
    )
    return minted


def revoke_task_tokens(conn: Connection, task_ids: Iterable[str]) -> None:
    """Remove the tokens of ``task_ids`` on ``conn``, in the caller's transaction.

    The rows are deleted rather than marked: one is minted per lease, and
    nothing reads a task token after its task ends.
    """
    ids = list(task_ids)
    if ids:
        conn.execute(delete(api_tokens).where(api_tokens.c.task_id.in_(ids)))
