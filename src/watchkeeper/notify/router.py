"""From incident events to deliveries: who is told what, where, exactly once.

- A card goes to the chat (and thread) the work started from; work with no
  chat goes to the ops channels. A program's run says where its notices go
  now (its ``notify``, else its group's), read again each routing pass: once
  the place changes, the next card (a crash loop again) goes to the new one.
  A condition the kind already alerts on by itself (``reports``) gets no
  message: its incidents stay on the dashboard and in ``/runs``.
- One card per incident and place, for its whole life: ``opened`` sends it.
  Everything after is an edit of that card and, where people should hear of
  it, a short note threaded under it (a reply, a thread, a topic):
  ``moved_again`` a note, and the card says it moves again (no buttons);
  ``reopened`` (the same work in the same state again) a note, and the card's
  buttons come back; ``decided`` edits the card to say who decided what; a
  failed or interrupted action a note, and the card says what happened, in
  words, with its buttons back; ``resolved`` the card's last edit, saying how
  it ended. Only where no card went out does ``reopened`` send one.
- Telegram and Discord cards lose their buttons while there is nothing to
  press; Slack cards keep theirs, and a press is answered with the outcome.
- Diagnoses and runbook steps are notes under the card too. Nothing else.
- Edits and notes name the card's row (by its dedup key) when its platform
  id is not known yet, even a card queued by the same pass: the sender reads
  the id just before the call.
- Every delivery's dedup key is the event, the place and the purpose, so
  routing the same event twice (after a crash, or on two replicas) enqueues
  nothing new.
- An event is routed once its deliveries are queued: both happen in one
  transaction, and routing reads the events not yet marked, whatever order
  their transactions committed in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from watchkeeper.config import KindConfig, OpsConfig
from watchkeeper.contract import Action
from watchkeeper.decide.decider import Decider
from watchkeeper.decide.offer import label
from watchkeeper.errors import NotFound, StoredDataUnreadable
from watchkeeper.notify import cards
from watchkeeper.notify.message import Message, Target
from watchkeeper.notify.silences import SilenceGate, with_care_buttons
from watchkeeper.store import Store
from watchkeeper.store.decisions import ActionRecord, ActionStatus
from watchkeeper.store.incidents import Incident, IncidentEvent, IncidentStatus
from watchkeeper.store.outbox import Delivery, DeliveryStatus
from watchkeeper.store.queueing import NewDelivery
from watchkeeper.store.routing_reads import RoutingReads

CHAT_PLATFORMS = frozenset({"telegram", "discord", "slack"})
#: The adapter of the kinds whose runs are programs, routed by their ``notify``.
PROGRAM_ADAPTER = "program"
#: Platforms whose cards keep their buttons once decided; a later press is told who won.
KEEPS_BUTTONS = frozenset({"slack"})
_NOTES = {"runbook"}


def parse_place(entry: str) -> Target:
    """``slack:C1/1700000000.1``, ``telegram:-100123/7``, ``log``, ``webhook`` → a target."""
    if entry in {"log", "webhook"}:
        return Target(entry)
    platform, _, rest = entry.partition(":")
    chat, _, thread = rest.partition("/")
    return Target(platform, chat, thread or None)


class Router:
    """Turns incident events not yet routed into deliveries, and marks them routed.

    ``decider`` says which buttons a card offers; ``ops`` where work with no
    chat is reported; ``kinds`` which kinds report their own alerts.
    """

    def __init__(
        self,
        store: Store,
        decider: Decider,
        ops: OpsConfig,
        kinds: Mapping[str, KindConfig],
        channels: Sequence[str],
    ) -> None:
        self.store = store
        self.decider = decider
        self.ops = ops
        self.kinds = kinds
        self.channels = frozenset(channels)
        self.silences = SilenceGate(store, decider)
        self._reads = RoutingReads(store.engine)
        #: Cards the routing pass under way queued, by incident and place.
        self._queued: dict[int, dict[str, _Card]] = {}
        #: The action journals the routing pass under way read, by incident.
        self._journals: Mapping[int, Sequence[ActionRecord]] = {}
        #: Where each program's notices go, as this pass read it, by kind and run id.
        self._routes: dict[tuple[str, str], Mapping[str, Any] | None] = {}

    def targets(self, incident: Incident) -> list[Target]:
        """Where this incident's messages go."""
        origin = (self._route(incident) if self._routed(incident) else incident.origin) or {}
        platform = origin.get("platform")
        if platform in CHAT_PLATFORMS and origin.get("chat_id"):
            return [Target(str(platform), str(origin["chat_id"]), origin.get("thread_id"))]
        return [parse_place(entry) for entry in self.ops.channels]

    def _routed(self, incident: Incident) -> bool:
        """Whether the incident's work is a program's, whose run says where its notices go."""
        kind = self.kinds.get(incident.key.kind)
        return kind is not None and kind.adapter == PROGRAM_ADAPTER

    def _route(self, incident: Incident) -> Mapping[str, Any] | None:
        """Where a program's notices go now, as its run holds it (``None``: ops)."""
        key = (incident.key.kind, incident.key.run_id)
        if key not in self._routes:
            try:
                self._routes[key] = self.store.runs.get(*key).origin
            except (NotFound, StoredDataUnreadable):
                self._routes[key] = None  # no run to say otherwise: ops, as for any work
        return self._routes[key]

    def route(self, now: datetime, limit: int = 500) -> int:
        """Route up to ``limit`` events not yet routed, oldest first; returns how many
        deliveries were enqueued."""
        self._routes = {}  # a place changed since the last pass is read again
        events = self.store.incidents.unrouted(limit)
        if not events:
            return 0
        # Cards queued by this pass are not in the outbox yet; later events edit them and
        # thread under them all the same, by their dedup keys.
        self._queued = {}
        incident_ids = {incident_id for _, incident_id, _ in events}
        reads = self._reads.read(incident_ids)
        self._journals = reads.journals
        try:
            with self.silences.routing(incident_ids, reads.journals):
                items = self._route_events(events, reads.incidents)
        finally:
            self._journals = {}
        # Queue and mark in one transaction: a crash before it leaves the events unrouted for
        # the next pass, and dedup keys make a second routing (another replica) enqueue nothing.
        ids = [event_id for event_id, _, _ in events]
        return self.store.outbox.route(ids, items, now)

    def _route_events(
        self,
        events: Sequence[tuple[int, int, IncidentEvent]],
        incidents: Mapping[int, Incident],
    ) -> list[NewDelivery]:
        items: list[NewDelivery] = []
        for event_id, incident_id, event in events:
            incident = incidents.get(incident_id)
            if incident is None:
                continue  # deleted since: marked routed below, with nothing to say
            made = self._deliveries(event_id, incident, event)
            for item in made:
                if item.purpose == "card":
                    place = Target.from_json(item.target).place
                    self._queued.setdefault(incident_id, {}).setdefault(place, _Card.queued(item))
            items.extend(made)
        return items

    def _reports_itself(self, incident: Incident) -> bool:
        kind = self.kinds.get(incident.key.kind)
        return kind is not None and kind.self_reports(incident.key.condition)

    def _deliveries(
        self, event_id: int, incident: Incident, event: IncidentEvent
    ) -> list[NewDelivery]:
        if self._reports_itself(incident):
            return []
        items = self._for_event(event_id, incident, event)
        if items and self.silences.holds(incident, event):
            # A silence keeps new posts back; edits of cards already sent still happen.
            return [item for item in items if item.purpose == "update"]
        return items

    def _for_event(
        self, event_id: int, incident: Incident, event: IncidentEvent
    ) -> list[NewDelivery]:
        if event.type == "opened":
            message = self.silences.card(incident)
            return self._to_all(event_id, incident, "card", message)
        if event.type == "reopened":
            return self._again(event_id, incident, event)
        if event.type == "moved_again":
            line = cards.moved_line(event.at, event.detail)
            note = cards.moved_note(incident, event.detail)
            return self._to_all(event_id, incident, "note", note) + self._edits(
                event_id, incident, lambda sent: self._settled(incident, sent, line)
            )
        if event.type == "resolved":
            line = cards.resolved_line(incident)
            return self._edits(
                event_id, incident, lambda sent: self._settled(incident, sent, line, live=False)
            )
        if event.type in {"action_failed", "action_interrupted"}:
            return self._action_ended(event_id, incident, event)
        if event.type == "diagnosis":
            return self._to_all(
                event_id, incident, "diagnosis", cards.diagnosis_note(incident, event.detail or "")
            )
        if event.type in _NOTES:
            return self._to_all(
                event_id, incident, "note", cards.event_note(incident, event.detail or event.type)
            )
        if event.type == "decided":
            return self._edits(event_id, incident, lambda sent: self._settled(incident, sent, None))
        if event.type == "acknowledged":
            return self.silences.ack_updates(event_id, incident)
        return []

    def _to_all(
        self, event_id: int, incident: Incident, purpose: str, message: Message
    ) -> list[NewDelivery]:
        found = {} if purpose == "card" else self._cards(incident)
        return [
            NewDelivery(
                f"e{event_id}:{target.place}:{purpose}",
                incident.id,
                purpose,
                target.channel,
                _under(target, found.get(target.place)).as_dict(),
                message.as_dict(),
            )
            for target in self.targets(incident)
        ]

    def _cards(self, incident: Incident) -> dict[str, _Card]:
        """The first card of ``incident`` in each place, unless it was refused for good."""
        found: dict[str, _Card] = {}
        for sent in self.store.outbox.for_incident(incident.id):
            if sent.purpose == "card" and sent.status is not DeliveryStatus.FAILED:
                found.setdefault(Target.from_json(sent.target).place, _Card.of(sent))
        for place, card in self._queued.get(incident.id, {}).items():
            found.setdefault(place, card)
        return found

    def _edits(
        self, event_id: int, incident: Incident, render: Callable[[_Card], Message]
    ) -> list[NewDelivery]:
        """An edit of every card of ``incident`` that can be edited, each as ``render`` says."""
        items = []
        for sent in self._cards(incident).values():
            target = _card_target(sent)
            if target is None:
                continue
            items.append(
                NewDelivery(
                    f"e{event_id}:{target.place}:{sent.ref}:update",
                    incident.id,
                    "update",
                    target.channel,
                    target.as_dict(),
                    render(sent).as_dict(),
                )
            )
        return items

    def _settled(
        self, incident: Incident, sent: _Card, line: str | None, *, live: bool = True
    ) -> Message:
        """The card with nothing to press for now; where a platform keeps its buttons, the
        card's own (and, while the incident is ``live``, silence and acknowledgement)."""
        keep: list[Action] | None = None
        if sent.channel in KEEPS_BUTTONS:
            decisions = {a.value for a in Action}
            keep = [
                Action(b["action"])
                for b in sent.payload.get("buttons", [])
                if b["action"] in decisions  # not "Silence 1 h" and "I am on it"
            ]
        message = cards.settled_card(incident, line, keep_buttons=keep)
        if keep is not None and live:  # until it resolves, it can still be silenced or taken on
            message = with_care_buttons(message, incident)
        return message

    def _live(self, incident: Incident, line: str) -> Message:
        """The card with its buttons back, if the incident can be decided now."""
        if incident.status is IncidentStatus.RESOLVED or incident.decision is not None:
            return cards.settled_card(incident, line)
        return cards.with_line(self.silences.card(incident), line)

    def _again(self, event_id: int, incident: Incident, event: IncidentEvent) -> list[NewDelivery]:
        """The same work in the same state again: a note under the first card, whose buttons
        come back; a card only where none went out before."""
        found = self._cards(incident)
        items = []
        for target in self.targets(incident):
            sent = found.get(target.place)
            edit = None if sent is None else _card_target(sent)
            if sent is None or edit is None:
                message = self.silences.card(incident)
                items.append(
                    NewDelivery(
                        f"e{event_id}:{target.place}:card",
                        incident.id,
                        "card",
                        target.channel,
                        target.as_dict(),
                        message.as_dict(),
                    )
                )
                continue
            note = cards.again_note(incident)
            card = self._live(incident, cards.again_line(incident, event.at))
            items += [
                NewDelivery(
                    f"e{event_id}:{target.place}:note",
                    incident.id,
                    "note",
                    target.channel,
                    _under(target, sent).as_dict(),
                    note.as_dict(),
                ),
                NewDelivery(
                    f"e{event_id}:{target.place}:{sent.ref}:update",
                    incident.id,
                    "update",
                    edit.channel,
                    edit.as_dict(),
                    card.as_dict(),
                ),
            ]
        return items

    def _action_ended(
        self, event_id: int, incident: Incident, event: IncidentEvent
    ) -> list[NewDelivery]:
        """A decided action that did not happen: the card says what and why, in words, and
        offers its buttons again; a note under it tells the conversation."""
        status = ActionStatus.FAILED if event.type == "action_failed" else ActionStatus.INTERRUPTED
        journal = self._journal(incident.id)
        record = next(
            (a for a in reversed(journal) if a.status is status and a.finished_at == event.at),
            journal[-1] if journal else None,
        )
        name = label(record.action) if record is not None else "The action"
        if status is ActionStatus.FAILED:
            words = event.detail or "the kind gave no reason"
            line = cards.action_failed_line(name, event.at, words)
            what = f"{name} failed: {words}"
        else:
            line = cards.action_interrupted_line(name, event.at)
            what = f"{name} was interrupted by a restart: check the work before acting again"
        card = self._live(incident, line)
        note = cards.action_note(incident, what)
        return self._to_all(event_id, incident, "note", note) + self._edits(
            event_id, incident, lambda _: card
        )

    def _journal(self, incident_id: int) -> Sequence[ActionRecord]:
        found = self._journals.get(incident_id)
        return self.store.decisions.actions_for_incident(incident_id) if found is None else found


