"""A button press that arrived from a chat platform, turned into a decision."""

from __future__ import annotations

from dataclasses import dataclass

from watchkeeper.decide.actors import Actor
from watchkeeper.decide.decider import PressResult
from watchkeeper.errors import NotFound
from watchkeeper.notify.message import parse_button, token_digest
from watchkeeper.runtime import Runtime


@dataclass(frozen=True, slots=True)
class ChatPress:
    """Who pressed which button, on which platform."""

    platform: str  # telegram, discord, slack
    user_id: str
    user_name: str
    data: str  # the button's data, as sent with the card


def handle_chat_press(runtime: Runtime, press: ChatPress) -> PressResult | None:
    """Decide a chat press (admins from ``[admins]``); ``None`` when the data is not ours.

    The card carries a digest of the state token it was sent with: a press on
    a card whose work has moved since is stale and does nothing.
    """
    parsed = parse_button(press.data)
    if parsed is None:
        return None
    try:
        incident = runtime.store.incidents.get(parsed.incident_id, with_events=False)
    except NotFound:
        return None
    shown = incident.state_token if token_digest(incident.state_token) == parsed.digest else "moved"
    name = press.user_name if press.user_name.startswith("@") else f"@{press.user_name}"
    actor = Actor.from_chat(press.platform, press.user_id, name, runtime.settings.admins)
    return runtime.decider.press(parsed.incident_id, parsed.action, shown, actor)
