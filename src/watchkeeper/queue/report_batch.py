"""A runner's outcomes of the tasks that ended in the same pass, in one request.

The server records them in one transaction, each under its own lease, and
answers after that commit; an outcome whose lease is gone is refused alone.
:func:`report_and_lease` sends them with the lease that fills the slots they
free (one request, one transaction a pass); :func:`report_together` alone.
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
    from watchkeeper.client.failover import FailoverClient

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
    _tell_all(ended, tell)
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
    _settle(ended, answers, forget)


def report_and_lease(
    client: Client | FailoverClient,
    runner_id: str,
    ended: list[HeldTask],
    free: int,
    tell: Callable[[HeldTask, dict[str, Any]], None],
    forget: Callable[[HeldTask], None],
) -> dict[str, Any] | None:
    """Report the outcomes of ``ended`` (each ``tell`` first, once) and lease up to
    ``free`` tasks in the same request; ``forget`` each the server has answered.

    Returns the answer (``tasks``, ``reason``), or ``None`` from a server that takes no
    outcomes with a lease (it predates that; nothing was recorded). A request that fails as a
    whole (``ClientError``) recorded nothing and leased nothing: the outcomes stay
    for the next pass.
    """
    _tell_all(ended, tell)
    try:
        answer = client.runners.report_and_lease(
            runner_id, [_outcome(held) for held in ended], max=free
        )
    except ClientError as exc:
        if exc.status == 422 and "outcomes: Extra inputs" in exc.message:  # a server before
            return None
        raise
    _settle(ended, answer["outcomes"], forget)
    return answer


def _tell_all(ended: list[HeldTask], tell: Callable[[HeldTask, dict[str, Any]], None]) -> None:
    for held in ended:
        if not held.told:
            assert held.outcome is not None
            tell(held, held.outcome)


def _settle(
    ended: list[HeldTask], answers: list[dict[str, Any]], forget: Callable[[HeldTask], None]
) -> None:
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


def report_apart(
    client: Client | FailoverClient,
    ended: list[HeldTask],
    tell: Callable[[HeldTask, dict[str, Any]], None],
    forget: Callable[[HeldTask], None],
) -> None:
    """Report ``ended`` without a lease: several in one request, one alone."""

    def one(held: HeldTask) -> None:
        report_one(client, held, tell, forget)

    if len(ended) > 1:  # ended in the same pass: one request, one commit
        report_together(client, ended, tell, one, forget)
    elif ended:
        one(ended[0])


def report_one(
    client: Client | FailoverClient,
    held: HeldTask,
    tell: Callable[[HeldTask, dict[str, Any]], None],
    forget: Callable[[HeldTask], None],
) -> None:
    """Report one outcome (``tell`` first, once); ``forget`` it once the server answered.
    A request that fails (not for a lost lease) is tried again on the next pass."""
    outcome = held.outcome
    assert outcome is not None
    if not held.told:
        tell(held, outcome)
    try:
        if "succeeded" in outcome:
            client.runners.complete(held.task_id, held.token, outcome["exit_code"])
        else:
            client.runners.fail(
                held.task_id, held.token, outcome["failed"], exit_code=outcome["exit_code"]
            )
    except ClientError as exc:
        if not lease_gone(exc):
            log.warning(
                "Reporting task %s failed, will try again: %s",
                held.task_id,
                exc,
                extra={"action": "runner_report"},
            )
            return
        log.warning(
            "The outcome of task %s was not recorded: %s",
            held.task_id,
            exc.message,
            extra={"action": "runner_report"},
        )
    forget(held)


def lease_gone(exc: ClientError) -> bool:
    """The server's answer means the lease is gone: the task is no longer this runner's."""
    return exc.code == "lease_lost" or exc.status == 404
