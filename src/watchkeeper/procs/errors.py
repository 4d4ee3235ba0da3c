"""Errors of the process engine, under watchkeeper's one root.

::

    WatchkeeperError
    └── ProcsError          a process could not be started, signalled or read
        └── LaunchFailed    the command did not start (the record says why)
"""

from __future__ import annotations

from watchkeeper.errors import WatchkeeperError


class ProcsError(WatchkeeperError):
    """The process engine could not do what was asked; the message says why."""


class LaunchFailed(ProcsError):
    """The command did not start; its run is recorded as failed with the same reason."""

    # The caller's command (or where it runs) is what must change.
    http_status = 422
    code = "invalid"
    field = "argv"

    def __init__(self, message: str, run_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
