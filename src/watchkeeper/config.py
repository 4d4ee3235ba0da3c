"""The ``watchkeeper.toml`` model: load, validate, and explain a bad file in one message.

A file is found through ``--config`` or ``WATCHKEEPER_CONFIG``; without one
the defaults apply (data folder ``./.watchkeeper``, SQLite inside it).
Relative paths in a file are read relative to the file's own folder.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from watchkeeper.errors import ConfigError
from watchkeeper.redact import redact

CONFIG_ENV = "WATCHKEEPER_CONFIG"
DATABASE_URL_ENV = "WATCHKEEPER_DATABASE_URL"
DEFAULT_DATA_DIR = ".watchkeeper"

#: Progress budgets (seconds without progress before work counts as stalled).
DEFAULT_BUDGETS: dict[str, float] = {
    "chat_turn": 600.0,
    "swarm_task": 600.0,
    "document_job": 600.0,
    "research_session": 180.0,
    "crawl": 180.0,
    "process": 600.0,
    # Children of in-process supervision trees, reported by watchkeeper.supervise.ChildReporter.
    "child": 600.0,
    # Tasks of the job queue, leased by runners (watchkeeper.queue).
    "task": 600.0,
}
#: Built-in kinds read by an adapter of their own instead of ``push``.
_BUILTIN_ADAPTERS = {"process": "process", "task": "tasks"}
FALLBACK_BUDGET_S = 600.0
KIND_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,62}$"
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
        "linear_secret",
        "auth_header",
    }
)
#: What Telegram accepts as ``secret_token`` in setWebhook.
_TELEGRAM_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")
_HEX = re.compile(r"[0-9A-Fa-f]+")


class ActionConfig(BaseModel):
    """How a kind performs one action: an HTTP call to the owning system, or a Python function.

    ``url`` may use ``{run_id}``, ``{kind}``, ``{incident_id}`` and ``{action}``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    url: str | None = None
    auth_header: str | None = Field(default=None, description="the Authorization header's value")
    auth_header_env: str | None = Field(default=None, description="environment variable holding it")
    expected_status: list[int] = Field(default_factory=lambda: [200, 201, 202, 204])
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    entry_point: str | None = Field(default=None, description="package.module:function")

    @model_validator(mode="after")
    def _one_way(self) -> ActionConfig:
        if (self.url is None) == (self.entry_point is None):
            raise ValueError(
                "set exactly one of url (an HTTP call) or entry_point (module:function)"
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must be an http:// or https:// URL template")
        if self.entry_point is not None and ":" not in self.entry_point:
            raise ValueError("entry_point must look like package.module:function")
        return self


class KindConfig(BaseModel):
    """One ``[kinds.NAME]`` table. Keys other than these are the adapter's options."""

    model_config = ConfigDict(extra="allow", frozen=True)

    adapter: str = "push"
    budget_s: float | None = Field(default=None, gt=0)
    expected_s: float | None = Field(default=None, gt=0)
    timeout_s: float = Field(default=10.0, gt=0, le=600)
    #: The kind already alerts on its own: incidents are recorded, no message is sent.
    reports_itself: bool = False
    actions: dict[Literal["cancel", "retry", "close_turn"], ActionConfig] = Field(
        default_factory=dict
    )

    @property
    def options(self) -> dict[str, Any]:
        """The adapter's own options: every key this model does not know."""
        return dict(self.model_extra or {})


class OpsConfig(BaseModel):
    """Where notices for operators go when no chat owns the work.

    ``channels`` lists conversations as ``PLATFORM:CHAT[/THREAD]`` (for example
    ``slack:C0123``, ``telegram:-1001234/7``, ``discord:123456``), or ``webhook``
    for the signed webhook below, or ``log``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    webhook_url: str | None = None
    webhook_secret: str | None = None
    timeout_s: float = Field(default=5.0, gt=0, le=60)
    channels: list[str] = Field(default_factory=lambda: ["log"])

    @field_validator("channels")
    @classmethod
    def _channel_names(cls, channels: list[str]) -> list[str]:
        for entry in channels:
            platform, _, chat = entry.partition(":")
            if entry in {"log", "webhook"}:
                continue
            if platform not in {"telegram", "discord", "slack"} or not chat:
                raise ValueError(
                    f"{entry!r} is not a channel: write log, webhook, or PLATFORM:CHAT[/THREAD] "
                    "with PLATFORM one of telegram, discord, slack"
                )
        return channels

    @field_validator("webhook_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value


class TelegramConfig(BaseModel):
    """The Telegram bot: sends cards, receives button presses on ``/webhooks/telegram``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bot_token: str | None = None
    bot_token_env: str | None = None
    webhook_secret: str | None = Field(
        default=None, description="checked in X-Telegram-Bot-Api-Secret-Token"
    )
    base_url: str = "https://api.telegram.org"
    timeout_s: float = Field(default=10.0, gt=0, le=120)

    @field_validator("webhook_secret")
    @classmethod
    def _telegram_accepts(cls, value: str | None) -> str | None:
        # Telegram refuses other secrets at setWebhook, and the webhook would never verify.
        if value is not None and not _TELEGRAM_SECRET.fullmatch(value):
            raise ValueError(
                "Telegram accepts 1 to 256 characters from A-Z, a-z, 0-9, _ and - only: "
                "pick a new secret made of those (for example from `openssl rand -hex 32`)"
            )
        return value


class DiscordConfig(BaseModel):
    """The Discord bot and its interactions endpoint (``/webhooks/discord``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bot_token: str | None = None
    bot_token_env: str | None = None
    application_id: str | None = None
    public_key: str | None = Field(default=None, description="hex Ed25519 key of the application")
    base_url: str = "https://discord.com/api/v10"
    timeout_s: float = Field(default=10.0, gt=0, le=120)

    @field_validator("public_key")
    @classmethod
    def _ed25519_hex(cls, value: str | None) -> str | None:
        if value is not None and (len(value) != 64 or not _HEX.fullmatch(value)):
            raise ValueError(
                "must be the 64 hex characters of PUBLIC KEY on the application's General "
                "Information page in the Discord developer portal"
            )
        return value


class SlackConfig(BaseModel):
    """The Slack app: Web API for posting, interactivity on ``/webhooks/slack``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bot_token: str | None = None
    bot_token_env: str | None = None
    signing_secret: str | None = None
    signing_secret_env: str | None = None
    base_url: str = "https://slack.com/api"
    timeout_s: float = Field(default=10.0, gt=0, le=120)

    @field_validator("signing_secret")
    @classmethod
    def _slack_hex(cls, value: str | None) -> str | None:
        if value is not None and not _HEX.fullmatch(value):
            raise ValueError(
                "must be hex digits: copy Signing Secret from the app's Basic Information "
                "page on api.slack.com"
            )
        return value


class AdminsConfig(BaseModel):
    """Who may act from each chat platform, by the platform's own user id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slack: list[str] = Field(default_factory=list)
    telegram: list[str] = Field(default_factory=list)
    discord: list[str] = Field(default_factory=list)

    def allows(self, platform: str, user_id: str) -> bool:
        """Whether ``user_id`` is an admin on ``platform``."""
        return user_id in getattr(self, platform, [])


class RunbooksConfig(BaseModel):
    """Automatic first steps, each off until switched on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    retry_failed_without_effects: bool = False
    retry_out_of_attempts: bool = False
    close_abandoned_turns: bool = False


class DiagnoseConfig(BaseModel):
    """An optional OpenAI-compatible endpoint for "Ask to diagnose"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    timeout_s: float = Field(default=20.0, gt=0, le=300)

    @model_validator(mode="after")
    def _complete(self) -> DiagnoseConfig:
        if (self.base_url is None) != (self.model is None):
            raise ValueError("set both base_url and model, or neither")
        return self


class ServerConfig(BaseModel):
    """Where ``watchkeeper serve`` listens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8750, ge=1, le=65535)
    #: Long-polls and event streams one token, and the whole server, may hold open at once.
    long_waits_per_token: int = Field(default=8, ge=1, le=10_000)
    long_waits_total: int = Field(default=64, ge=1, le=100_000)


