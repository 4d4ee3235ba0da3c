"""The runner daemon's side of a lease answer's ``reason``: said once each time it changes.

An idle runner asks for work every poll; the server says why none came (the queue
is empty, no task is for this runner's fleet, an org's cap holds them back) or
that it had counted this runner offline. The daemon logs the reason when it
changes, not at every poll, so a slow start or a wrong fleet reads plainly in the
log without flooding it.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


class LeaseNotes:
    """Remembers the last reason said; :meth:`tasks_of` reads a lease answer."""

    def __init__(self) -> None:
        self.said: str | None = None

    def tasks_of(self, answer: dict[str, Any]) -> list[dict[str, Any]]:
        """The answer's tasks; its reason logged when its code differs from the last."""
        reason = answer.get("reason")
        code = reason.get("code") if isinstance(reason, dict) else None
        if code != self.said:
            self.said = code
            if isinstance(reason, dict) and code is not None:
                log.info(
                    "Lease answer: %s (%s)",
                    reason.get("message", code),
                    code,
                    extra={"action": "runner_lease_reason", "reason": code},
                )
        return list(answer.get("tasks") or [])
