"""A task a runner holds: its lease, how far it is renewed, its subprocess and its output."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

    from watchkeeper.procs.launch import LeaseLine
    from watchkeeper.queue.shipping import Shipment

#: The share of a lease kept in hand: a subprocess whose lease could not be renewed is
#: aborted this long before the lease lapses, with half of it as the abort's grace.
EXPIRY_MARGIN = 0.25


@dataclass
class HeldTask:
    """A task this runner holds: its lease and its subprocess."""

    task_id: str
    token: str
    renew_every: float
    next_renew: float
    lease_s: float
    #: When (on the runner's clock) the subprocess must start stopping, unless renewed.
    stop_by: float
    run_id: str | None = None
    shim: subprocess.Popen[bytes] | None = None
    #: How the shim hears of each renewal; it stops the command itself if none comes in time.
    lease: LeaseLine | None = None
    log_size: int = 0
    outcome: dict[str, Any] | None = field(default=None)
    job_id: str | None = None
    org: str | None = None
    #: Whether the output tail and the end event went out (once, before the outcome).
    told: bool = False
    shipment: Shipment | None = None
    #: Set once (under the daemon's lock) by whoever stops the subprocess for a lapsing lease.
    expiring: bool = False

    @property
    def margin(self) -> float:
        """How long before its lease lapses the subprocess starts stopping."""
        return self.lease_s * EXPIRY_MARGIN