class OrgConfig(BaseModel):
    """One ``[orgs.NAME]`` table: the org's caps on the job queue and how to start a runner."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_concurrent_jobs: int | None = Field(default=None, ge=1)
    monthly_agent_minutes: float | None = Field(default=None, gt=0)
    launcher: str | None = Field(
        default=None, min_length=1, description="command that cold-starts a runner for the org"
    )


class QueueConfig(BaseModel):
    """The ``[queue]`` table: leases, attempts, runner liveness and cold starts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lease_s: float = Field(default=60.0, ge=1, le=86400)
    max_attempts: int = Field(default=3, ge=1, le=100)
    runner_offline_after_s: float = Field(default=30.0, gt=0, le=86400)
    provision_timeout_s: float = Field(default=300.0, gt=0, le=86400)
    provision_retry_s: float = Field(default=120.0, gt=0, le=86400)
    launcher_timeout_s: float = Field(default=60.0, gt=0, le=3600)


class PriceOverride(BaseModel):
    """One ``[prices."provider/model"]`` table: USD per million tokens for a private or new model.

    Cache reads and writes are priced as uncached input when their own price is not given.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cache_read_per_mtok: float | None = Field(default=None, ge=0)
    cache_write_per_mtok: float | None = Field(default=None, ge=0)


class ForgeConfig(BaseModel):
    """The ``[forge]`` table: signed webhooks from GitHub and Linear (``/webhooks/...``).

    ``job_pattern`` finds job ids in a pull request's title, body or branch (its first group
    is the id): ``wk-job:j-...`` in text, ``wk-job/j-...`` in a branch name. A Linear issue
    becomes a job running ``linear_argv`` (``{identifier}``, ``{issue_id}`` and ``{url}`` are
    filled in) on ``linear_fleet`` for ``linear_org``; without ``linear_argv`` the request is
    kept as pending.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    github_secret: str | None = None
    github_secret_env: str | None = None
    linear_secret: str | None = None
    linear_secret_env: str | None = None
    job_pattern: str = r"wk-job[:/](j-[0-9a-f]{1,60})"
    linear_label: str = "watchkeeper"
    linear_org: str = "default"
    linear_fleet: str = "default"
    linear_argv: list[str] = Field(default_factory=list)

    @field_validator("job_pattern")
    @classmethod
    def _one_group(cls, value: str) -> str:
        import re

        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        if compiled.groups < 1:
            raise ValueError("needs a group capturing the job id, e.g. wk-job:(j-[0-9a-f]+)")
        return value


