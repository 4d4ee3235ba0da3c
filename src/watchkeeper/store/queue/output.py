"""The output a task's runner sent when the task ended: its redacted tail, one per task."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import literal, select

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.rows import T, found, held
from watchkeeper.store.schema_queue import queue_task_output

_O = queue_task_output.c


@dataclass(frozen=True, slots=True)
class TaskOutput:
    """What a task printed last (already redacted), and when the server got it."""

    task_id: str
    tail: str
    recorded_at: datetime


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
