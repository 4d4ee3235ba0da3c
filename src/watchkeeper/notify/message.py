"""What a message says, independent of any platform: text, buttons, and where it goes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from watchkeeper.redact import redact

#: Every button's data starts with this, so a press can be told from other callbacks.
BUTTON_PREFIX = "wk1"
#: Telegram allows at most 64 bytes of callback data; every platform gets the same payload.
BUTTON_DATA_LIMIT = 64
_ACTION_CODES = {
    "cancel": "c",
    "retry": "r",
    "retry_checked": "k",
    "close_turn": "t",
    "dismiss": "d",
    "diagnose": "g",
    "restart": "b",
    "stop": "x",
    # Not decisions: silence the work for an hour, say who is looking (notify/silences.py).
    "silence_1h": "s",
    "ack": "a",
}
_ACTIONS_BY_CODE = {code: action for action, code in _ACTION_CODES.items()}


def token_digest(state_token: str) -> str:
    """A short, fixed-size stand-in for a state token, so button data always fits."""
    return hashlib.sha256(state_token.encode()).hexdigest()[:12]


def button_data(incident_id: int, action: str, state_token: str) -> str:
    """``wk1:<incident>:<action code>:<token digest>``, checked against the 64-byte limit."""
    data = f"{BUTTON_PREFIX}:{incident_id}:{_ACTION_CODES[action]}:{token_digest(state_token)}"
    if len(data.encode()) > BUTTON_DATA_LIMIT:
        raise ValueError(f"button data {data!r} is longer than {BUTTON_DATA_LIMIT} bytes")
    return data


@dataclass(frozen=True, slots=True)
class ButtonPress:
    """A decoded button payload."""

    incident_id: int
    action: str
    digest: str


def parse_button(data: str) -> ButtonPress | None:
    """Decode button data; ``None`` for anything that is not ours or is malformed."""
    parts = data.split(":")
    if len(parts) != 4 or parts[0] != BUTTON_PREFIX or not parts[1].isdigit():
        return None
    action = _ACTIONS_BY_CODE.get(parts[2])
    if action is None or len(parts[3]) != 12:
        return None
    return ButtonPress(int(parts[1]), action, parts[3])


@dataclass(frozen=True, slots=True)
class Button:
    """One button: the words on it, the action it stands for and its payload."""

    label: str
    action: str
    data: str


@dataclass(frozen=True, slots=True)
class Message:
    """A message to post or an edit to make: plain text (platforms format it), buttons."""

    text: str
    buttons: tuple[Button, ...] = ()
    #: Short first line, for platforms that show one (notification previews).
    headline: str = ""

    def __post_init__(self) -> None:
        # A message leaves the process for a chat: titles, reasons and diagnoses come from
        # the supervised work and may carry a credential it printed.
        object.__setattr__(self, "text", redact(self.text))
        object.__setattr__(self, "headline", redact(self.headline))

    def as_dict(self) -> dict[str, Any]:
        """The stored form (a delivery's payload)."""
        return {
            "text": self.text,
            "headline": self.headline,
            "buttons": [
                {"label": b.label, "action": b.action, "data": b.data} for b in self.buttons
            ],
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Message:
        """Back from the stored form."""
        buttons = tuple(
            Button(b["label"], b["action"], b["data"]) for b in value.get("buttons", [])
        )
        return cls(str(value["text"]), buttons, str(value.get("headline", "")))


@dataclass(frozen=True, slots=True)
class Target:
    """Where a message goes: a channel, a chat, optionally a thread, and for edits the message.

    ``reply_to`` threads a note under that message (a reply, a thread or a
    topic, as the platform does it). ``card`` is the dedup key of the card an
    edit or a note belongs to, when its platform id was not known at routing
    time: the sender looks it up just before the call.
    """

    channel: str  # telegram, discord, slack, webhook, log
    chat_id: str = ""
    thread_id: str | None = None
    message_id: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    reply_to: str | None = None
    card: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The stored form."""
        body: dict[str, Any] = {"channel": self.channel, "chat_id": self.chat_id}
        if self.thread_id:
            body["thread_id"] = self.thread_id
        if self.message_id:
            body["message_id"] = self.message_id
        if self.extra:
            body["extra"] = dict(self.extra)
        if self.reply_to:
            body["reply_to"] = self.reply_to
        if self.card:
            body["card"] = self.card
        return body

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Target:
        """Back from the stored form."""
        return cls(
            str(value["channel"]),
            str(value.get("chat_id", "")),
            value.get("thread_id"),
            value.get("message_id"),
            dict(value.get("extra") or {}),
            value.get("reply_to"),
            value.get("card"),
        )

    @property
    def place(self) -> str:
        """One string naming the conversation (for dedup keys and rate limits)."""
        return f"{self.channel}:{self.chat_id}/{self.thread_id or ''}"
