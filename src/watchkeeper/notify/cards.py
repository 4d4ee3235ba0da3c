"""What people read: a card per incident, a short note when stalled work moves again, the
card's decided form, a diagnosis below it, and runbook announcements."""

from __future__ import annotations

from watchkeeper.contract import Action
from watchkeeper.decide.actors import via_label
from watchkeeper.decide.offer import label
from watchkeeper.notify.message import Button, Message, button_data
from watchkeeper.store.incidents import Incident

_VERB = {"failed": "failed", "stuck": "is stuck", "stalled": "has stalled", "slow": "is slow"}


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
    lines = _body(incident)
    decision = incident.decision
    if decision is not None:
        lines.append(
            f"Decided: {label(decision.action)} by {decision.actor} on {via_label(decision.via)} "
            f"at {decision.at:%H:%M} UTC"
        )
    buttons: tuple[Button, ...] = ()
    if keep_buttons:
        buttons = tuple(
            Button(label(a), a.value, button_data(incident.id, a.value, incident.state_token))
            for a in keep_buttons
        )
    return Message("\n".join(lines), buttons, _headline(incident))


def moved_note(incident: Incident, detail: str | None) -> Message:
    """The one short note when stalled or stuck work moves again."""
    text = f"{incident.title} is moving again" + (
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
