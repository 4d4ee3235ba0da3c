"""``watchkeeper init``: write a commented ``watchkeeper.toml``, then check that it works."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from watchkeeper.cli.app.checks import (
    PLATFORMS,
    TOKEN_ENV,
    Check,
    failed,
    print_checks,
    token_check,
    webhook_check,
)
from watchkeeper.cli.app.options import say
from watchkeeper.errors import InvalidInput
from watchkeeper.paths import LOCAL_CONFIG

if TYPE_CHECKING:
    from watchkeeper.config import Settings

_HEAD = """\
# watchkeeper.toml, written by `watchkeeper init`. Every key: docs/configuration.md.
# Check it at any time with `watchkeeper test-card` and, once served, `watchkeeper doctor`.

# The store: SQLite in this folder, next to this file. For PostgreSQL:
# database_url = "postgresql+psycopg://watchkeeper@localhost/watchkeeper"
data_dir = ".watchkeeper"

[server]
# Where `watchkeeper serve` listens; the CLI finds the server here too.
host = "127.0.0.1"
port = 8750

[ops]
# Where notices go for work with no chat of its own, and where `watchkeeper test-card`
# posts: log, webhook, or PLATFORM:CHAT[/THREAD].
"""

_TELEGRAM = """
[telegram]
# The token stays out of this file: export {env}=123456:AA... (from @BotFather).
bot_token_env = "{env}"
# Given to setWebhook as secret_token, so that only Telegram can press buttons
# (docs/channels-telegram.md shows the setWebhook call).
webhook_secret = "{secret}"
"""

_DISCORD = """
[discord]
# The token stays out of this file: export {env}=... (Bot > Token in the developer portal).
bot_token_env = "{env}"
# Both from the application's General Information page; needed for buttons
# (docs/channels-discord-slack.md).
# application_id = "1100000000000000001"
# public_key = "64 hex characters"
"""

_SLACK = """
[slack]
# The token stays out of this file: export {env}=xoxb-... (OAuth & Permissions).
bot_token_env = "{env}"
# Needed for buttons: export the app's Signing Secret (Basic Information), then uncomment.
# signing_secret_env = "WATCHKEEPER_SLACK_SIGNING_SECRET"
"""

_ADMINS = """
[admins]
# Platform user ids that may act from a card's buttons.
{lines}
"""

_TABLES = {"telegram": _TELEGRAM, "discord": _DISCORD, "slack": _SLACK}


def init(
    platform: list[str] = typer.Option(
        [], "--platform", "-p", help="telegram, discord or slack (repeatable)"
    ),
    chat: list[str] = typer.Option(
        [], "--chat", help="PLATFORM:CHAT[/THREAD] for ops notices and the test card (repeatable)"
    ),
    api: list[str] = typer.Option(
        [],
        "--api",
        help="PLATFORM=URL: the platform's API address, for a local Bot API server or a proxy",
    ),
    path: Path = typer.Option(Path(LOCAL_CONFIG), "--path", help="the file to write"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing file"),
    check: bool = typer.Option(
        True, "--check/--no-check", help="check tokens, webhooks and send a test card"
    ),
) -> None:
    """Write a commented watchkeeper.toml for the chosen chat platforms, then check it."""
    chosen = _platforms(platform, chat)
    bases = _bases(api, chosen)
    if path.exists() and not force:
        raise InvalidInput(
            f"{path} already exists: pass --force to overwrite it, or check it with "
            f"`watchkeeper --config {path} test-card`"
        )
    text = render(chosen, chat, bases)
    from watchkeeper import config

    config.parse(_toml(text), str(path))  # a file serve would refuse is never written
    path.write_text(text, encoding="utf-8")
    say(f"wrote {path} for {', '.join(chosen) or 'log notices only'}")
    for name in chosen:
        say(f"  export {TOKEN_ENV[name]}=... before `watchkeeper --config {path} serve`")
    if not check:
        return
    checks = run_checks(config.load(path), chosen, chat)
    print_checks(f"Checks of {path}", checks)
    if failed(checks):
        raise typer.Exit(1)


def _toml(text: str) -> dict[str, object]:
    import tomllib

    return tomllib.loads(text)


def _platforms(platform: Sequence[str], chats: Sequence[str]) -> list[str]:
    for name in platform:
        if name not in PLATFORMS:
            raise InvalidInput(f"--platform {name!r}: choose telegram, discord or slack")
    for place in chats:
        name, _, rest = place.partition(":")
        if name not in PLATFORMS or not rest:
            raise InvalidInput(
                f"--chat {place!r}: write PLATFORM:CHAT[/THREAD], PLATFORM one of "
                "telegram, discord, slack (for example telegram:-1001234567890)"
            )
    named = set(platform) | {place.partition(":")[0] for place in chats}
    return [name for name in PLATFORMS if name in named]


def _bases(api: Sequence[str], chosen: Sequence[str]) -> dict[str, str]:
    bases = {}
    for entry in api:
        name, _, url = entry.partition("=")
        if name not in chosen or not url.startswith(("http://", "https://")):
            raise InvalidInput(
                f"--api {entry!r}: write PLATFORM=URL for a chosen platform, "
                "for example telegram=http://127.0.0.1:8081"
            )
        bases[name] = url
    return bases


def render(platforms: Sequence[str], chats: Sequence[str], bases: dict[str, str]) -> str:
    """The commented file for ``platforms``, posting to ``chats``, their APIs at ``bases``."""
    channels = ["log", *chats]
    lines = [_HEAD, f"channels = {json.dumps(channels)}\n"]
    if not chats:
        lines.append('# channels = ["log", "telegram:-1001234567890", "slack:C0123"]\n')
    for name in platforms:
        table = _TABLES[name].format(env=TOKEN_ENV[name], secret=secrets.token_hex(24))
        if name in bases:
            table += f"base_url = {json.dumps(bases[name])}\n"
        lines.append(table)
    if platforms:
        lines.append(_ADMINS.format(lines="\n".join(f"{n} = []" for n in platforms)))
    return "".join(lines)


def run_checks(settings: Settings, platforms: Sequence[str], chats: Sequence[str]) -> list[Check]:
    """Each platform's token and webhook, then a test card to each chat whose token works."""
    from watchkeeper.cli.app.testcard import send_test_cards

    checks: list[Check] = []
    working = set()
    for name in platforms:
        token = token_check(settings, name)
        checks.append(token)
        if token.state == "ok":
            working.add(name)
            checks.append(webhook_check(settings, name))
    for name in platforms:
        if not any(place.startswith(f"{name}:") for place in chats):
            checks.append(
                Check(
                    f"{name} test card",
                    "warn",
                    "not sent: no chat given",
                    f"pass --chat {name}:CHAT_ID, or add it to [ops] channels and run "
                    "`watchkeeper test-card`",
                )
            )
    reachable = [place for place in chats if place.partition(":")[0] in working]
    if reachable:
        checks.extend(send_test_cards(settings, reachable))
    return checks
