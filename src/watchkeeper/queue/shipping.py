"""Shipping a running task's output to the server, piece by piece, under its lease.

Every ``every`` seconds the runner ships what the run's log gained since the
last shipment (:func:`watchkeeper.queue.output.read_chunk`: redacted, cut at a
line's end), at most :data:`PIECES_PER_PASS` pieces at a time so renewals never
wait long. The run's first shipment opens its output on the server even when
empty (a new lease starts the task's output afresh); the server's answer says
where the next piece starts, so a piece sent again is kept once and a gap is
filled. Once the server says the output was cut at its cap, only the offsets
move on. When the task ends, the rest goes, the last piece marked ``final``,
and then the redacted tail of the log (:func:`~watchkeeper.queue.output.read_tail`).
A shipment that fails is logged and tried again on the next pass: output
never holds a task's outcome back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from watchkeeper.errors import ClientError
from watchkeeper.procs import identity, layout
from watchkeeper.queue.output import Chunk, read_chunk, read_tail

if TYPE_CHECKING:
    from watchkeeper.client import Client
    from watchkeeper.client.failover import FailoverClient

log = logging.getLogger(__name__)
#: Most pieces of one task's output a pass ships.
PIECES_PER_PASS = 16


@dataclass
class Shipment:
    """Where the shipping of one run's output stands."""

    task_id: str
    token: str
    run_id: str
    #: The runner's data folder, where the run's log is.
    data_dir: Path
    host: str = field(default_factory=identity.host)
    #: Where in the run's log the next piece starts (the server says).
    offset: int = 0
    #: When (on the runner's clock) the next pass ships.
    due: float = 0.0
    #: Whether the run's first shipment went out.
    opened: bool = False
    #: The server cut the run's output at its cap.
    cut: bool = False

    @property
    def log(self) -> Path:
        """The run's log on this host."""
        return layout.log_path(self.data_dir, self.run_id)


class Shipper:
    """Ships the output of a runner's running tasks through ``client`` every ``every`` s."""

    def __init__(self, client: Client | FailoverClient, every: float) -> None:
        self.client = client
        self.every = every

    def due(self, shipments: Iterable[Shipment], now: float) -> None:
        """Ship what each of ``shipments`` whose time has come gained since its last pass."""
        for shipment in shipments:
            if now >= shipment.due:
                shipment.due = now + self.every
                self.ship(shipment, final=False)

    def ship(self, shipment: Shipment, *, final: bool) -> None:
        """Ship what the log gained (all the rest, the last piece marked, if ``final``)."""
        size = _size(shipment.log) if final else 0
        sent = 0
        while final or sent < PIECES_PER_PASS:
            chunk = None if shipment.cut else read_chunk(shipment.log, shipment.offset, final=final)
            if chunk is None:
                if shipment.opened and not final:
                    return
                chunk = Chunk(shipment.offset, max(shipment.offset, size), "")
            last = final and chunk.end >= size
            before = shipment.offset
            if not self._send(shipment, chunk, last):
                return
            sent += 1
            if last or shipment.offset <= before:
                return

    def finish(self, shipment: Shipment) -> None:
        """The task ended: ship the rest of its output, then the redacted tail of its log."""
        self.ship(shipment, final=True)
        tail = read_tail(shipment.log)
        try:
            self.client.runners.output(shipment.task_id, shipment.token, tail)
        except ClientError as exc:
            log.warning(
                "The output of task %s was not recorded: %s",
                shipment.task_id,
                exc,
                extra={"action": "runner_output"},
            )

    def _send(self, shipment: Shipment, chunk: Chunk, last: bool) -> bool:
        """One shipment; whether the server answered."""
        try:
            answer = self.client.runners.ship_output(
                shipment.task_id,
                shipment.token,
                offset=chunk.offset,
                end=chunk.end,
                output=chunk.text,
                final=last,
                run_id=shipment.run_id,
                host=shipment.host,
            )
        except ClientError as exc:
            log.warning(
                "Output of task %s not shipped (tried again unless its lease is gone): %s",
                shipment.task_id,
                exc,
                extra={"action": "runner_output"},
            )
            return False
        shipment.offset = int(answer["next_offset"])
        shipment.cut = bool(answer["cut"])
        shipment.opened = True
        return True


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
