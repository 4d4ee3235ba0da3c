"""A button press that arrived from a chat platform, turned into a decision."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from watchkeeper.decide.actors import Actor
from watchkeeper.decide.decider import Decider, PressResult
from watchkeeper.errors import NotFound, StoreError, WatchkeeperError
from watchkeeper.notify.message import parse_button, token_digest
from watchkeeper.notify.silences import answer_care_press
from watchkeeper.redact import redact

log = logging.getLogger(__name__)
UNEXPECTED = "an unexpected error happened; it has been logged"
NOT_OURS = "this button is not one of watchkeeper's, or its incident no longer exists"
#: A press not decided because the store is away; why is in the log, not in the chat.
STORE_AWAY = "nothing was done: watchkeeper cannot reach its store; press again in a moment"


@dataclass(frozen=True, slots=True)
class ChatPress:
    """Who pressed which button, on which platform."""

    platform: str  # telegram, discord, slack
    user_id: str
    user_name: str
    data: str  # the button's data, as sent with the card


def first_time(decider: Decider, platform: str, request_id: str, now: datetime) -> bool:
    """Whether ``platform`` sends ``request_id`` for the first time (platforms resend)."""
    return decider.store.outbox.first_time(platform, request_id, now)


def handle_chat_press(decider: Decider, press: ChatPress) -> PressResult | None:
    """Decide a chat press (admins from ``[admins]``); ``None`` when the data is not ours.

    The card carries a digest of the state token it was sent with: a press on
    a card whose work has moved since is stale and does nothing.
    """
    parsed = parse_button(press.data)
    if parsed is None:
        return None
    try:
        incident = decider.store.incidents.get(parsed.incident_id, with_events=False)
    except NotFound:
        return None
    shown = incident.state_token if token_digest(incident.state_token) == parsed.digest else "moved"
    name = press.user_name if press.user_name.startswith("@") else f"@{press.user_name}"
    actor = Actor.from_chat(press.platform, press.user_id, name, decider.admins)
    return decider.press(parsed.incident_id, parsed.action, shown, actor)


@dataclass(frozen=True, slots=True)
class PressAnswer:
    """What came of a chat press: the decision, if one was made, and the words for the presser."""

    result: PressResult | None
    text: str

    @property
    def won(self) -> bool:
        """Whether the press decided its incident."""
        return self.result is not None and self.result.won


async def answer_press(
    decider: Decider, press: ChatPress, down: Callable[[StoreError], str] | None = None
) -> PressAnswer:
    """Decide a chat press off the event loop; whatever goes wrong, the presser hears back.

    ``down`` words the answer when watchkeeper's own store cannot be reached.
    """
    action = f"{press.platform}_press"
    try:
        care = await asyncio.to_thread(
            answer_care_press,
            decider,
            press.platform,
            press.user_id,
            press.user_name,
            press.data,
            NOT_OURS,
        )
        if care is not None:  # "Silence 1 h" or "I am on it": decides nothing
            return PressAnswer(None, care)
        result = await asyncio.to_thread(handle_chat_press, decider, press)
    except StoreError as exc:
        # Nothing is kept: the presser is told to press again, and the log says who pressed what.
        log.warning(
            "A %s press by %s (%r) was not decided, the store is away: %s; "
            "they were told to press again",
            press.platform,
            press.user_id,
            press.data,
            redact(str(exc)),
            extra={"action": action},
        )
        return PressAnswer(None, down(exc) if down else STORE_AWAY)
    except WatchkeeperError as exc:
        log.warning(
            "A %s press could not be decided: %s",
            press.platform,
            redact(str(exc)),
            extra={"action": action},
        )
        return PressAnswer(None, f"nothing was done: {exc}")
    except Exception:  # the presser must hear back whatever went wrong
        log.exception("A %s press failed unexpectedly", press.platform, extra={"action": action})
        return PressAnswer(None, f"nothing was done: {UNEXPECTED}")
    if result is None:
        return PressAnswer(None, NOT_OURS)
    log.info(
        "A %s press by %s on incident %d: %s",
        press.platform,
        press.user_id,
        result.incident_id,
        result.outcome.value,
        extra={"action": action},
    )
    return PressAnswer(result, result.message)


async def decide_press(
    decider: Decider, press: ChatPress, down: Callable[[StoreError], str] | None = None
) -> str | None:
    """Decide a chat press; the words for the presser, or ``None`` if it won.

    Platforms that answer presses later (Discord follow-ups, Slack
    ``response_url``) call this after acknowledging the request, and stay
    quiet when the press won: the edited card says so.
    """
    answer = await answer_press(decider, press, down)
    return None if answer.won else answer.text
