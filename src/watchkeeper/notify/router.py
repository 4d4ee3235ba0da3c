"""From incident events to deliveries: who is told what, where, exactly once.

- A card goes to the chat (and thread) the work started from; work with no
  chat goes to the ops channels. A condition the kind already alerts on by
  itself (``reports``) gets no message: its incidents stay on the dashboard
  and in ``/runs``.
- ``opened`` and ``reopened`` send the card; ``moved_again`` one short note;
  ``decided`` edits every card already sent for the incident; a diagnosis, a
  runbook step and a failed or interrupted action post a note. Nothing else.
- Every delivery's dedup key is the event, the place and the purpose, so
  routing the same event twice (after a crash, or on two replicas) enqueues
  nothing new.
- An event is routed once its deliveries are queued: both happen in one
  transaction, and routing reads the events not yet marked, whatever order
  their transactions committed in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from watchkeeper.config import KindConfig, OpsConfig
from watchkeeper.contract import Action
from watchkeeper.decide.decider import Decider
from watchkeeper.errors import NotFound
from watchkeeper.notify import cards
from watchkeeper.notify.message import Message, Target
from watchkeeper.store import Store
from watchkeeper.store.incidents import Incident, IncidentEvent
from watchkeeper.store.outbox import DeliveryStatus
from watchkeeper.store.queueing import NewDelivery

CHAT_PLATFORMS = frozenset({"telegram", "discord", "slack"})
#: Platforms whose cards keep their buttons once decided; a later press is told who won.
KEEPS_BUTTONS = frozenset({"slack"})
_NOTES = {"runbook", "action_failed", "action_interrupted"}


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

    def targets(self, incident: Incident) -> list[Target]:
        """Where this incident's messages go."""
        origin = incident.origin or {}
        platform = origin.get("platform")
        if platform in CHAT_PLATFORMS and origin.get("chat_id"):
            return [Target(str(platform), str(origin["chat_id"]), origin.get("thread_id"))]
        return [parse_place(entry) for entry in self.ops.channels]

    def route(self, now: datetime, limit: int = 500) -> int:
        """Route up to ``limit`` events not yet routed, oldest first; returns how many
        deliveries were enqueued."""
        events = self.store.incidents.unrouted(limit)
        if not events:
            return 0
        incidents: dict[int, Incident] = {}
        items = []
        for event_id, incident_id, event in events:
            incident = incidents.get(incident_id) or self._incident(incident_id)
            if incident is None:
                continue  # deleted since: marked routed below, with nothing to say
            incidents[incident_id] = incident
            items.extend(self._deliveries(event_id, incident, event))
        # Queue and mark in one transaction: a crash before it leaves the events unrouted for
        # the next pass, and dedup keys make a second routing (another replica) enqueue nothing.
        ids = [event_id for event_id, _, _ in events]
        return self.store.incidents.mark_routed(ids, items, now)

    def _incident(self, incident_id: int) -> Incident | None:
        try:
            return self.store.incidents.get(incident_id, with_events=False)
        except NotFound:
            return None

    def _reports_itself(self, incident: Incident) -> bool:
        kind = self.kinds.get(incident.key.kind)
        return kind is not None and kind.self_reports(incident.key.condition)

    def _deliveries(
        self, event_id: int, incident: Incident, event: IncidentEvent
    ) -> list[NewDelivery]:
        if self._reports_itself(incident):
            return []
        if event.type in {"opened", "reopened"}:
            message = cards.card(incident, self.decider.offered(incident))
            return self._to_all(event_id, incident, "card", message)
        if event.type == "moved_again":
            return self._to_all(
                event_id, incident, "note", cards.moved_note(incident, event.detail)
            )
        if event.type == "diagnosis":
            return self._to_all(
                event_id, incident, "diagnosis", cards.diagnosis_note(incident, event.detail or "")
            )
        if event.type in _NOTES:
            return self._to_all(
                event_id, incident, "note", cards.event_note(incident, event.detail or event.type)
            )
        if event.type == "decided":
            return self._updates(event_id, incident)
        return []

    def _to_all(
        self, event_id: int, incident: Incident, purpose: str, message: Message
    ) -> list[NewDelivery]:
        return [
            NewDelivery(
                f"e{event_id}:{target.place}:{purpose}",
                incident.id,
                purpose,
                target.channel,
                target.as_json(),
                message.as_json(),
            )
            for target in self.targets(incident)
        ]

    def _updates(self, event_id: int, incident: Incident) -> list[NewDelivery]:
        items = []
        for sent in self.store.outbox.for_incident(incident.id):
            if (
                sent.purpose != "card"
                or sent.status is not DeliveryStatus.SENT
                or not sent.platform_message_id
            ):
                continue
            target = Target.from_json({**sent.target, "message_id": sent.platform_message_id})
            keep: list[Action] | None = None
            if target.channel in KEEPS_BUTTONS:
                keep = [Action(b["action"]) for b in sent.payload.get("buttons", [])]
            message = cards.decided_card(incident, keep_buttons=keep)
            items.append(
                NewDelivery(
                    f"e{event_id}:{target.place}:{sent.id}:update",
                    incident.id,
                    "update",
                    target.channel,
                    target.as_json(),
                    message.as_json(),
                )
            )
        return items
