"""The output a runner sends the server of a task it runs.

A task's command runs on its runner's host and writes into its run's log
there. While the task runs, the runner ships what the log gained since its
last shipment (:func:`read_chunk`), each piece ending at a line's end; the
rest goes when the task ends. When the task ends, the runner also sends the
last :data:`TAIL_BYTES` of that log (:func:`read_tail`). Both start and end
at line boundaries (a line cut in half may hide a secret from redaction), go
through :func:`watchkeeper.redact.redact`, and lose the control characters
the API refuses (terminal colour codes, mostly). The server keeps at most
:data:`OUTPUT_CAP_BYTES` of a run's shipped output (:func:`cut_to`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from watchkeeper.redact import redact
from watchkeeper.store.queue.output import Piece, Shipped, ShippedOutput

if TYPE_CHECKING:
    from watchkeeper.store.queue import QueueStore

__all__ = [
    "CHUNK_BYTES",
    "CHUNK_TEXT_MAX",
    "OUTPUT_CAP_BYTES",
    "TAIL_BYTES",
    "Chunk",
    "Piece",
    "Shipped",
    "ShippedOutput",
    "clean",
    "cut_note",
    "cut_to",
    "read_chunk",
    "read_tail",
    "ship",
]

#: How much of the end of a task's output is kept on the server.
TAIL_BYTES = 64 * 1024
#: Most of a run's log one shipment carries; a longer line without a newline is cut anyway.
CHUNK_BYTES = 64 * 1024
#: Most characters of text one shipment may carry once cleaned (redaction may lengthen it).
CHUNK_TEXT_MAX = 4 * CHUNK_BYTES
#: Most of a run's shipped output, redacted, the server keeps; the rest stays in the run's log.
OUTPUT_CAP_BYTES = 8 * 1024 * 1024
# A shipment's text as JSON stays well under the server's 256 KiB body limit.
_CHUNK_JSON_MAX = 192 * 1024
# Terminal escape sequences first (colours, cursor moves), so none leaves a stray "[31m".
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_])")
# What the API refuses in free text: control characters other than tab and line breaks.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def read_tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The redacted last ``limit`` bytes (at most) of the file at ``path``; empty if missing."""
    try:
        with path.open("rb") as file:
            size = file.seek(0, 2)
            start = max(0, size - limit)
            file.seek(start)
            data = file.read(limit)
    except FileNotFoundError:
        return ""
    if start > 0:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else data
    return clean(data.decode("utf-8", "replace"), limit)


def clean(text: str, limit: int = TAIL_BYTES) -> str:
    """``text`` redacted, without control characters, and no longer than ``limit`` bytes."""
    # Redaction may lengthen a text: keep its end.
    return end_of(redact(_CONTROL.sub("", _ESCAPES.sub("", text))), limit)


def end_of(text: str, limit: int) -> str:
    """The end of ``text`` that fits ``limit`` bytes, from a line's start where there is one."""
    encoded = text.encode()
    if len(encoded) <= limit:
        return text
    kept = encoded[-limit:].decode("utf-8", "ignore")
    line = kept.find("\n")
    return kept[line + 1 :] if 0 <= line < len(kept) - 1 else kept


@dataclass(frozen=True, slots=True)
class Chunk:
    """One shipment: the log's bytes ``offset`` to ``end``, as cleaned text."""

    offset: int
    end: int
    text: str


def read_chunk(path: Path, offset: int, *, final: bool, limit: int = CHUNK_BYTES) -> Chunk | None:
    """What the log at ``path`` gained from ``offset`` on, up to ``limit`` bytes, or ``None``.

    The piece ends at its last line end (a newline or a carriage return), so
    redaction sees whole lines; an unfinished last line waits for the next
    shipment unless the task has ended (``final``) or the line alone fills
    ``limit``, in which case it is cut on a character boundary.
    """
    while True:
        try:
            with path.open("rb") as file:
                file.seek(offset)
                data = file.read(limit)
        except FileNotFoundError:
            return None
        cut = _cut(data, final=final, full=len(data) >= limit)
        if cut == 0:
            return None
        text = clean(data[:cut].decode("utf-8", "replace"), CHUNK_TEXT_MAX)
        if limit <= 1024 or len(json.dumps(text, ensure_ascii=False).encode()) <= _CHUNK_JSON_MAX:
            return Chunk(offset, offset + cut, text)
        limit //= 2  # text that grows a lot as JSON (broken bytes, quotes): ship less at a time


def _cut(data: bytes, *, final: bool, full: bool) -> int:
    """How many bytes of ``data`` to ship now."""
    line_end = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
    if line_end:
        return len(data) if final and not full else line_end
    if final or full:
        return _whole_characters(data)
    return 0


def _whole_characters(data: bytes) -> int:
    """The length of ``data`` without a UTF-8 character cut at its end."""
    start = len(data) - 1
    while start > 0 and len(data) - start < 4 and data[start] & 0xC0 == 0x80:
        start -= 1
    if start < 0:
        return 0
    lead = data[start]
    size = 4 if lead >= 0xF0 else 3 if lead >= 0xE0 else 2 if lead >= 0xC0 else 1
    return start if start + size > len(data) and start > 0 else len(data)


def cut_to(text: str, budget: int) -> str:
    """The start of ``text`` that fits ``budget`` bytes, ended at a line's end where one fits."""
    encoded = text.encode()
    if len(encoded) <= budget:
        return text
    kept = encoded[: max(budget, 0)]
    line_end = kept.rfind(b"\n") + 1
    return kept[:line_end].decode() if line_end else kept.decode("utf-8", "ignore")


def ship(
    store: QueueStore, task_id: str, token: str, piece: Piece, now: datetime
) -> Shipped | None:
    """Keep ``piece`` of the task's output under the lease ``token``, within the cap.

    ``None`` when the lease is gone (see :meth:`QueueStore.ship_output`).
    """
    return store.ship_output(task_id, token, piece, cap=OUTPUT_CAP_BYTES, fit=cut_to, now=now)


def cut_note(kept: ShippedOutput, cap: int = OUTPUT_CAP_BYTES) -> str | None:
    """What to tell a reader of output cut at the cap: where the whole of it is."""
    if not kept.cut:
        return None
    run = f"process run {kept.run_id}" if kept.run_id else "the task's process run"
    host = f"on host {kept.host}" if kept.host else "on its runner's host"
    return (
        f"output cut at {cap // (1024 * 1024)} MiB of redacted text: the whole of it is in the "
        f"log of {run} {host}, in the runner's data folder"
    )
