"""``watchkeeper test-card``: post a card to every ops chat, to see that cards arrive.

Without ``--server`` the card goes out from this host, through the platforms of
this configuration. With ``--server`` (and an admin ``--token``) the running
server posts it through its own platforms: what its cards will use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from watchkeeper.cli.app.checks import Check, failed, print_checks
from watchkeeper.cli.app.common import settings as load_settings
from watchkeeper.cli.app.options import TOKEN, connect
from watchkeeper.notify.testcard import TEXT, CardResult, no_chat, places_for

if TYPE_CHECKING:
    from watchkeeper.config import Settings

__all__ = ["TEXT", "post_test_card", "send_test_cards"]


def post_test_card(
    ctx: typer.Context,
    chat: list[str] = typer.Option(
        [],
        "--chat",
        help="PLATFORM:CHAT[/THREAD] to post to (repeatable); default: every [ops] channels chat",
    ),
    server: str | None = typer.Option(
        None, "--server", help="have this server post it, through its own platforms"
    ),
    token: str | None = TOKEN,
) -> None:
    """Post a test card to the ops chats, through each platform's API (or the server's)."""
    if server:
        with connect(server, token) as client:
            body = client.request_object("POST", "/api/v1/test-card", json={"chats": chat})
        checks = [_check(CardResult(**card)) for card in body["cards"]]
    else:
        checks = send_test_cards(load_settings(ctx), chat)
    print_checks("Test card", checks)
    if failed(checks):
        raise typer.Exit(1)


def send_test_cards(settings: Settings, chats: Sequence[str] = ()) -> list[Check]:
    """Post the test card to ``chats`` (default: ``[ops] channels``); one check per chat."""
    import asyncio

    places = places_for(settings.ops.channels, chats)
    if not places:
        return [_check(no_chat())]
    return asyncio.run(_send_all(settings, places))


async def _send_all(settings: Settings, places: list[str]) -> list[Check]:
    from watchkeeper.errors import ConfigError
    from watchkeeper.notify.channels.base import Channel
    from watchkeeper.notify.channels.registry import build_channels
    from watchkeeper.notify.testcard import post_test_cards

    try:
        channels: dict[str, Channel] = build_channels(settings)
    except ConfigError as exc:
        return [Check("test card", "fail", str(exc), "export the variable, then try again")]
    try:
        return [_check(found) for found in await post_test_cards(channels, places)]
    finally:
        for channel in channels.values():
            await channel.aclose()


def _check(result: CardResult) -> Check:
    name = f"card to {result.chat}" if result.chat else "test card"
    return Check(name, result.state, result.detail, result.hint)
