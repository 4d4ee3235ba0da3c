"""Sends due deliveries: claimed before the wait for their slot, marked started right before
the call, settled after it, never sent twice.

Conversations are served concurrently and each at its platform's pace, so a
dead or slow channel (or one busy chat) never holds up the others. The pace
of a conversation is kept in the store, so every replica keeps to it together.

A claim is taken before the waits (its slot, the platform's calls in flight,
the send gate) and the start of the call is recorded after them, in the same
shared transactions: a process that dies while its rows wait leaves them
claimed but not started, and recovery sends them again. Only a row whose call
had started can have reached the platform; it becomes ``maybe_sent``, unless
the platform recognises a resend (Discord's nonce, an edit).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from watchkeeper.backoff import backoff_delay
from watchkeeper.clock import Clock, Now, WallClock
from watchkeeper.errors import StoreError, StoreUnavailable, WatchkeeperError
from watchkeeper.notify.answer_times import AnswerTimes
from watchkeeper.notify.channels.base import Channel, SendOutcome, SendResult
from watchkeeper.notify.exchanger import Exchanger
from watchkeeper.notify.message import Message, Target
from watchkeeper.notify.sendgate import SendGate
from watchkeeper.store import Store
from watchkeeper.store.outbox import Delivery, DeliveryStatus, Interrupted, PaceRequest
from watchkeeper.store.outbox_batch import ClaimAsk, NotYet, Settlement
from watchkeeper.store.pacing import platform_place
from watchkeeper.supervise import CircuitBreaker, CircuitOpenError

log = logging.getLogger(__name__)
#: Retries of a definite non-send before it is given up as failed.
MAX_ATTEMPTS = 8
#: Ambiguous sends that are safe to repeat (edits, idempotent platforms) are retried this often,
#: whether their answer was lost or their process died mid-call.
MAX_SAFE_RESENDS = 3
#: A call that takes longer than this is abandoned (and counts as "may have been sent").
CALL_TIMEOUT_S = 30.0
#: Longest pause for a conversation's pace inside one pass; longer waits go to the next pass.
MAX_PACE_WAIT_S = 2.0
#: How long a claim lasts: the longest call, the pace wait before it, and room to settle.
CLAIM_FOR = timedelta(seconds=CALL_TIMEOUT_S + MAX_PACE_WAIT_S + 30.0)
#: A live replica's send whose claim ran out this long ago is stuck, not in flight.
ORPHANED_AFTER = timedelta(seconds=10 * CALL_TIMEOUT_S)
#: A send this much later than its slot pushes the conversation's next slot back.
LATE_S = 0.02
#: How far a replica behind its platform-wide schedule may send ahead of an even pace.
GLOBAL_CATCH_UP_S = 0.5
#: Tries of a write recording a call's outcome, over about a minute of database trouble.
KEEP_TRIES = 15


class PlatformFailed(WatchkeeperError):
    """A platform's call failed (unreachable, no answer, a server error): counted by its breaker."""

    def __init__(self, result: SendResult) -> None:
        super().__init__(result.error or "the platform failed")
        self.result = result


def platform_failed(result: SendResult) -> bool:
    """Whether ``result`` is the platform's failure, not an answer about the message.

    A refusal of the message (4xx) or a rate limit (429) proves the platform
    answered; a transport error, a timeout or a server error does not.
    """
    if result.outcome is SendOutcome.MAYBE_SENT:
        return True
    return result.outcome is SendOutcome.RETRY and not (result.error or "").startswith("HTTP 429")


