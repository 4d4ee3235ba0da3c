"""What people read: a card per incident and the lines its edits add as its life goes on
(decided, moving again, live again, an action failed or was interrupted, resolved), short
notes threaded under it, a diagnosis below it, and runbook announcements."""

from __future__ import annotations

from datetime import datetime

from watchkeeper.contract import Action
from watchkeeper.decide.actors import via_label
from watchkeeper.decide.offer import label
from watchkeeper.notify.message import Button, Message, button_data
from watchkeeper.store.incidents import Incident

#: What a note says when the card can be pressed again.
BUTTONS_BACK = "The buttons are back on the card."
_VERB = {
    "failed": "failed",
    "stuck": "is stuck",
    "stalled": "has stalled",
    # Its reports keep coming and all say the same: the reason says what and since when.
    "looping": "is looping",
    "slow": "is slow",
}


def _headline(incident: Incident) -> str:
    verb = _VERB.get(incident.key.condition, incident.key.condition)
    return f"{incident.title} {verb}"


def _body(incident: Incident) -> list[str]:
    return [
        _headline(incident),
        f"{incident.key.kind} {incident.key.run_id} · {incident.key.condition} since "
        f"{incident.since:%Y-%m-%d %H:%M} UTC",
        incident.reason,
    ]


def card(incident: Incident, offered: list[Action]) -> Message:
    """An open incident's card: the work, its verdict and since when, one button per action."""
    buttons = tuple(
        Button(
            label(action),
            action.value,
            button_data(incident.id, action.value, incident.state_token),
        )
        for action in offered
    )
    return Message("\n".join(_body(incident)), buttons, _headline(incident))


def decided_card(incident: Incident, *, keep_buttons: list[Action] | None = None) -> Message:
    """The card once decided: what was decided and by whom (buttons removed unless kept)."""
    return settled_card(incident, None, keep_buttons=keep_buttons)


def settled_card(
    incident: Incident, line: str | None, *, keep_buttons: list[Action] | None = None
) -> Message:
    """The card when there is nothing to press for now (decided, moving again, resolved):
    the decision if any, then ``line``; buttons removed unless kept."""
    lines = _body(incident)
    decision = incident.decision
    if decision is not None:
        lines.append(
            f"Decided: {label(decision.action)} by {decision.actor} on {via_label(decision.via)} "
            f"at {decision.at:%H:%M} UTC"
        )
    if line:
        lines.append(line)
    buttons: tuple[Button, ...] = ()
    if keep_buttons:
        buttons = tuple(
            Button(label(a), a.value, button_data(incident.id, a.value, incident.state_token))
            for a in keep_buttons
        )
    return Message("\n".join(lines), buttons, _headline(incident))


def with_line(message: Message, line: str) -> Message:
    """``message`` (a card) with one more line at its end, its buttons as they are."""
    return Message(f"{message.text}\n{line}", message.buttons, message.headline)


def moved_line(at: datetime, detail: str | None) -> str:
    """``Moving again since 12:01 UTC: page 2``: the card's last line once its work moves."""
    step = (detail or "").removeprefix("moved again").removeprefix(":").strip()
    return f"Moving again since {at:%H:%M} UTC" + (f": {step}" if step else "")


def resolved_line(incident: Incident) -> str:
    """``Resolved at 12:07 UTC: the work ended: finished``: the card's last word."""
    at = incident.resolved_at or incident.updated_at
    return f"Resolved at {at:%H:%M} UTC: {incident.resolution or 'resolved'}"


def again_line(incident: Incident, at: datetime) -> str:
    """``Stalled again at 12:04 UTC``: the card is live again, its buttons back."""
    return f"{incident.key.condition.capitalize()} again at {at:%H:%M} UTC"


def again_note(incident: Incident) -> Message:
    """The short note under the first card when the same work is in the same state again."""
    headline = f"{_headline(incident)} again"
    text = (
        f"{headline} since {incident.since:%H:%M} UTC: {incident.reason.rstrip('.')}. "
        f"{BUTTONS_BACK}"
    )
    return Message(text, (), headline)


def action_failed_line(action: str, at: datetime, words: str) -> str:
    """``Retry failed at 12:03 UTC: the kind refused it (HTTP 409 Conflict): ...``."""
    return f"{action} failed at {at:%H:%M} UTC: {words}"


def action_interrupted_line(action: str, at: datetime) -> str:
    """What the card says of an action cut off by a restart: it may have happened."""
    return (
        f"{action} was interrupted by a restart at {at:%H:%M} UTC: it may or may not have "
        "happened; check the work before acting again"
    )


def action_note(incident: Incident, what: str) -> Message:
    """The note under the card when an action failed or was interrupted."""
    text = f"{incident.title}: {what}. {BUTTONS_BACK}"
    return Message(text, (), f"{incident.title}: {what}")


def moved_note(incident: Incident, detail: str | None) -> Message:
    """The one short note when stalled, stuck or looping work moves again (looping work
    "moved on": it was busy all along, saying the same thing)."""
    verb = "moved on" if incident.key.condition == "looping" else "is moving again"
    text = f"{incident.title} {verb}" + (
        f" ({detail})" if detail and detail != "moved again" else ""
    )
    return Message(text, (), text)


def diagnosis_note(incident: Incident, diagnosis: str) -> Message:
    """A diagnosis, posted below the card."""
    return Message(
        f"Diagnosis of {incident.title}:\n{diagnosis}", (), f"Diagnosis of {incident.title}"
    )


def event_note(incident: Incident, text: str) -> Message:
    """Anything else worth one line in the conversation (runbook steps, interrupted actions)."""
    return Message(f"{incident.title}: {text}", (), incident.title)