@dataclass(frozen=True, slots=True)
class _Card:
    """A card as later events see it: in the outbox, or queued by the same routing pass."""

    dedup_key: str
    channel: str
    target: dict[str, Any]
    payload: dict[str, Any]
    status: DeliveryStatus
    message_id: str | None = None
    id: int | None = None

    @classmethod
    def of(cls, sent: Delivery) -> _Card:
        return cls(
            sent.dedup_key,
            sent.channel,
            sent.target,
            sent.payload,
            sent.status,
            sent.platform_message_id,
            sent.id,
        )

    @classmethod
    def queued(cls, item: NewDelivery) -> _Card:
        return cls(item.dedup_key, item.channel, item.target, item.payload, DeliveryStatus.PENDING)

    @property
    def ref(self) -> str:
        """Names the card in the dedup keys of its edits."""
        return str(self.id) if self.id is not None else self.dedup_key

    @property
    def waiting(self) -> bool:
        return self.status in {DeliveryStatus.PENDING, DeliveryStatus.SENDING}


def _card_target(sent: _Card) -> Target | None:
    """Where an edit of the card ``sent`` goes: its message once sent, or the card's row while
    it waits to be sent (the sender reads its message id then); ``None`` when it cannot be
    edited (it may not have arrived, or its platform gave no id)."""
    target = Target.from_json(sent.target)
    if sent.status is DeliveryStatus.SENT and sent.message_id:
        return replace(target, message_id=sent.message_id)
    if sent.waiting:
        return replace(target, card=sent.dedup_key)
    return None


def _under(target: Target, card: _Card | None) -> Target:
    """``target``, threaded under ``card`` where there is one to thread under."""
    if card is None:
        return target
    if card.status is DeliveryStatus.SENT and card.message_id:
        return replace(target, reply_to=card.message_id)
    if card.waiting:
        return replace(target, card=card.dedup_key)
    return target
