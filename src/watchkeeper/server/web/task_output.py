"""A task's output as its page shows it: what it shows at first, and what it gained since.

The runner ships a running task's output piece by piece, each piece redacted and ending
at a line's end (:mod:`watchkeeper.queue.output`). The page draws what was kept when it
was asked for and remembers where that ended (a byte offset into the kept text, and the
process run that wrote it); its stream then sends what the kept text gained beyond that
offset, until the task ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from watchkeeper.queue.output import cut_note, end_of
from watchkeeper.redact import redact

if TYPE_CHECKING:
    from watchkeeper.queue.service import QueueService

#: How much of the end of a task's output its page shows at first; a link leads to all of it.
PAGE_OUTPUT_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Mark:
    """How far a reader got: a byte offset into the kept text of one process run's output."""

    at: int = 0
    run: str = ""

    def ident(self) -> str:
        """As an event id: ``offset:run``."""
        return f"{self.at}:{self.run}"

    @classmethod
    def parse(cls, ident: str) -> Mark | None:
        """From an event id; ``None`` if it is not one this stream sent."""
        at, _, run = ident.partition(":")
        if not at.isdecimal() or len(at) > 18 or len(run) > 100:
            return None
        return cls(int(at), run)


@dataclass(frozen=True, slots=True)
class Gained:
    """What a poll found: new text (or the whole text of a new run), the new mark, and the
    task's status once it ended (``None`` while it may still print)."""

    text: str
    mark: Mark
    restarted: bool
    ended: str | None


def first_view(queue: QueueService, task_id: str) -> dict[str, Any]:
    """The output the page draws at first, and where its stream takes up from.

    The last run's shipped output when there is some, newer than the tail of an earlier
    run; otherwise the tail the runner sent at the end (a runner that does not ship).
    """
    shipped = queue.outputs.shipped(task_id)
    ended = queue.outputs.kept(task_id)
    if shipped is None or (
        ended is not None and not shipped.running and ended.recorded_at > shipped.updated_at
    ):
        return {
            "text": ended.tail if ended else "",
            "mark": Mark(),
            "shown_from_start": True,
            "note": None,
            "any": bool(ended and ended.tail),
        }
    whole = shipped.text.encode()
    return {
        "text": end_of(shipped.text, PAGE_OUTPUT_BYTES),
        "mark": Mark(len(whole), shipped.run_id or ""),
        "shown_from_start": len(whole) <= PAGE_OUTPUT_BYTES,
        "note": cut_note(shipped),
        "any": bool(shipped.text),
    }


def gained(queue: QueueService, task_id: str, mark: Mark) -> Gained:
    """What the task's kept output gained since ``mark``; :class:`NotFound` once the task is
    gone.

    The status is read first: a runner ships its last piece before it reports the end, so
    once an ended status is read, the output read after it is all there will be.
    """
    status = queue.task(task_id).status
    ended = status.value if status.ended else None
    newest = queue.outputs.shipped(task_id, last=1)
    if newest is None or (newest.kept_bytes == mark.at and (newest.run_id or "") == mark.run):
        return Gained("", mark, False, ended)
    shipped = queue.outputs.shipped(task_id)
    if shipped is None:  # deleted between the two reads
        return Gained("", mark, False, ended)
    whole = shipped.text.encode()
    run = shipped.run_id or ""
    moved = Mark(len(whole), run)
    if run != mark.run or len(whole) < mark.at:
        # Another run holds the task now: its output replaces the last one's.
        return Gained(redact(shipped.text), moved, True, ended)
    text = whole[mark.at :].decode("utf-8", "replace")
    # Pieces end at line ends, so the new text is whole lines: redacting it again is safe.
    return Gained(redact(text), moved, False, ended)
