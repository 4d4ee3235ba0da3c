"""The claims, starts and settlements of every conversation served at once, one transaction
a round.

Each conversation's task asks for its claim before it waits for its slot,
marks its call started right before the call, and settles right after; what
the tasks ask while a transaction is under way waits for the next one, which
takes it all. A lone conversation still gets its own transaction at once,
and a claim or a start is answered only after the commit that holds it, so
every call follows its own durable claim and start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from watchkeeper.clock import Clock, Now
from watchkeeper.errors import StoreError, StoreUnavailable
from watchkeeper.store import Store
from watchkeeper.store.outbox_batch import ClaimAsk, Exchange, NotYet, Settlement

#: Claims and settlements one transaction takes at most; the rest go in the next.
MOST = 256

Answer = float | bool | NotYet


@dataclass(eq=False)
class _Ask:
    claim: ClaimAsk | None
    settlement: Settlement | None
    holds: Mapping[str, float]
    #: A row whose call starts now.
    start: int | None = None
    answer: asyncio.Future[Answer | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Exchanger:
    """Gathers claims and settlements into shared transactions (see the module's text).

    ``clock`` dates claims and settlements, ``pace`` gives the slots' now;
    claims are ``claimer``'s for ``claim_for`` and wait at most ``max_wait_s``
    for their slot.
    """

    def __init__(
        self,
        store: Store,
        clock: Now,
        pace: Clock,
        *,
        claimer: str,
        claim_for: timedelta,
        max_wait_s: float,
    ) -> None:
        self.store = store
        self.clock = clock
        self.pace = pace
        self.claimer = claimer
        self.claim_for = claim_for
        self.max_wait_s = max_wait_s
        self._waiting: list[_Ask] = []
        self._draining: asyncio.Task[None] | None = None
        #: Sizes of the transactions made, newest last; a few kept.
        self.recent: list[int] = []

    async def claim(self, ask: ClaimAsk) -> Answer:
        """Claim one row and take its slot: the moment (of ``pace``) its call may go,
        ``False`` when another deliverer has it, ``NotYet`` when its slot is too far off."""
        answer = await self._ask(_Ask(ask, None, {}))
        assert answer is not None
        return answer

    async def start(self, delivery_id: int) -> bool:
        """Record that the claimed row's call starts now; False when the row is no longer
        this claimer's (recovered from it and claimed again): it must not be called then."""
        return await self._ask(_Ask(None, None, {}, start=delivery_id)) is True

    async def settle(self, settlement: Settlement, holds: Mapping[str, float]) -> None:
        """Record how a call ended, and keep pacing rows from a slot before their moments."""
        await self._ask(_Ask(None, settlement, holds))

    async def _ask(self, ask: _Ask) -> Answer | None:
        self._waiting.append(ask)
        if self._draining is None or self._draining.done():
            self._draining = asyncio.create_task(self._drain())
        return await ask.answer

    async def _drain(self) -> None:
        # One turn of the loop first: every conversation woken with this one asks too.
        await asyncio.sleep(0)
        while self._waiting:
            group, self._waiting = self._waiting[:MOST], self._waiting[MOST:]
            await self._run(group)

    async def _run(self, group: list[_Ask]) -> None:
        try:
            answers = await asyncio.to_thread(self._record, group)
        except StoreError as exc:
            if len(group) > 1 and not isinstance(exc, StoreUnavailable):
                # Nothing of the group was recorded: alone, one bad request fails only itself.
                for ask in group:
                    await self._run([ask])
                return
            for ask in group:
                if not ask.answer.done():
                    ask.answer.set_exception(exc)
            return
        except BaseException as exc:
            for ask in group:
                if not ask.answer.done():
                    ask.answer.set_exception(exc)
            raise
        for ask, answer in zip(group, answers, strict=True):
            if not ask.answer.done():
                ask.answer.set_result(answer)

    def _record(self, group: list[_Ask]) -> list[Answer | None]:
        holds: dict[str, float] = {}
        for ask in group:
            for place, until in ask.holds.items():
                holds[place] = max(holds.get(place, until), until)
        claims = [ask.claim for ask in group if ask.claim is not None]
        exchange = Exchange(
            self.claimer,
            self.clock(),
            self.claim_for,
            self.pace.now(),
            self.max_wait_s,
            settlements=[ask.settlement for ask in group if ask.settlement is not None],
            holds=holds,
            claims=claims,
            starts=[ask.start for ask in group if ask.start is not None],
        )
        exchanged = self.store.outbox.exchange(exchange)
        claimed = iter(exchanged.claims)
        self.recent = [*self.recent[-15:], len(group)]
        answers: list[Answer | None] = []
        for ask in group:
            if ask.claim is not None:
                answers.append(next(claimed))
            elif ask.start is not None:
                answers.append(ask.start in exchanged.started)
            else:
                answers.append(None)
        return answers
