"""The queue's own errors."""

from __future__ import annotations

from watchkeeper.errors import Conflict


class LeaseLost(Conflict):
    """The lease is gone (lapsed, revoked by a cancel, or taken back): the runner must stop.

    The task's outcome is not recorded; another attempt (or nobody) owns it now.
    """

    code = "lease_lost"

    def __init__(self, task_id: str) -> None:
        super().__init__(
            f"the lease on task {task_id} is gone (it lapsed, was cancelled or taken back): "
            "stop running it"
        )
        self.task_id = task_id