def backoff_s(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` tries: 1, 2, 4 ... capped at 5 minutes."""
    return backoff_delay(max(0, attempts - 1), initial=1.0, factor=2.0, cap=300.0)


class Deliverer:
    """Claims due deliveries and sends them through their channels.

    ``clock`` dates claims and retries; ``pace`` (the wall clock unless given)
    spaces the calls to one conversation. Its slots are shared through the
    store by every replica, so its seconds must be epoch seconds alike on all.
    ``claimer`` names this replica on its claims.
    """

    def __init__(
        self,
        store: Store,
        channels: Mapping[str, Channel],
        clock: Now,
        pace: Clock | None = None,
        *,
        claimer: str | None = None,
    ) -> None:
        self.store = store
        self.channels = dict(channels)
        self.clock = clock
        self.pace: Clock = pace or WallClock()
        self.claimer = claimer or f"{socket.gethostname()}:{os.getpid()}"
        self._bounds: dict[str, asyncio.Semaphore] = {}
        self._gate = SendGate(self.pace)
        self._exchange = Exchanger(
            store,
            clock,
            self.pace,
            claimer=self.claimer,
            claim_for=CLAIM_FOR,
            max_wait_s=MAX_PACE_WAIT_S,
        )
        #: The earliest slot of a conversation held back by its pace (epoch seconds of
        #: ``pace``) in the last pass, or ``None``.
        self.next_slot_s: float | None = None
        #: Each platform's quickest recent answer (seconds from the call going out).
        self._answer_times = AnswerTimes()
        #: A circuit breaker per channel name (set by whoever serves the notifier): a
        #: platform that keeps failing is not called until its breaker lets a probe through.
        self.breakers: dict[str, CircuitBreaker] = {}
        #: Whether this deliverer has claimed anything yet: until it has, rows claimed under
        #: its name are a previous process's (a restart under the same name).
        self._claimed = False

    async def deliver_due(self, limit: int = 200) -> int:
        """Send what is due now; returns how many calls were made."""
        self.next_slot_s = None
        now = self.clock()
        due = await asyncio.to_thread(self.store.outbox.due, now, limit)
        by_place: dict[str, list[Delivery]] = defaultdict(list)
        for delivery in due:
            by_place[Target.from_json(delivery.target).place].append(delivery)
        # Every conversation finishes (and settles) what it started before one's failure is
        # raised: a failing conversation never cuts the others' settlements short.
        done = await asyncio.gather(
            *(self._serve(place, items) for place, items in by_place.items()),
            return_exceptions=True,
        )
        calls = 0
        for outcome in done:
            if isinstance(outcome, BaseException):
                raise outcome
            calls += outcome
        return calls

    def recover_orphaned(self, now: datetime, live: Collection[str]) -> list[int]:
        """Recover the sends in flight whose replica is gone (not in ``live``); returns the ids
        made ``maybe_sent``.

        A row whose call never started goes back to pending; one whose call started is
        sent again where its platform recognises the resend (an edit, Discord's nonce
        within its window), else it is ``maybe_sent``. Before this deliverer's first
        claim, rows under its own name belong to a process before it, dead.
        """
        if not self._claimed:
            live = set(live) - {self.claimer[:200]}
        recovered = self.store.outbox.recover_orphaned(
            now, live, overdue=ORPHANED_AFTER, resend=lambda row: self._resend_interrupted(row, now)
        )
        if recovered.never_started or recovered.resent:
            log.info(
                "Sends cut off by a stopped replica: %d never called, sent again; %d called, "
                "sent again as their platform recognises a resend",
                len(recovered.never_started),
                len(recovered.resent),
                extra={"action": "deliver"},
            )
        return recovered.maybe_sent

    def _resend_interrupted(self, row: Interrupted, now: datetime) -> bool:
        """Whether a call cut off by its process's death may be made again."""
        if row.attempts > MAX_SAFE_RESENDS:
            return False
        first_call = row.unsure_since or row.call_started_at
        return self._recognised(self.channels.get(row.channel), row.purpose, first_call, now)

    @staticmethod
    def _recognised(
        channel: Channel | None, purpose: str, first_call: datetime | None, now: datetime
    ) -> bool:
        """Whether making a call again after one of unknown outcome (started at ``first_call``)
        cannot show the message twice: an edit says the same again; a platform that
        deduplicates creates (Discord's nonce) does so only for a while."""
        if purpose == "update":
            return True
        if channel is None or not channel.idempotent_sends:
            return False
        return first_call is None or now - first_call <= channel.resend_window

    async def _serve(self, place: str, items: list[Delivery]) -> int:
        """One conversation's due rows, in order, each at its slot; other conversations'
        run alongside, sharing their platform's calls in flight and their transactions."""
        calls = 0
        for delivery in items:
            channel = self.channels.get(delivery.channel)
            # The claim and the slot are one transaction: a slot is spent only on a message this
            # replica will send, and a slot too far off leaves the row pending, untouched.
            slot = self._slot(channel, delivery)
            self._claimed = True
            at = await self._exchange.claim(ClaimAsk(delivery.id, slot.gaps, slot.bursts))
            if at is False:
                continue  # another deliverer has it
            if isinstance(at, NotYet):
                self._held_back(at.at_s)
                break  # the rest of this conversation waits for the next pass
            await self.pace.sleep_until(at)  # only this conversation waits
            called_at = self.clock()
            async with self._in_flight(delivery.channel, channel):
                prepared = await self._prepare(channel, delivery)
                if isinstance(prepared, SendResult) or channel is None:
                    result, sent_at = self._no_call(prepared, delivery), at
                else:
                    await self._gate.wait(slot.gaps, slot.bursts)
                    called_at = self.clock()  # no later than the start recorded
                    started = await self._start(delivery)
                    if started is False:
                        log.warning(
                            "Delivery %d was recovered from this replica while it waited; "
                            "not sent here",
                            delivery.id,
                            extra={"action": "deliver"},
                        )
                        continue  # recovered from this replica and claimed again: not ours
                    # Measured as the call goes out, after every wait of ours: a late send
                    # pushes its rows back by what the platform will see.
                    sent_at = self.pace.now()
                    if isinstance(started, SendResult):
                        result = started
                    else:
                        result = await self._call(channel, delivery, prepared)
                    sent_at += self._held_on_the_way(delivery.channel, sent_at)
            holds: dict[str, float] = {}
            if sent_at - at > LATE_S:
                # Sent (or seen by the platform) later than its slot: the next ones keep the
                # whole gap, in the conversation and across the platform.
                holds = {
                    row: sent_at + gap for row, gap in slot.gaps.items() if row not in slot.bursts
                }
            if result.hold_s:
                key = self._pace_key(channel, delivery)
                holds[key] = max(holds.get(key, 0.0), self.pace.now() + result.hold_s)
            await self._keep(self._settlement(delivery, channel, result, called_at), holds)
            calls += 1
        return calls

    async def _start(self, delivery: Delivery) -> bool | SendResult:
        """Record that the call of ``delivery`` starts now: ``True`` to make it, ``False`` when
        the row is no longer this replica's, or how it ends uncalled when the start could
        not be recorded (no call goes out without its start on record)."""
        try:
            return await self._exchange.start(delivery.id)
        except StoreError as exc:
            return SendResult(
                SendOutcome.RETRY,
                error=f"not sent: recording the call's start failed: {exc}",
                retry_after_s=2.0,
                called=False,
            )

    def _held_on_the_way(self, channel_name: str, sent_at: float) -> float:
        """How much longer than the platform's quickest recent answer the call sent at ``sent_at``
        took: the platform may have seen it that much later than it was sent (a burst
        queued at its door), and it judges its limits by when it saw each message."""
        now = self.pace.now()
        return self._answer_times.lag(channel_name, now - sent_at, now)

    def _held_back(self, at_s: float) -> None:
        """A conversation's next slot is at ``at_s``: the next pass need not start later."""
        if self.next_slot_s is None or at_s < self.next_slot_s:
            self.next_slot_s = at_s

    def _pace_key(self, channel: Channel | None, delivery: Delivery) -> str:
        target = Target.from_json(delivery.target)
        return channel.pace_key(target) if channel is not None else target.place

    def _slot(self, channel: Channel | None, delivery: Delivery) -> PaceRequest:
        """The pacing rows a send to ``delivery``'s conversation takes its slot from."""
        target = Target.from_json(delivery.target)
        gap = channel.chat_gap_s(target) if channel is not None else 1.0
        gaps = {self._pace_key(channel, delivery): gap}
        bursts: dict[str, float] = {}
        if channel is not None:
            for row, (row_gap, burst) in channel.burst_paces(target).items():
                gaps[row], bursts[row] = row_gap, burst
            if channel.global_rate:
                row = platform_place(delivery.channel)
                gaps[row] = 1.0 / channel.global_rate
                # Locally only: a replica that fell behind may catch up within the platform's
                # own bucket; the store's schedule keeps the even pace.
                bursts[row] = GLOBAL_CATCH_UP_S
        store_bursts = {row: b for row, b in bursts.items() if not row.startswith("*")}
        return PaceRequest(gaps, self.pace.now(), MAX_PACE_WAIT_S, bursts=store_bursts)

    def _in_flight(self, name: str, channel: Channel | None) -> asyncio.Semaphore:
        """The bound on one platform's calls at once."""
        bound = self._bounds.get(name)
        if bound is None:
            limit = channel.max_in_flight if channel is not None else 1
            bound = self._bounds[name] = asyncio.Semaphore(limit)
        return bound

    async def _keep(self, settlement: Settlement, holds: dict[str, float]) -> None:
        """Record what a call did: tried again while the database is away for a moment,
        since a row left ``sending`` would be marked "maybe sent" although it went."""
        for attempt in range(KEEP_TRIES):
            try:
                await self._exchange.settle(settlement, holds)
                return
            except StoreUnavailable as exc:
                if attempt == KEEP_TRIES - 1:
                    raise
                delay = backoff_delay(attempt, initial=0.2, factor=2.0, cap=5.0)
                log.warning(
                    "Recording a delivery failed (%s); trying again in %.1f s",
                    exc,
                    delay,
                    extra={"action": "deliver"},
                )
                await asyncio.sleep(delay)

    def _no_call(self, prepared: Target | SendResult, delivery: Delivery) -> SendResult:
        if isinstance(prepared, SendResult):
            return prepared
        return SendResult(SendOutcome.FAILED, error=f"channel {delivery.channel} is not configured")

    async def _prepare(self, channel: Channel | None, delivery: Delivery) -> Target | SendResult:
        """Where the call goes, or how it ends without one."""
        if channel is None:
            return SendResult(
                SendOutcome.FAILED, error=f"channel {delivery.channel} is not configured"
            )
        if delivery.unsure_since is not None and not self._recognised(
            channel, delivery.purpose, delivery.unsure_since, self.clock()
        ):
            return SendResult(
                SendOutcome.MAYBE_SENT,
                called=False,
                error="sent before with no answer, too long ago for the platform to recognise "
                "a resend: not sent again",
            )
        target = Target.from_json(delivery.target)
        if target.card is None and delivery.purpose != "update":
            return target  # nothing to look up: no trip to a thread
        return await asyncio.to_thread(self._anchor, delivery)

    async def _call(self, channel: Channel, delivery: Delivery, target: Target) -> SendResult:
        breaker = self.breakers.get(delivery.channel)
        if breaker is None:
            return await self._call_channel(channel, delivery, target)
        try:
            return await breaker.call_async(self._call_counted, channel, delivery, target)
        except PlatformFailed as failed:
            return failed.result
        except CircuitOpenError as exc:
            # Not called: the row waits (as a definite non-send) until the breaker may probe.
            return SendResult(
                SendOutcome.RETRY, error=str(exc), retry_after_s=exc.retry_in_s, called=False
            )

    async def _call_counted(
        self, channel: Channel, delivery: Delivery, target: Target
    ) -> SendResult:
        """The call, raising :class:`PlatformFailed` when the platform failed (for its breaker)."""
        result = await self._call_channel(channel, delivery, target)
        if platform_failed(result):
            raise PlatformFailed(result)
        return result

    async def _call_channel(
        self, channel: Channel, delivery: Delivery, target: Target
    ) -> SendResult:
        message = Message.from_json(delivery.payload)
        try:
            async with asyncio.timeout(CALL_TIMEOUT_S):
                if delivery.purpose == "update":
                    return await channel.edit(target, message)
                return await channel.send(target, message, f"wk{delivery.id}")
        except TimeoutError:
            return SendResult(
                SendOutcome.MAYBE_SENT, error=f"no answer within {CALL_TIMEOUT_S:g} s"
            )
        except Exception as exc:  # a channel's bug must not lose the row in 'sending'
            log.exception(
                "Channel %s failed unexpectedly", delivery.channel, extra={"action": "deliver"}
            )
            return SendResult(SendOutcome.MAYBE_SENT, error=f"{type(exc).__name__}: {exc}")

    def _anchor(self, delivery: Delivery) -> Target | SendResult:
        """Where an edit or a note goes, now that its card may have been sent: the card's
        message to edit or to thread under. An edit older than one already made of the same
        card is not made: it would put back what the card no longer says."""
        target = Target.from_json(delivery.target)
        if target.card is not None:
            card = next(
                (
                    d
                    for d in self.store.outbox.for_incident(delivery.incident_id or 0)
                    if d.dedup_key == target.card
                ),
                None,
            )
            target = replace(target, card=None)
            sent = card is not None and card.status is DeliveryStatus.SENT
            if card is not None and sent and card.platform_message_id:
                if delivery.purpose == "update":
                    target = replace(target, message_id=card.platform_message_id)
                else:
                    target = replace(target, reply_to=card.platform_message_id)
            elif card is not None and card.status in {
                DeliveryStatus.PENDING,
                DeliveryStatus.SENDING,
            }:
                return SendResult(
                    SendOutcome.RETRY,
                    error="waiting for its card to be sent first",
                    retry_after_s=2.0,
                    called=False,
                )
            elif delivery.purpose == "update":
                return SendResult(SendOutcome.FAILED, error="its card did not arrive: no edit")
            # else a note whose card did not arrive goes out on its own
        if delivery.purpose == "update" and self._superseded(delivery, target):
            return SendResult(SendOutcome.SENT, message_id=target.message_id)
        return target

    def _superseded(self, delivery: Delivery, target: Target) -> bool:
        if delivery.incident_id is None or not target.message_id:
            return False
        for later in self.store.outbox.for_incident(delivery.incident_id):
            if later.id <= delivery.id or later.purpose != "update":
                continue
            if later.status is not DeliveryStatus.SENT or later.channel != delivery.channel:
                continue
            edited = Target.from_json(later.target)
            if target.message_id in {edited.message_id, later.platform_message_id}:
                return True
        return False

    def _settlement(
        self, delivery: Delivery, channel: Channel | None, result: SendResult, called_at: datetime
    ) -> Settlement:
        """What the row becomes after its call started at ``called_at`` (logged unless sent)."""
        attempts = delivery.attempts + (1 if result.called else 0)
        outcome = result.outcome
        unsure_since = delivery.unsure_since or called_at
        unsure = outcome is SendOutcome.MAYBE_SENT and result.called
        if (
            unsure
            and attempts <= MAX_SAFE_RESENDS
            and self._recognised(channel, delivery.purpose, unsure_since, self.clock())
        ):
            outcome = SendOutcome.RETRY  # the platform (or an edit) makes a resend harmless
        if outcome is SendOutcome.RETRY and attempts >= MAX_ATTEMPTS:
            outcome = SendOutcome.FAILED
        if outcome is SendOutcome.SENT:
            return Settlement(delivery.id, DeliveryStatus.SENT.value, message_id=result.message_id)
        log.warning(
            "Delivery %d to %s: %s (%s)",
            delivery.id,
            delivery.channel,
            outcome.value,
            result.error,
            extra={"action": "deliver"},
        )
        if outcome is SendOutcome.RETRY:
            delay = max(result.retry_after_s or 0.0, backoff_s(attempts))
            return Settlement(
                delivery.id,
                DeliveryStatus.PENDING.value,
                error=result.error,
                next_attempt_at=self.clock() + timedelta(seconds=delay),
                uncalled=not result.called,
                unsure_since=unsure_since if unsure else None,
            )
        status = (
            DeliveryStatus.FAILED if outcome is SendOutcome.FAILED else DeliveryStatus.MAYBE_SENT
        )
        return Settlement(delivery.id, status.value, error=result.error)