class RecordsConfig(BaseModel):
    """The ``[records]`` table: the key execution records are signed with.

    Without ``key_env`` a random key is generated once into ``DATA_DIR/record.key``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    key_env: str | None = None


class Settings(BaseModel):
    """The whole configuration, validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data_dir: Path = Path(DEFAULT_DATA_DIR)
    database_url: str | None = None
    check_interval_s: float = Field(default=30.0, gt=0, le=3600)
    down_after_s: float = Field(default=300.0, gt=0)
    kinds: dict[str, KindConfig] = Field(default_factory=dict)
    ops: OpsConfig = OpsConfig()
    server: ServerConfig = ServerConfig()
    admins: AdminsConfig = AdminsConfig()
    telegram: TelegramConfig = TelegramConfig()
    discord: DiscordConfig = DiscordConfig()
    slack: SlackConfig = SlackConfig()
    runbooks: RunbooksConfig = RunbooksConfig()
    diagnose: DiagnoseConfig = DiagnoseConfig()
    orgs: dict[str, OrgConfig] = Field(default_factory=dict)
    queue: QueueConfig = QueueConfig()
    prices: dict[str, PriceOverride] = Field(default_factory=dict)
    forge: ForgeConfig = ForgeConfig()
    records: RecordsConfig = RecordsConfig()

    @field_validator("kinds")
    @classmethod
    def _kind_names(cls, kinds: dict[str, KindConfig]) -> dict[str, KindConfig]:
        import re

        for name in kinds:
            if not re.match(KIND_NAME_PATTERN, name):
                raise ValueError(
                    f"kind name {name!r} must be lowercase letters, digits and underscores, "
                    "starting with a letter"
                )
        return kinds

    @field_validator("database_url")
    @classmethod
    def _supported_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("sqlite:", "sqlite+pysqlite:", "postgresql")):
            raise ValueError(
                "must be a SQLAlchemy URL for SQLite (sqlite:///path) "
                "or PostgreSQL (postgresql+psycopg://user@host/db)"
            )
        if value.startswith("postgresql") and not value.startswith("postgresql+psycopg"):
            raise ValueError(
                "PostgreSQL URLs must use the psycopg driver: postgresql+psycopg://..."
            )
        return value

    @property
    def resolved_database_url(self) -> str:
        """The database URL in force: the configured one or SQLite in the data folder."""
        return self.database_url or f"sqlite:///{self.data_dir / 'watchkeeper.db'}"

    def kind_configs(self) -> dict[str, KindConfig]:
        """Every kind in force: the built-in push kinds, overridden by the file's tables."""
        merged = {
            name: KindConfig(adapter=_BUILTIN_ADAPTERS.get(name, "push"))
            for name in DEFAULT_BUDGETS
        }
        merged.update(self.kinds)
        return merged

    def budget_for(self, name: str) -> float:
        """The progress budget of kind ``name``."""
        configured = self.kind_configs().get(name)
        if configured is not None and configured.budget_s is not None:
            return configured.budget_s
        return DEFAULT_BUDGETS.get(name, FALLBACK_BUDGET_S)


