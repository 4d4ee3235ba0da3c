"""A program's log: its output read on the event loop, redacted a whole line at a time,
written to a file rotated by size, and read back for the API.

Each start of the program gets a pipe of its own (:meth:`ProgramLog.attach`, the
supervision library's ``output``); nothing polls: the loop reads a pipe when it
has data. A line is written once it is complete (or too long to wait for, or
its writer ended), so a secret split across two writes is still recognised and
redacted before anything reaches the disk. The file is rotated as the logging
module's ``RotatingFileHandler`` rotates (``output.log``, ``output.log.1`` ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass
from logging.handlers import RotatingFileHandler
from pathlib import Path

from watchkeeper.redact import redact_bytes, whole_lines

log = logging.getLogger(__name__)

LOG_NAME = "output.log"
#: The most one read of the log answers.
PIECE_MAX = 1024 * 1024
_CHUNK = 65536


class ProgramLog:
    """Where one program's output goes: a rotated file in its own folder."""

    def __init__(self, folder: Path, max_bytes: int, backups: int) -> None:
        self.folder = folder
        self.path = folder / LOG_NAME
        self.max_bytes = max_bytes
        self.backups = backups
        self._handler: RotatingFileHandler | None = None
        self._pipes: dict[int, bytes] = {}

    def attach(self) -> int:
        """A new pipe for one start of the program: the write end, for the child."""
        self.folder.mkdir(parents=True, exist_ok=True)
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        self._pipes[read_fd] = b""
        asyncio.get_running_loop().add_reader(read_fd, self._readable, read_fd)
        return write_fd

    def note(self, text: str) -> None:
        """A line of the server's own in the log (a restart, a pause), marked as such."""
        self._write(f"[watchkeeper] {text}\n".encode())

    def close(self) -> None:
        """Write what is left of every pipe and stop reading them."""
        for read_fd in list(self._pipes):
            self._end(read_fd)
        if self._handler is not None:
            self._handler.close()
            self._handler = None

    def _readable(self, read_fd: int) -> None:
        try:
            chunk = os.read(read_fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError as exc:
            log.warning("Cannot read a program's output: %s", exc, extra={"action": "program_log"})
            chunk = b""
        if not chunk:
            self._end(read_fd)
            return
        pending = self._pipes[read_fd] + chunk
        cut = whole_lines(pending, final=False)
        self._pipes[read_fd] = pending[cut:]
        if cut:
            self._write(redact_bytes(pending[:cut]))

    def _end(self, read_fd: int) -> None:
        pending = self._pipes.pop(read_fd, b"")
        with contextlib.suppress(ValueError, RuntimeError):
            asyncio.get_running_loop().remove_reader(read_fd)
        os.close(read_fd)
        if pending:
            self._write(redact_bytes(pending) + (b"" if pending.endswith(b"\n") else b"\n"))

    def _write(self, data: bytes) -> None:
        if self._handler is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._handler = RotatingFileHandler(
                self.path,
                maxBytes=self.max_bytes,
                backupCount=self.backups,
                encoding="utf-8",
                delay=True,
            )
            self._handler.terminator = ""
        # Pieces well under the size limit, cut at line ends: a file is rotated before a
        # piece would take it past the limit, so none grows much beyond it.
        for piece in _pieces(data, max(1024, min(_CHUNK, self.max_bytes // 8))):
            record = logging.makeLogRecord({"msg": piece.decode("utf-8", "replace")})
            self._handler.emit(record)


def _pieces(data: bytes, size: int) -> list[bytes]:
    """``data`` in pieces of at most ``size`` bytes, each ending a line (a longer line alone)."""
    pieces: list[bytes] = []
    start = 0
    while start < len(data):
        end = data.rfind(b"\n", start, start + size) + 1
        if end <= start:  # one line longer than a piece: up to its own end
            end = data.find(b"\n", start + size) + 1 or len(data)
        pieces.append(data[start:end])
        start = end
    return pieces


@dataclass(frozen=True, slots=True)
class LogPiece:
    """What one read of a program's log found."""

    text: str
    size: int
    next_offset: int
    #: Changes when the log is rotated: a follower then reads the new file from 0.
    generation: int


def read_log(path: Path, offset: int | None, tail_bytes: int) -> LogPiece:
    """The end of the log (``offset`` None), or what follows ``offset``, whole lines only.

    An ``offset`` past the end (the log was rotated since) reads the new file from 0.
    """
    try:
        with path.open("rb") as file:
            stat = os.fstat(file.fileno())
            size = stat.st_size
            if offset is None:
                file.seek(max(0, size - tail_bytes))
                data = file.read(tail_bytes)
                if size > tail_bytes:
                    data = data[data.find(b"\n") + 1 :]  # from the first whole line
                return LogPiece(data.decode("utf-8", "replace"), size, size, stat.st_ino)
            start = offset if offset <= size else 0
            file.seek(start)
            piece = file.read(PIECE_MAX)
    except FileNotFoundError:
        return LogPiece("", 0, 0, 0)
    cut = whole_lines(piece, final=False)
    return LogPiece(piece[:cut].decode("utf-8", "replace"), size, start + cut, stat.st_ino)
