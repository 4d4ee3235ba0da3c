"""Checks ``init``, ``test-card`` and ``doctor`` share: one result each, printed as one table.

A check never raises for what it finds: a refused token or an unreachable
address is a failed :class:`Check` with a hint saying how to fix it, so every
problem of an installation shows at once instead of the first one only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from watchkeeper.cli.console import console

if TYPE_CHECKING:
    import httpx

    from watchkeeper.config import ChatConfig, Settings

State = Literal["ok", "warn", "fail"]
PLATFORMS = ("telegram", "discord", "slack")
#: Where each platform hands out its bot token: named in the hint when one is refused.
_TOKEN_SOURCE = {
    "telegram": "the token @BotFather gave you",
    "discord": "Bot > Token in the Discord developer portal",
    "slack": "the Bot User OAuth Token (xoxb-...) on the app's OAuth & Permissions page",
}
#: The environment variable ``init`` names for each platform's token.
TOKEN_ENV = {
    "telegram": "WATCHKEEPER_TELEGRAM_TOKEN",
    "discord": "WATCHKEEPER_DISCORD_TOKEN",
    "slack": "WATCHKEEPER_SLACK_TOKEN",
}


@dataclass(frozen=True, slots=True)
class Check:
    """One finding: what was checked, how it went, what was seen, and how to fix it."""

    name: str
    state: State
    detail: str
    hint: str = ""


def failed(checks: Sequence[Check]) -> bool:
    """Whether any check failed (a warning is not a failure)."""
    return any(check.state == "fail" for check in checks)


def print_checks(title: str, checks: Sequence[Check]) -> None:
    """The checks as a table; a hint is printed only where something is wrong."""
    from rich.table import Table
    from rich.text import Text

    styles = {"ok": "green", "warn": "yellow", "fail": "bold red"}
    table = Table(title=title, title_justify="left")
    for column in ("check", "state", "detail", "how to fix"):
        table.add_column(column, overflow="fold")
    for check in checks:
        table.add_row(
            Text(check.name),
            Text(check.state, style=styles[check.state]),
            Text(check.detail),
            Text(check.hint if check.state != "ok" else ""),
        )
    console.print(table)


def configured_platforms(settings: Settings) -> list[str]:
    """The chat platforms the configuration names: a token, or a chat in ``[ops] channels``."""
    named = {entry.partition(":")[0] for entry in settings.ops.channels}
    return [
        platform
        for platform in PLATFORMS
        if platform in named
        or _table(settings, platform).bot_token
        or _table(settings, platform).bot_token_env
    ]


def _table(settings: Settings, platform: str) -> ChatConfig:
    table: ChatConfig = getattr(settings, platform)
    return table


def token_check(settings: Settings, platform: str) -> Check:
    """Ask the platform who the bot is: Telegram ``getMe``, Discord ``GET /users/@me``,
    Slack ``auth.test``."""
    import httpx

    from watchkeeper.config import resolve_secret
    from watchkeeper.errors import ConfigError

    table = _table(settings, platform)
    name = f"{platform} token"
    try:
        token = resolve_secret(table.bot_token, table.bot_token_env, f"{platform}.bot_token")
    except ConfigError as exc:
        return Check(name, "fail", str(exc), f"export it with {_TOKEN_SOURCE[platform]}")
    if not token:
        return Check(
            name,
            "fail",
            f"[{platform}] has no bot_token_env (or bot_token)",
            f'set bot_token_env = "{TOKEN_ENV[platform]}" in [{platform}] and export '
            f"{TOKEN_ENV[platform]} with {_TOKEN_SOURCE[platform]}",
        )
    base = table.base_url.rstrip("/")
    try:
        with httpx.Client(timeout=table.timeout_s) as http:
            identity = _WHO_AM_I[platform](http, base, token)
    except httpx.HTTPError as exc:
        return Check(
            name,
            "fail",
            f"cannot reach {base}: {type(exc).__name__}",
            f"check this machine's network and proxy, or [{platform}] base_url",
        )
    if identity.startswith("refused: "):
        return Check(
            name,
            "fail",
            f"{platform} refused the token ({identity.removeprefix('refused: ')})",
            f"{_env_or_key(table, platform)} must hold {_TOKEN_SOURCE[platform]}",
        )
    return Check(name, "ok", identity)


def _env_or_key(table: ChatConfig, platform: str) -> str:
    return (
        f"the variable {table.bot_token_env}" if table.bot_token_env else f"[{platform}] bot_token"
    )


def _telegram_me(http: httpx.Client, base: str, token: str) -> str:
    answer = _json(http.post(f"{base}/bot{token}/getMe", json={}))
    if answer.get("ok") is True and isinstance(answer.get("result"), dict):
        return f"bot @{answer['result'].get('username', '?')}"
    return f"refused: {answer.get('description') or 'no Bot API answer'}"


def _discord_me(http: httpx.Client, base: str, token: str) -> str:
    response = http.get(f"{base}/users/@me", headers={"Authorization": f"Bot {token}"})
    answer = _json(response)
    if response.is_success and "username" in answer:
        return f"bot {answer['username']} ({answer.get('id', '?')})"
    return f"refused: HTTP {response.status_code} {answer.get('message', '')}".rstrip()


def _slack_me(http: httpx.Client, base: str, token: str) -> str:
    answer = _json(http.post(f"{base}/auth.test", headers={"Authorization": f"Bearer {token}"}))
    if answer.get("ok") is True:
        return f"bot {answer.get('user', '?')} in {answer.get('team', '?')}"
    return f"refused: {answer.get('error') or 'no Web API answer'}"


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        found = response.json()
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


_WHO_AM_I = {"telegram": _telegram_me, "discord": _discord_me, "slack": _slack_me}


def webhook_check(settings: Settings, platform: str) -> Check:
    """Whether presses on cards can reach this server from ``platform``.

    Telegram says where it delivers updates and its last delivery error
    (``getWebhookInfo``); Discord and Slack sign what they send, so the key
    that checks their signatures must be configured.
    """
    name = f"{platform} buttons"
    if platform == "discord":
        if settings.discord.public_key and settings.discord.application_id:
            return Check(name, "ok", "public_key and application_id are set")
        return Check(
            name,
            "warn",
            "[discord] public_key or application_id is missing: presses cannot be verified",
            "copy APPLICATION ID and PUBLIC KEY from the app's General Information page",
        )
    if platform == "slack":
        if settings.slack.signing_secret or settings.slack.signing_secret_env:
            return Check(name, "ok", "a signing secret is set")
        return Check(
            name,
            "warn",
            "[slack] has no signing_secret_env: presses cannot be verified",
            "export the app's Signing Secret (Basic Information) and name it in signing_secret_env",
        )
    return _telegram_webhook(settings)


def _telegram_webhook(settings: Settings) -> Check:
    import httpx

    from watchkeeper.config import resolve_secret
    from watchkeeper.errors import ConfigError

    name = "telegram buttons"
    table = settings.telegram
    try:
        token = resolve_secret(table.bot_token, table.bot_token_env, "telegram.bot_token")
    except ConfigError:
        token = None
    if not token:
        return Check(name, "fail", "not checked: no token", "fix the telegram token first")
    try:
        with httpx.Client(timeout=table.timeout_s) as http:
            response = http.post(f"{table.base_url.rstrip('/')}/bot{token}/getWebhookInfo", json={})
    except httpx.HTTPError as exc:
        return Check(name, "fail", f"cannot reach Telegram: {type(exc).__name__}", "")
    info = _json(response).get("result")
    if not isinstance(info, dict):
        return Check(name, "fail", "Telegram did not answer getWebhookInfo", "")
    url = info.get("url") or ""
    if not url:
        return Check(
            name,
            "warn",
            "no webhook set: cards arrive, but their buttons do nothing",
            "run setWebhook with https://YOUR-HOST/webhooks/telegram and the "
            "[telegram] webhook_secret (see docs/channels-telegram.md)",
        )
    error = info.get("last_error_message")
    if error:
        return Check(
            name,
            "fail",
            f"Telegram cannot deliver to {url}: {error}",
            "make that address reachable from the internet over HTTPS, "
            "and `watchkeeper serve` answer there",
        )
    return Check(name, "ok", f"webhook {url}")
