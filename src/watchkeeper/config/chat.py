"""Where messages go: the ops notices, the three chat platforms and who may act from them."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

#: What Telegram accepts as ``secret_token`` in setWebhook.
_TELEGRAM_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")
HEX = re.compile(r"[0-9A-Fa-f]+")
_ED25519_HEX = re.compile(r"[0-9A-Fa-f]{64}")


def _matching(pattern: re.Pattern[str], problem: str) -> AfterValidator:
    """A validator refusing a value that ``pattern`` does not match whole, saying ``problem``."""

    def check(value: str | None) -> str | None:
        if value is not None and not pattern.fullmatch(value):
            raise ValueError(problem)
        return value

    return AfterValidator(check)


# Telegram refuses other secrets at setWebhook, and the webhook would never verify.
_TelegramSecret = Annotated[
    str | None,
    _matching(
        _TELEGRAM_SECRET,
        "Telegram accepts 1 to 256 characters from A-Z, a-z, 0-9, _ and - only: "
        "pick a new secret made of those (for example from `openssl rand -hex 32`)",
    ),
]
_DiscordKey = Annotated[
    str | None,
    _matching(
        _ED25519_HEX,
        "must be the 64 hex characters of PUBLIC KEY on the application's General "
        "Information page in the Discord developer portal",
    ),
]
_SlackSecret = Annotated[
    str | None,
    _matching(
        HEX,
        "must be hex digits: copy Signing Secret from the app's Basic Information "
        "page on api.slack.com",
    ),
]


#: The chat platforms a place (``PLATFORM:CHAT[/THREAD]``) may name.
CHAT_PLATFORMS = ("telegram", "discord", "slack")
#: A program's or a group's ``notify`` meaning the ops channels.
OPS = "ops"


def is_chat_place(entry: str) -> bool:
    """Whether ``entry`` names a conversation: ``PLATFORM:CHAT[/THREAD]`` on a chat platform."""
    platform, _, chat = entry.partition(":")
    return platform in CHAT_PLATFORMS and bool(chat)


def check_notify(value: str | None) -> str | None:
    """A ``notify`` key's value: ``ops`` or a conversation, checked as ``[ops] channels`` checks
    its conversations; :class:`ValueError` saying what to write otherwise."""
    if value is None or value == OPS or is_chat_place(value):
        return value
    hint = (
        f" ({value} is an ops channel: write ops to send notices where [ops] channels says)"
        if value in {"log", "webhook"}
        else ""
    )
    raise ValueError(
        f"{value!r} is not a place for notices{hint}: write ops (the ops channels), or "
        f"PLATFORM:CHAT[/THREAD] with PLATFORM one of {', '.join(CHAT_PLATFORMS)}, "
        "such as slack:C0123 or telegram:-1001234/7"
    )


class OpsConfig(BaseModel):
    """Where notices for operators go when no chat owns the work.

    ``channels`` lists conversations as ``PLATFORM:CHAT[/THREAD]`` (for example
    ``slack:C0123``, ``telegram:-1001234/7``, ``discord:123456``), or ``webhook``
    for the signed webhook below, or ``log``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    webhook_url: str | None = Field(
        default=None, description="where supervision notices are POSTed (JSON)"
    )
    webhook_secret: str | None = Field(
        default=None,
        description="signs them: `X-Watchkeeper-Signature: sha256=HMAC(secret, timestamp + "
        '"." + body)`, the timestamp in `X-Watchkeeper-Timestamp`',
    )
    timeout_s: float = Field(
        default=5.0, gt=0, le=60, description="the time limit of one webhook request"
    )
    channels: list[str] = Field(
        default_factory=lambda: ["log"],
        description="where notices go: `PLATFORM:CHAT[/THREAD]` (`slack:C0123`, "
        "`telegram:-1001234/7`, `discord:123456`), `webhook` or `log`",
    )

    @field_validator("channels")
    @classmethod
    def _channel_names(cls, channels: list[str]) -> list[str]:
        for entry in channels:
            if entry in {"log", "webhook"} or is_chat_place(entry):
                continue
            raise ValueError(
                f"{entry!r} is not a channel: write log, webhook, or PLATFORM:CHAT[/THREAD] "
                f"with PLATFORM one of {', '.join(CHAT_PLATFORMS)}"
            )
        return channels

    @field_validator("webhook_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value


class ChatConfig(BaseModel):
    """What every chat platform's table has: the bot's token, the API's address, a timeout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bot_token: str | None = Field(
        default=None,
        description="the bot's token (prefer `bot_token_env`); without one no card is sent there",
    )
    bot_token_env: str | None = Field(
        default=None,
        description="the environment variable holding the token; an unset one is a "
        "configuration error",
    )
    base_url: str = Field(description="the API root (a fake one in tests)")
    timeout_s: float = Field(
        default=10.0, gt=0, le=120, description="the time limit of one API call"
    )


class TelegramConfig(ChatConfig):
    """The Telegram bot: sends cards, receives button presses on ``/webhooks/telegram``."""

    webhook_secret: _TelegramSecret = Field(
        default=None, description="checked in X-Telegram-Bot-Api-Secret-Token"
    )
    base_url: str = Field(
        default="https://api.telegram.org", description="the API root (a fake one in tests)"
    )


class DiscordConfig(ChatConfig):
    """The Discord bot and its interactions endpoint (``/webhooks/discord``)."""

    application_id: str | None = Field(
        default=None,
        description="the application's id, for follow-up messages (taken from the interaction "
        "when unset)",
    )
    public_key: _DiscordKey = Field(default=None, description="hex Ed25519 key of the application")
    base_url: str = Field(
        default="https://discord.com/api/v10", description="the API root (a fake one in tests)"
    )


class SlackConfig(ChatConfig):
    """The Slack app: Web API for posting, interactivity on ``/webhooks/slack``."""

    signing_secret: _SlackSecret = Field(
        default=None, description="checks interactivity requests (prefer `signing_secret_env`)"
    )
    signing_secret_env: str | None = Field(
        default=None, description="the environment variable holding it"
    )
    base_url: str = Field(
        default="https://slack.com/api", description="the API root (a fake one in tests)"
    )


class AdminsConfig(BaseModel):
    """Who may act from each chat platform, by the platform's own user id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slack: list[str] = Field(default_factory=list, description="Slack user ids that may act")
    telegram: list[str] = Field(default_factory=list, description="Telegram user ids that may act")
    discord: list[str] = Field(default_factory=list, description="Discord user ids that may act")

    def allows(self, platform: str, user_id: str) -> bool:
        """Whether ``user_id`` is an admin on ``platform``."""
        return user_id in getattr(self, platform, [])
