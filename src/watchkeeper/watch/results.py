"""What one sweep hands on: to the API, to runbooks, to whoever runs after it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from watchkeeper.contract import KindRead
from watchkeeper.store.incidents import Applied
from watchkeeper.watch.lifecycle import Judged


@dataclass(frozen=True, slots=True)
class SweepResult:
    """What one sweep saw and did."""

    at: datetime
    reads: tuple[KindRead, ...]
    judged: Mapping[str, Sequence[Judged]]
    applied: Applied = field(default_factory=Applied)
    next_deadline: datetime | None = None
    duration_s: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the sweep reached the end."""
        return self.error is None
