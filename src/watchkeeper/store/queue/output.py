"""The output a task's runner sent: the redacted tail when the task ended, one per task,
and all of it (up to a cap) shipped piece by piece while the task ran, for its last run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, exists, insert, literal, select, update

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.rows import RUNNING, T, found, held
from watchkeeper.store.schema.queue import (
    queue_task_output,
    queue_task_shipped,
    queue_task_shipped_pieces,
)

#: Cuts a text to fit a number of bytes: ``fit(text, room)``.
Fit = Callable[[str, int], str]
_O = queue_task_output.c
_S = queue_task_shipped.c
_P = queue_task_shipped_pieces.c


@dataclass(frozen=True, slots=True)
class TaskOutput:
    """What a task printed last (already redacted), and when the server got it."""

    task_id: str
    tail: str
    recorded_at: datetime


@dataclass(frozen=True, slots=True)
class Piece:
    """One shipment of a run's output: the log's bytes ``offset`` to ``end``, as redacted text,
    whether it is the last, and which process run on which host wrote it."""

    offset: int
    end: int
    text: str
    final: bool = False
    run_id: str | None = None
    host: str | None = None


@dataclass(frozen=True, slots=True)
class Shipped:
    """What the server made of a shipment: where the next one starts, whether it was kept."""

    next_offset: int
    kept: bool
    cut: bool
    complete: bool


@dataclass(frozen=True, slots=True)
class ShippedOutput:
    """All of a run's output the server kept (already redacted), and how far it got."""

    task_id: str
    text: str
    run_id: str | None
    host: str | None
    kept_bytes: int
    #: Over the cap: the rest stayed in the run's log on its runner's host.
    cut: bool
    #: The runner said it sent it all (the task had ended).
    complete: bool
    #: The run still holds the task.
    running: bool
    updated_at: datetime


