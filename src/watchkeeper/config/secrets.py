"""Secrets in the configuration: which keys hold them, and reading them from the environment."""

from __future__ import annotations

import os
from collections.abc import Callable

from watchkeeper.config.chat import HEX
from watchkeeper.config.settings import Settings
from watchkeeper.errors import ConfigError

#: Keys whose values are secrets: a message about them names the key, never the value.
#: They stay plain ``str`` (not pydantic's ``SecretStr``) because the channels, webhook
#: routes and signers read them as strings; hiding them is the job of :func:`explain`.
SECRET_KEYS = frozenset(
    {
        "bot_token",
        "webhook_secret",
        "signing_secret",
        "public_key",
        "github_secret",
        "github_token",
        "sentry_secret",
        "linear_secret",
        "auth_header",
    }
)


def resolve_secret(value: str | None, env_name: str | None, key: str) -> str | None:
    """A secret given in the file or, better, through an environment variable named there.

    A value from the environment passes the same check the file's value does; a bad
    one is named by its variable, never shown.
    """
    if env_name:
        found = os.environ.get(env_name)
        if not found:
            raise ConfigError(
                f"{key}_env names the environment variable {env_name}, which is not set: "
                "set it, or remove the key"
            )
        problem = _ENV_SECRET_CHECKS.get(key, _accept)(found)
        if problem:
            raise ConfigError(
                f"{key}_env names the environment variable {env_name}, whose value {problem}"
            )
        return found
    return value


def check_secrets(settings: Settings) -> None:
    """Resolve every secret named through the environment now, so a bad one stops start-up.

    Channels and webhook routes resolve their secrets when first used; without this a
    missing or malformed variable would only show as refused requests later.
    """
    for key, value, env_name in _secret_sources(settings):
        resolve_secret(value, env_name, key)


def _secret_sources(settings: Settings) -> list[tuple[str, str | None, str | None]]:
    return [
        ("telegram.bot_token", settings.telegram.bot_token, settings.telegram.bot_token_env),
        ("discord.bot_token", settings.discord.bot_token, settings.discord.bot_token_env),
        ("slack.bot_token", settings.slack.bot_token, settings.slack.bot_token_env),
        (
            "slack.signing_secret",
            settings.slack.signing_secret,
            settings.slack.signing_secret_env,
        ),
        ("forge.github_secret", settings.forge.github_secret, settings.forge.github_secret_env),
        ("forge.linear_secret", settings.forge.linear_secret, settings.forge.linear_secret_env),
        ("forge.github_token", settings.forge.github_token, settings.forge.github_token_env),
        ("forge.sentry_secret", settings.forge.sentry_secret, settings.forge.sentry_secret_env),
    ]


def _accept(_value: str) -> str | None:
    return None


def _hex_only(value: str) -> str | None:
    return None if HEX.fullmatch(value) else "must be hex digits (Slack's Signing Secret)"


_ENV_SECRET_CHECKS: dict[str, Callable[[str], str | None]] = {"slack.signing_secret": _hex_only}
