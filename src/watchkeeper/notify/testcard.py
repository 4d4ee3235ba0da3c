"""The test card: one message to each ops chat, to see that cards arrive there.

``watchkeeper test-card`` posts it from this host with channels it builds from
the configuration; ``POST /api/v1/test-card`` posts it from the server, through
the channels that server already runs. Both call :func:`post_test_cards`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from watchkeeper.errors import InvalidInput

if TYPE_CHECKING:
    from watchkeeper.notify.channels.base import Channel

TEXT = (
    "watchkeeper test card: this chat receives watchkeeper's cards. "
    "Stalled, stuck or failed work will be reported here, with buttons to act on it."
)


@dataclass(frozen=True, slots=True)
class CardResult:
    """How the card went to one chat: posted or not, what was seen, and how to fix it."""

    chat: str
    state: Literal["ok", "fail"]
    detail: str
    hint: str = ""


def places_for(ops_channels: Sequence[str], chats: Sequence[str] = ()) -> list[str]:
    """``chats`` (default: ``[ops] channels`` but the log); refuses a malformed one."""
    places = list(chats) or [c for c in ops_channels if c != "log"]
    for place in places:
        platform, _, rest = place.partition(":")
        if place != "webhook" and (platform not in {"telegram", "discord", "slack"} or not rest):
            raise InvalidInput(
                f"--chat {place!r}: write PLATFORM:CHAT[/THREAD], PLATFORM one of "
                "telegram, discord, slack (for example telegram:-1001234567890)",
                field="chats",
            )
    return places


def no_chat() -> CardResult:
    """The one result when there is nowhere to post (its ``chat`` is empty)."""
    return CardResult(
        "",
        "fail",
        "no chat to post to: [ops] channels lists none",
        'add channels = ["telegram:CHAT_ID"] (or discord:, slack:) under [ops], or pass --chat',
    )


async def post_test_cards(
    channels: Mapping[str, Channel], places: Sequence[str]
) -> list[CardResult]:
    """Post the test card to each of ``places`` through ``channels``; one result per place."""
    # Lazy: every command line imports this module for its text, few post a card.
    from watchkeeper.notify.message import Message
    from watchkeeper.notify.router import parse_place

    if not places:
        return [no_chat()]
    message = Message(TEXT, (), "watchkeeper test card")
    results = []
    for place in places:
        target = parse_place(place)
        channel = channels.get(target.channel)
        if channel is None:
            results.append(_unconfigured(place, target.channel))
            continue
        # A fresh key per call: each test card is a new message, never a resend.
        result = await channel.send(target, message, f"test-card-{id(message)}-{place}")
        if result.outcome.value == "sent":
            results.append(CardResult(place, "ok", "posted"))
        else:
            results.append(
                CardResult(place, "fail", f"not posted: {result.error}", _hint(target.channel))
            )
    return results


def _unconfigured(place: str, platform: str) -> CardResult:
    if platform == "webhook":
        return CardResult(place, "fail", "[ops] webhook_url is not set", "set it")
    return CardResult(
        place,
        "fail",
        f"[{platform}] has no bot token",
        f"set bot_token_env in [{platform}] and export that variable",
    )


def _hint(platform: str) -> str:
    if platform == "webhook":
        return "check that [ops] webhook_url answers POST with 2xx"
    return f"check the chat id, and that the bot is a member of that chat on {platform}"