class Output(Part):
    """Keeps and reads the output tail of each task."""

    def record_output(self, task_id: str, token: str, tail: str, now: datetime) -> bool:
        """Keep ``tail`` as the task's output if ``token`` still holds a live lease on it.

        ``False`` (nothing kept) when the lease is gone: a runner whose task was
        taken back must not overwrite the output of the run that replaced it.
        The lease is checked by the same statement that writes, so no move of
        the task can slip between the two.
        """
        at = to_epoch(now)
        source = select(T.id, literal(tail), literal(at)).where(held(task_id, token, at))
        if self._sqlite:
            from sqlalchemy.dialects.sqlite import insert
        else:
            from sqlalchemy.dialects.postgresql import insert  # type: ignore[assignment]
        base = insert(queue_task_output).from_select(["task_id", "tail", "recorded_at"], source)
        statement = base.on_conflict_do_update(
            index_elements=["task_id"],
            set_={"tail": base.excluded.tail, "recorded_at": base.excluded.recorded_at},
        ).returning(_O.task_id)
        with self._write("recording a task's output") as conn:
            return conn.execute(statement).first() is not None

    def output(self, task_id: str) -> TaskOutput | None:
        """The task's output, ``None`` if none was sent; :class:`NotFound` for no such task."""
        with self._read("reading a task's output") as conn:
            found(conn, select(T.id).where(T.id == task_id), f"no task {task_id!r}")
            row = conn.execute(select(queue_task_output).where(_O.task_id == task_id)).first()
        if row is None:
            return None
        return TaskOutput(row.task_id, row.tail, from_epoch(row.recorded_at))

    def ship_output(
        self,
        task_id: str,
        token: str,
        piece: Piece,
        *,
        cap: int,
        fit: Fit,
        now: datetime,
    ) -> Shipped | None:
        """Add ``piece`` to the output of the run holding ``token``, keeping at most ``cap`` bytes.

        ``None`` (nothing kept) when the lease is gone. The first piece of a new
        lease starts the task's output afresh. A piece is kept only where the
        last one ended: one sent again (its answer lost) or ahead of a gap is
        not, and the answer says where the next one must start. Over ``cap``,
        ``fit(text, room)`` cuts the piece and the rest of the run's pieces only
        move the offset on. Every write checks the lease in its own statement.
        """
        at = to_epoch(now)
        with self._write("shipping a task's output") as conn:
            if self._open_run(conn, task_id, token, piece, at):
                conn.execute(delete(queue_task_shipped_pieces).where(_P.task_id == task_id))
            row = conn.execute(
                select(queue_task_shipped).where(_S.task_id == task_id, _S.lease_token == token)
            ).first()
            if row is None:
                return None
            if piece.offset != row.next_offset and not (row.cut and piece.offset > row.next_offset):
                return self._standing(conn, task_id, token, at, row)
            text = "" if row.cut else fit(piece.text, cap - row.kept_bytes)
            cut = bool(row.cut) or text != piece.text
            size = len(text.encode())
            moved = conn.execute(
                update(queue_task_shipped)
                .where(
                    _S.task_id == task_id,
                    _S.lease_token == token,
                    _S.next_offset == row.next_offset,
                    _S.kept_bytes == row.kept_bytes,
                    exists().where(held(task_id, token, at)),
                )
                .values(
                    next_offset=piece.end,
                    kept_bytes=row.kept_bytes + size,
                    cut=cut,
                    complete=piece.final,
                    updated_at=at,
                )
                .returning(_S.task_id)
            ).first()
            if moved is None:
                return self._standing(conn, task_id, token, at, None)
            if text:
                conn.execute(
                    insert(queue_task_shipped_pieces).values(
                        task_id=task_id, offset=row.next_offset, text=text
                    )
                )
            return Shipped(piece.end, True, cut, piece.final)

    def _open_run(
        self, conn: Connection, task_id: str, token: str, piece: Piece, at: float
    ) -> bool:
        """Make the run holding ``token`` the one whose output is kept; whether it is new."""
        fresh: dict[str, Any] = {
            "lease_token": token,
            "run_id": piece.run_id,
            "host": piece.host,
            "next_offset": 0,
            "kept_bytes": 0,
            "cut": False,
            "complete": False,
            "updated_at": at,
        }
        values = [literal(value) for value in fresh.values()]
        source = select(T.id, *values).where(held(task_id, token, at))
        if self._sqlite:
            from sqlalchemy.dialects.sqlite import insert as upsert
        else:
            from sqlalchemy.dialects.postgresql import insert as upsert  # type: ignore[assignment]
        base = upsert(queue_task_shipped).from_select(["task_id", *fresh], source)
        statement = base.on_conflict_do_update(
            index_elements=["task_id"],
            set_={name: base.excluded[name] for name in fresh},
            where=_S.lease_token != base.excluded.lease_token,
        ).returning(_S.task_id)
        return conn.execute(statement).first() is not None

    def _standing(
        self, conn: Connection, task_id: str, token: str, at: float, row: Any
    ) -> Shipped | None:
        """Where the run's output stands, after a piece that was not kept; ``None``: lease gone."""
        if conn.execute(select(T.id).where(held(task_id, token, at))).first() is None:
            return None
        if row is None:
            row = conn.execute(
                select(queue_task_shipped).where(_S.task_id == task_id, _S.lease_token == token)
            ).first()
            if row is None:
                return None
        return Shipped(int(row.next_offset), False, bool(row.cut), bool(row.complete))

    def shipped_output(self, task_id: str, last: int | None = None) -> ShippedOutput | None:
        """All the output shipped by the task's last run (only its ``last`` pieces if given).

        ``None`` if none was shipped; :class:`NotFound` for no such task.
        """
        with self._read("reading a task's shipped output") as conn:
            task = found(
                conn,
                select(T.status, T.lease_token).where(T.id == task_id),
                f"no task {task_id!r}",
            )
            row = conn.execute(select(queue_task_shipped).where(_S.task_id == task_id)).first()
            if row is None:
                return None
            pieces = select(_P.text).where(_P.task_id == task_id)
            if last is None:
                texts = conn.execute(pieces.order_by(_P.offset)).scalars().all()
            else:
                newest = conn.execute(pieces.order_by(_P.offset.desc()).limit(last)).scalars()
                texts = list(reversed(newest.all()))
        return ShippedOutput(
            task_id=task_id,
            text="".join(texts),
            run_id=row.run_id,
            host=row.host,
            kept_bytes=int(row.kept_bytes),
            cut=bool(row.cut),
            complete=bool(row.complete),
            running=task.status == RUNNING and task.lease_token == row.lease_token,
            updated_at=from_epoch(row.updated_at),
        )
