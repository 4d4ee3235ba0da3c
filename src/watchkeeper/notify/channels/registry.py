"""Build the configured channels. A platform without credentials is simply not there."""

from __future__ import annotations

from watchkeeper.config import Settings, resolve_secret
from watchkeeper.notify.channels.base import Channel
from watchkeeper.notify.channels.log import LogChannel
from watchkeeper.notify.channels.webhook import WebhookChannel


def build_channels(settings: Settings) -> dict[str, Channel]:
    """Every channel that can send with this configuration."""
    channels: dict[str, Channel] = {"log": LogChannel()}
    if settings.ops.webhook_url:
        channels["webhook"] = WebhookChannel(settings.ops)
    if resolve_secret(
        settings.telegram.bot_token, settings.telegram.bot_token_env, "telegram.bot_token"
    ):
        from watchkeeper.notify.channels.telegram import TelegramChannel

        channels["telegram"] = TelegramChannel(settings.telegram)
    if resolve_secret(
        settings.discord.bot_token, settings.discord.bot_token_env, "discord.bot_token"
    ):
        from watchkeeper.notify.channels.discord import DiscordChannel

        channels["discord"] = DiscordChannel(settings.discord)
    if resolve_secret(settings.slack.bot_token, settings.slack.bot_token_env, "slack.bot_token"):
        from watchkeeper.notify.channels.slack import SlackChannel

        channels["slack"] = SlackChannel(settings.slack)
    return channels
