"""Presses of one incident arriving together on the event loop are judged together.

When a card is pressed by many people at once, each press used to take its own
thread, read the incident and record its loss alone, queueing for threads,
connections and the write lock. Here the presses of one incident wait on the
event loop instead, and are judged in batches: one thread call per batch reads
the incident once, lets the first press that can decide it claim it, answers
the rest from that decision and records all their losses in one transaction.

A batch holds only presses that arrived before its thread call started, so
what it reads or decides is never older than any of its presses; presses
arriving meanwhile form the next batch, judged from a read of their own. Each
answer still waits for the commit that records its press. Across processes
and replicas the conditional UPDATE still decides alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from watchkeeper.contract import Action
from watchkeeper.decide.actors import Actor
from watchkeeper.errors import WatchkeeperError

#: The answer to a press (the decider's ``PressResult``).
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Ask:
    """One press waiting to be judged: the button, the token it was shown with, who."""

    action: Action
    state_token: str | None
    actor: Actor


@dataclass(frozen=True, slots=True)
class Later(Generic[R]):
    """A press that won: its answer waits for its action, carried out in a thread of its own."""

    work: Callable[[], R]


#: What becomes of one press of a batch: its answer, its action still to carry out, or why
#: it could not be judged. A judge (run in a thread) gives one per press, in order.
Answer: TypeAlias = R | Later[R] | WatchkeeperError


class Crowds(Generic[R]):
    """Batches of presses per incident, on whichever event loop presses them."""

    def __init__(self, judge: Callable[[int, Sequence[Ask]], list[Answer[R]]]) -> None:
        self._judge = judge
        #: (loop, incident id) -> the presses waiting for the next batch of that incident
        self._waiting: dict[
            tuple[asyncio.AbstractEventLoop, int], list[tuple[Ask, asyncio.Future[R]]]
        ] = {}
        #: Running batches and actions, kept so they are not collected half-done.
        self._tasks: set[asyncio.Task[None]] = set()

    async def press(self, incident_id: int, ask: Ask) -> R:
        """Judge ``ask`` with the other presses of ``incident_id`` in flight; its answer."""
        loop = asyncio.get_running_loop()
        key = (loop, incident_id)
        future: asyncio.Future[R] = loop.create_future()
        waiting = self._waiting.get(key)
        if waiting is None:
            waiting = self._waiting[key] = []
            self._keep(loop.create_task(self._serve(key)))
        waiting.append((ask, future))
        return await future

    def _keep(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, key: tuple[asyncio.AbstractEventLoop, int]) -> None:
        """Judge the incident's batches one after another until no press waits."""
        try:
            while batch := self._waiting[key]:
                self._waiting[key] = []
                await self._batch(key[1], batch)
        finally:
            for _, future in self._waiting.pop(key, []):
                _settle(future, WatchkeeperError("not judged: the server is stopping; press again"))

    async def _batch(self, incident_id: int, batch: list[tuple[Ask, asyncio.Future[R]]]) -> None:
        asks = [ask for ask, _ in batch]
        try:
            verdicts = await asyncio.to_thread(self._judge, incident_id, asks)
        except BaseException as exc:
            for _, future in batch:
                _settle(future, exc)
            if isinstance(exc, Exception):
                return
            raise
        loop = asyncio.get_running_loop()
        for (_, future), verdict in zip(batch, verdicts, strict=True):
            if isinstance(verdict, Later):
                # In a task of its own, so a winner's action is carried out even when its
                # caller stops waiting, and the next batch is not held up by it.
                self._keep(loop.create_task(_carry_out(verdict, future)))
            else:
                _settle(future, verdict)


async def _carry_out(later: Later[R], future: asyncio.Future[R]) -> None:
    try:
        answer = await asyncio.to_thread(later.work)
    except BaseException as exc:
        _settle(future, exc)
        if not isinstance(exc, Exception):
            raise
        return
    _settle(future, answer)


def _settle(future: asyncio.Future[R], answer: R | BaseException) -> None:
    if future.done():  # its caller stopped waiting; the press was judged all the same
        return
    if isinstance(answer, asyncio.CancelledError):
        future.cancel()
    elif isinstance(answer, BaseException):
        future.set_exception(answer)
    else:
        future.set_result(answer)
