"""The install as its operators see it: which integrations are set up and how they fare.

Nothing here shows a secret: a credential is described by where it comes from
(the file, or the name of the environment variable holding it), a webhook by its
host only, since a URL may carry a key in its path.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from watchkeeper.store.install_facts import (
    ChannelHistory,
    ForgeHistory,
    InstallCounts,
    InstallFactsStore,
    ResultPosts,
)

if TYPE_CHECKING:
    from watchkeeper.config import Settings
    from watchkeeper.store import Store

__all__ = [
    "ChannelHistory",
    "ForgeHistory",
    "InstallCounts",
    "InstallView",
    "Integration",
    "ResultPosts",
]


@dataclass(frozen=True, slots=True)
class Integration:
    """One integration: configured or not, how, what it has done, and how to set it up."""

    name: str
    label: str
    configured: bool
    setup: tuple[str, ...]
    hint: str
    channel: ChannelHistory | None = None
    forge: ForgeHistory | None = None
    last_failure: tuple[datetime, str | None] | None = None
    #: GitHub's only: the results runs from its issues and pull requests posted there.
    posts: ResultPosts | None = None


def _secret(value: str | None, env: str | None, what: str) -> str | None:
    """Where a credential comes from, never the credential."""
    if env:
        return f"{what} from ${env}"
    if value:
        return f"{what} set in the file"
    return None


def _present(*parts: str | None) -> tuple[str, ...]:
    return tuple(part for part in parts if part)


class InstallView:
    """Reads for the integrations and onboarding pages."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self._facts = InstallFactsStore(store.engine)
        self._settings = settings

    def counts(self) -> InstallCounts:
        """Runs, incidents and chat cards sent so far."""
        return self._facts.counts()

    def chat_configured(self) -> bool:
        """Whether any chat platform (or the signed webhook) can be sent to."""
        return any(i.configured for i in self._chats())

    def integrations(self) -> list[Integration]:
        """Every integration, the chat platforms first, with its history."""
        channels = self._facts.channels()
        forges = self._facts.forges()
        found: list[Integration] = []
        for item in [*self._chats(), *self._forges()]:
            history = channels.get(item.name)
            failure = self._facts.last_failure(item.name) if history and history.failed else None
            found.append(
                Integration(
                    item.name,
                    item.label,
                    item.configured,
                    item.setup,
                    item.hint,
                    history,
                    forges.get(item.name),
                    failure,
                    self._facts.result_posts() if item.name == "github" else None,
                )
            )
        return found

    def _chats(self) -> list[Integration]:
        s = self._settings
        chats: list[Integration] = []
        for name, label, table, extra in (
            (
                "telegram",
                "Telegram",
                s.telegram,
                _secret(s.telegram.webhook_secret, None, "webhook secret"),
            ),
            ("discord", "Discord", s.discord, "public key set" if s.discord.public_key else None),
            (
                "slack",
                "Slack",
                s.slack,
                _secret(s.slack.signing_secret, s.slack.signing_secret_env, "signing secret"),
            ),
        ):
            token = _secret(table.bot_token, table.bot_token_env, "bot token")
            admins = len(getattr(s.admins, name))
            routed = [c for c in s.ops.channels if c.startswith(f"{name}:")]
            chats.append(
                Integration(
                    name,
                    label,
                    token is not None,
                    _present(
                        token,
                        extra,
                        f"{admins} admin(s)" if admins else None,
                        f"ops chats: {', '.join(routed)}" if routed else None,
                    ),
                    f"run `watchkeeper init --platform {name}`, or set [{name}] bot_token_env "
                    "in the configuration file",
                )
            )
        host = urlsplit(s.ops.webhook_url).hostname if s.ops.webhook_url else None
        chats.append(
            Integration(
                "webhook",
                "Webhook",
                s.ops.webhook_url is not None,
                _present(
                    f"posts to {host}" if host else None, "signed" if s.ops.webhook_secret else None
                ),
                'set [ops] webhook_url (and webhook_secret), and add "webhook" to [ops] channels',
            )
        )
        return chats

    def _forges(self) -> list[Integration]:
        f = self._settings.forge
        github = _secret(f.github_secret, f.github_secret_env, "webhook secret")
        reader = _secret(f.github_token, f.github_token_env, "API token")
        linear = _secret(f.linear_secret, f.linear_secret_env, "webhook secret")
        sentry = _secret(f.sentry_secret, f.sentry_secret_env, "client secret")
        return [
            Integration(
                "github",
                "GitHub",
                github is not None or reader is not None,
                _present(
                    github,
                    reader,
                    f"API at {urlsplit(f.github_api_url).hostname}" if reader else None,
                ),
                "set [forge] github_secret_env (webhooks to /webhooks/github) and "
                "github_token_env (results posted on pull requests)",
            ),
            Integration(
                "linear",
                "Linear",
                linear is not None,
                _present(linear, f"label {f.linear_label!r}" if linear else None),
                "set [forge] linear_secret_env, and point a Linear webhook at /webhooks/linear",
            ),
            Integration(
                "sentry",
                "Sentry",
                sentry is not None,
                _present(
                    sentry,
                    f"issues become jobs on fleet {f.sentry_fleet} for org {f.sentry_org}"
                    if sentry and f.sentry_argv
                    else None,
                    "no job is submitted until [forge] sentry_argv names the command"
                    if sentry and not f.sentry_argv
                    else None,
                ),
                "set [forge] sentry_secret_env to the Sentry integration's client secret, "
                "point its webhook at /webhooks/sentry, and name the job's command in "
                "sentry_argv",
            ),
        ]