def explain(error: ValidationError, source: str) -> str:
    """One message per problem: the key, its value (never a secret's) and what is expected."""
    lines = []
    for problem in error.errors():
        key = ".".join(str(part) for part in problem["loc"]) or "(top level)"
        message = str(problem["msg"]).removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            lines.append(f"{source}: unknown key {key!r}: remove it or check its spelling")
            continue
        if problem["type"] == "missing":
            lines.append(f"{source}: {key} is required")
            continue
        lines.append(f"{source}: {key}{_shown(problem)}: {message}")
    return redact("\n".join(lines))


def _shown(problem: Any) -> str:
    """`` = value`` for a plain scalar; nothing a secret or a whole table could leak through."""
    loc = problem["loc"]
    value = problem.get("input")
    if loc and str(loc[-1]) in SECRET_KEYS:
        return " (hidden)"
    if isinstance(value, dict | list) or value is None:
        return ""
    return f" = {value!r}"


def parse(
    raw: dict[str, Any], source: str = "configuration", base_dir: Path | None = None
) -> Settings:
    """Validate a decoded TOML document; relative ``data_dir`` is taken from ``base_dir``."""
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(explain(exc, source)) from None
    env_url = os.environ.get(DATABASE_URL_ENV)
    updates: dict[str, Any] = {}
    if env_url:
        updates["database_url"] = env_url
    if base_dir is not None and not settings.data_dir.is_absolute():
        updates["data_dir"] = base_dir / settings.data_dir
    if updates:
        try:
            settings = Settings.model_validate({**settings.model_dump(), **updates})
        except ValidationError as exc:
            raise ConfigError(explain(exc, DATABASE_URL_ENV)) from None
    return settings


def load(path: str | Path | None = None) -> Settings:
    """Load the configuration named by ``path`` or ``WATCHKEEPER_CONFIG``, or the defaults."""
    chosen = path or os.environ.get(CONFIG_ENV)
    if not chosen:
        return parse({}, "defaults")
    file = Path(chosen)
    if not file.is_file():
        raise ConfigError(
            f"{file}: no such configuration file; pass an existing file with --config "
            f"or unset {CONFIG_ENV}"
        )
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot be read: {exc}") from None
    return parse(raw, str(file), base_dir=file.parent.resolve())


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
    ]


def _accept(_value: str) -> str | None:
    return None


def _hex_only(value: str) -> str | None:
    return None if _HEX.fullmatch(value) else "must be hex digits (Slack's Signing Secret)"


_ENV_SECRET_CHECKS: dict[str, Callable[[str], str | None]] = {"slack.signing_secret": _hex_only}
