"""Silences and acknowledgement in the conversation.

- While a silence matches an incident, nothing new is posted about it (no
  card, no note); edits of cards already sent still happen. The incident is
  remembered as held back by that silence.
- When a silence ends (its time ran out, or someone expired it), one message
  says what it covered and what is still open: to the chat its incidents
  would have gone to when they share one (or the chat it matched), else to
  the ops channels. It is queued in the transaction that marks the silence
  announced, under a dedup key of its own, so it is sent once across
  restarts and replicas.
- Every card carries "Silence 1 h" (that piece of work) and "I am on it";
  an acknowledgement edits the cards already sent to say who is looking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta

from watchkeeper.decide.actors import Actor, via_label
from watchkeeper.decide.decider import Decider
from watchkeeper.errors import NotFound
from watchkeeper.notify import cards
from watchkeeper.notify.message import (
    Button,
    Message,
    Target,
    button_data,
    parse_button,
    token_digest,
)
from watchkeeper.store import Store
from watchkeeper.store.decisions import ActionRecord, Press
from watchkeeper.store.incidents import LIVE_STATUSES, Incident, IncidentEvent, IncidentStatus
from watchkeeper.store.outbox import DeliveryStatus
from watchkeeper.store.queueing import NewDelivery
from watchkeeper.watch.silences import (
    Ack,
    Matchers,
    Silence,
    SilenceService,
    current_ack,
    describe,
    matches,
)

SILENCE = "silence_1h"
ACK = "ack"
#: The buttons every card carries besides its decisions: (label, action).
CARE_BUTTONS = (("Silence 1 h", SILENCE), ("I am on it", ACK))
#: How long the card's silence lasts.
CARD_SILENCE = timedelta(hours=1)
#: Events that only edit cards already sent: a silence does not hold them back.
_EDITS = frozenset({"decided", "acknowledged", "resolved"})
STALE = "the work has moved on since this was shown; look again before acting"


def with_care_buttons(message: Message, incident: Incident) -> Message:
    """``message`` (an open incident's card) with "Silence 1 h" and "I am on it" added."""
    extra = tuple(
        Button(text, action, button_data(incident.id, action, incident.state_token))
        for text, action in CARE_BUTTONS
    )
    return Message(message.text, message.buttons + extra, message.headline)


def ack_line(ack: Ack) -> str:
    """``On it: @ana (Telegram) since 14:02 UTC``."""
    return f"On it: {ack.actor} ({via_label(ack.via)}) since {ack.at:%H:%M} UTC"


class SilenceGate:
    """What the router asks about silences and acknowledgements."""

    def __init__(self, store: Store, decider: Decider) -> None:
        self.store = store
        self.decider = decider
        #: Within a routing pass: each incident's acknowledgement, read once for them all.
        self._acks: dict[int, Ack | None] | None = None
        #: Within a routing pass: the silences active at each moment asked about.
        self._active: dict[datetime, list[Silence]] | None = None
        #: Within a routing pass: each incident's action journal, read once for them all.
        self._journals: Mapping[int, Sequence[ActionRecord]] = {}

    @contextmanager
    def routing(
        self,
        incident_ids: Iterable[int],
        journals: Mapping[int, Sequence[ActionRecord]] | None = None,
    ) -> Iterator[None]:
        """One routing pass over the events of ``incident_ids``: the acknowledgements and
        the silences in force are read once for the pass, not once per incident; the
        cards' buttons are judged from ``journals`` where the pass read them."""
        ids = sorted(set(incident_ids))
        found = self.store.acks.for_incidents(ids)
        self._acks = {incident_id: found.get(incident_id) for incident_id in ids}
        self._active = {}
        self._journals = journals or {}
        try:
            yield
        finally:
            self._acks = self._active = None
            self._journals = {}

    def _silences_at(self, at: datetime) -> list[Silence]:
        if self._active is None:
            return self.store.silences.list(active_at=at, limit=1000)
        if at not in self._active:
            self._active[at] = self.store.silences.list(active_at=at, limit=1000)
        return self._active[at]

    def _ack_of(self, incident_id: int) -> Ack | None:
        if self._acks is not None and incident_id in self._acks:
            return self._acks[incident_id]
        return self.store.acks.for_incidents([incident_id]).get(incident_id)

    def holds(self, incident: Incident, event: IncidentEvent) -> bool:
        """Whether a silence in force when ``event`` happened keeps it from being posted;
        the incident is then remembered as held back by that silence."""
        if event.type in _EDITS:
            return False
        for silence in self._silences_at(event.at):
            if matches(silence.matchers, incident):
                self.store.silences.cover(silence.id, incident.id, event.at)
                return True
        return False

    def card(self, incident: Incident) -> Message:
        """The card of an open incident as it stands: its buttons, and who is looking."""
        offered = self.decider.offered(incident, journal=self._journals.get(incident.id))
        message = with_care_buttons(cards.card(incident, offered), incident)
        ack = current_ack(incident, self._ack_of(incident.id))
        if ack is None:
            return message
        return Message(f"{message.text}\n{ack_line(ack)}", message.buttons, message.headline)

    def ack_updates(self, event_id: int, incident: Incident) -> list[NewDelivery]:
        """Edits of every card already sent, saying who is looking (open, undecided only:
        a decided card already says who acted)."""
        if incident.decision is not None or incident.status is IncidentStatus.RESOLVED:
            return []
        message = self.card(incident)
        items = []
        for sent in self.store.outbox.for_incident(incident.id):
            if sent.purpose != "card" or sent.status is not DeliveryStatus.SENT:
                continue
            if not sent.platform_message_id:
                continue
            target = Target.from_json({**sent.target, "message_id": sent.platform_message_id})
            items.append(
                NewDelivery(
                    f"e{event_id}:{target.place}:{sent.id}:ack",
                    incident.id,
                    "update",
                    target.channel,
                    target.as_dict(),
                    message.as_dict(),
                )
            )
        return items

    def announce_ended(
        self, now: datetime, targets: Callable[[Incident], list[Target]], ops: list[Target]
    ) -> int:
        """Queue one message for each silence that has ended and is not yet announced;
        returns how many deliveries were queued."""
        queued = 0
        for silence in self.store.silences.ended_unannounced(now):
            covered = self._incidents(self.store.silences.covered(silence.id))
            places = {t.place: t for i in covered for t in targets(i)}
            if silence.origin is not None:
                platform, _, rest = silence.origin.partition(":")
                chat, _, thread = rest.partition("/")
                to = [Target(platform, chat, thread or None)]
            elif len(places) == 1:
                to = list(places.values())
            else:
                to = ops
            message = ended_message(silence, covered)
            items = [
                NewDelivery(
                    f"silence{silence.id}:ended:{t.place}",
                    None,
                    "note",
                    t.channel,
                    t.as_dict(),
                    message.as_dict(),
                )
                for t in to
            ]
            queued += self.store.silences.mark_announced(silence.id, items, now)
        return queued

    def _incidents(self, ids: list[int]) -> list[Incident]:
        found = []
        for incident_id in ids:
            try:
                found.append(self.store.incidents.get(incident_id, with_events=False))
            except NotFound:
                continue  # deleted since
        return found


def ended_message(silence: Silence, covered: list[Incident]) -> Message:
    """What a silence's end says: what it covered, who ended it, what is still open."""
    how = f"expired early by {silence.expired_by}" if silence.expired_by else "its time ran out"
    headline = f"Silence {silence.id} ended"
    lines = [
        f"{headline} at {silence.ends_at:%Y-%m-%d %H:%M} UTC ({how}).",
        f"It covered {describe(silence.matchers)}"
        + (f" — {silence.comment}" if silence.comment else "")
        + f"; set by {silence.created_by}.",
    ]
    live = [i for i in covered if i.status.value in LIVE_STATUSES]
    if not covered:
        lines.append("Nothing was held back while it lasted.")
    else:
        lines.append(
            f"It held back messages about {len(covered)} incident(s); {len(live)} still open:"
        )
        lines.extend(
            f"- #{i.id} {i.title} ({i.key.kind} {i.key.run_id}, {i.key.condition} since "
            f"{i.since:%H:%M} UTC)"
            for i in live
        )
    return Message("\n".join(lines), (), headline)


def answer_care_press(
    decider: Decider, platform: str, user_id: str, user_name: str, data: str, not_ours: str
) -> str | None:
    """Carry out "Silence 1 h" or "I am on it" pressed on a card; the words for the presser,
    or ``None`` when the press is not one of these (the decider takes it).

    Admins only, like every press; a press on a card whose work has moved since is stale.
    """
    parsed = parse_button(data)
    if parsed is None or parsed.action not in {SILENCE, ACK}:
        return None
    store = decider.store
    try:
        incident = store.incidents.get(parsed.incident_id, with_events=False)
    except NotFound:
        return not_ours
    name = user_name if user_name.startswith("@") else f"@{user_name}"
    actor = Actor.from_chat(platform, user_id, name, decider.admins)
    fresh = token_digest(incident.state_token) == parsed.digest
    outcome, text = _care(decider, incident, parsed.action, actor, fresh)
    press = Press(
        incident.id,
        decider.clock(),
        actor.name,
        actor.via,
        parsed.action,
        incident.state_token if fresh else "moved",
        outcome,
        text,
    )
    store.decisions.record_press(press)
    return text


def _care(
    decider: Decider, incident: Incident, action: str, actor: Actor, fresh: bool
) -> tuple[str, str]:
    if not actor.is_admin:
        return "refused", f"only admins act: {actor.name} is not an admin on {via_label(actor.via)}"
    if incident.status is IncidentStatus.RESOLVED:
        return "stale", f"nothing to do: the incident is resolved ({incident.resolution})"
    if not fresh:
        return "stale", STALE
    service = SilenceService(decider.store, decider.clock)
    if action == ACK:
        service.acknowledge(incident.id, actor.name, actor.via)
        return "acknowledged", f"noted: you are on {incident.title}; nothing was decided"
    matchers = Matchers(kind=incident.key.kind, run_id=incident.key.run_id)
    silence = service.add(
        matchers,
        CARD_SILENCE.total_seconds(),
        f"from the card of incident {incident.id}",
        actor.name,
        actor.via,
    )
    return "silenced", (
        f"silenced {incident.key.kind} {incident.key.run_id} for 1 h (silence {silence.id}, "
        f"until {silence.ends_at:%H:%M} UTC): nothing more is posted about it until then"
    )
