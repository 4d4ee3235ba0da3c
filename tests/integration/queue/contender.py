"""A leasing process for the contention test: lease and complete until the queue is empty.

Run as ``python -m tests.integration.queue.contender URL RUNNER_ID OUT``; writes
the ids it leased to OUT, one a line.
"""

from __future__ import annotations

import sys
from pathlib import Path

from watchkeeper import config
from watchkeeper.queue.service import QueueService
from watchkeeper.store import Store


def drain(
    queue: QueueService, runner_id: str, batch: int = 4, rounds: int | None = None
) -> list[str]:
    """Lease and complete until a lease comes back empty (or ``rounds`` leases were made);
    returns the leased task ids."""
    leased: list[str] = []
    while rounds is None or rounds > 0:
        rounds = None if rounds is None else rounds - 1
        leases = queue.lease(runner_id, limit=batch)
        if not leases:
            return leased
        for lease in leases:
            leased.append(lease.task.id)
            queue.complete(lease.task.id, lease.token)
    return leased


def main() -> None:
    url, runner_id, out = sys.argv[1:4]
    store = Store(url, migrate=False)
    try:
        settings = config.parse({"database_url": url}, "contender")
        ids = drain(QueueService(store, settings), runner_id)
    finally:
        store.close()
    Path(out).write_text("".join(f"{task_id}\n" for task_id in ids), encoding="utf-8")


if __name__ == "__main__":
    main()
