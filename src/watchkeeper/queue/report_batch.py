"""A runner's outcomes of several tasks that ended in the same pass, in one request.

The server records them in one transaction, each under its own lease, and
answers after that commit; an outcome whose lease is gone is refused alone.
A request that fails as a whole recorded nothing and is tried again on the
next pass; a server without the route gets the outcomes one at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from watchkeeper.errors import ClientError
from watchkeeper.queue.held import HeldTask

if TYPE_CHECKING:
    from watchkeeper.client import Client
    from watchkeeper.client_failover import FailoverClient

log = logging.getLogger(__name__)


def report_together(
    client: Client | FailoverClient,
    ended: list[HeldTask],
    tell: Callable[[HeldTask, dict[str, Any]], None],
    report_one: Callable[[HeldTask], None],
    forget: Callable[[HeldTask], None],
) -> None:
    """Report the outcomes of ``ended`` at once (each ``tell`` first, once);
    ``forget`` each the server has answered."""
    for held in ended:
        if not held.told:
            assert held.outcome is not None
            tell(held, held.outcome)
    outcomes = [_outcome(held) for held in ended]
    try:
        answers = client.runners.report(outcomes)
    except ClientError as exc:
        if exc.status in (404, 405):  # a server without the route
            for held in ended:
                report_one(held)
            return
        log.warning(
            "Reporting %d tasks failed, will try again: %s",
            len(ended),
            exc,
            extra={"action": "runner_report"},
        )
        return
    for held, answer in zip(ended, answers, strict=True):
        if answer.get("code") == "lease_lost":
            log.warning(
                "The outcome of task %s was not recorded: %s",
                held.task_id,
                answer.get("message", "its lease is gone"),
                extra={"action": "runner_report"},
            )
        forget(held)


def _outcome(held: HeldTask) -> dict[str, Any]:
    outcome = held.outcome
    assert outcome is not None
    item = {"task_id": held.task_id, "lease_token": held.token, "exit_code": outcome["exit_code"]}
    if "failed" in outcome:
        item["reason"] = outcome["failed"]
    return item
