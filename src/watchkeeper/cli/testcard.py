"""``watchkeeper test-card``: post a card to every ops chat, to see that cards arrive."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from watchkeeper.cli.checks import Check, failed, print_checks
from watchkeeper.cli.common import settings as load_settings
from watchkeeper.errors import InvalidInput

if TYPE_CHECKING:
    from watchkeeper.config import Settings

TEXT = (
    "watchkeeper test card: this chat receives watchkeeper's cards. "
    "Stalled, stuck or failed work will be reported here, with buttons to act on it."
)


def post_test_card(
    ctx: typer.Context,
    chat: list[str] = typer.Option(
        [],
        "--chat",
        help="PLATFORM:CHAT[/THREAD] to post to (repeatable); default: every [ops] channels chat",
    ),
) -> None:
    """Post a test card to the ops chats of the configuration, through each platform's API."""
    found = load_settings(ctx)
    checks = send_test_cards(found, chat)
    print_checks("Test card", checks)
    if failed(checks):
        raise typer.Exit(1)


def send_test_cards(settings: Settings, chats: Sequence[str] = ()) -> list[Check]:
    """Post the test card to ``chats`` (default: ``[ops] channels``); one check per chat."""
    import asyncio

    places = list(chats) or [c for c in settings.ops.channels if c != "log"]
    for place in places:
        platform, _, rest = place.partition(":")
        if place != "webhook" and (platform not in {"telegram", "discord", "slack"} or not rest):
            raise InvalidInput(
                f"--chat {place!r}: write PLATFORM:CHAT[/THREAD], PLATFORM one of "
                "telegram, discord, slack (for example telegram:-1001234567890)"
            )
    if not places:
        return [
            Check(
                "test card",
                "fail",
                "no chat to post to: [ops] channels lists none",
                'add channels = ["telegram:CHAT_ID"] (or discord:, slack:) under [ops], '
                "or pass --chat",
            )
        ]
    return asyncio.run(_send_all(settings, places))


async def _send_all(settings: Settings, places: list[str]) -> list[Check]:
    from watchkeeper.errors import ConfigError
    from watchkeeper.notify.channels.base import Channel
    from watchkeeper.notify.channels.registry import build_channels
    from watchkeeper.notify.message import Message
    from watchkeeper.notify.router import parse_place

    try:
        channels: dict[str, Channel] = build_channels(settings)
    except ConfigError as exc:
        return [Check("test card", "fail", str(exc), "export the variable, then try again")]
    message = Message(TEXT, (), "watchkeeper test card")
    checks = []
    try:
        for place in places:
            target = parse_place(place)
            channel = channels.get(target.channel)
            if channel is None:
                checks.append(_unconfigured(place, target.channel))
                continue
            # A fresh key per call: each test card is a new message, never a resend.
            result = await channel.send(target, message, f"test-card-{id(message)}-{place}")
            if result.outcome.value == "sent":
                checks.append(Check(f"card to {place}", "ok", "posted"))
            else:
                checks.append(
                    Check(
                        f"card to {place}",
                        "fail",
                        f"not posted: {result.error}",
                        _hint(target.channel),
                    )
                )
    finally:
        for channel in channels.values():
            await channel.aclose()
    return checks


def _unconfigured(place: str, platform: str) -> Check:
    if platform == "webhook":
        return Check(f"card to {place}", "fail", "[ops] webhook_url is not set", "set it")
    return Check(
        f"card to {place}",
        "fail",
        f"[{platform}] has no bot token",
        f"set bot_token_env in [{platform}] and export that variable",
    )


def _hint(platform: str) -> str:
    if platform == "webhook":
        return "check that [ops] webhook_url answers POST with 2xx"
    return f"check the chat id, and that the bot is a member of that chat on {platform}"
