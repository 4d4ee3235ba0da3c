"""The ``watchkeeper.toml`` model: load, validate, and explain a bad file in one message.

A file is found through ``--config`` or ``WATCHKEEPER_CONFIG``; without one
the defaults apply (data folder ``./.watchkeeper``, SQLite inside it).
Relative paths in a file are read relative to the file's own folder.

The model lives in modules by job (``chat``, ``tables``, ``programs``, ``settings``,
``secrets``, ``loading``); every public name is importable from here.
"""

from __future__ import annotations

from watchkeeper.config.chat import (
    AdminsConfig,
    ChatConfig,
    DiscordConfig,
    OpsConfig,
    SlackConfig,
    TelegramConfig,
)
from watchkeeper.config.loading import explain, load, parse
from watchkeeper.config.programs import (
    BackoffConfig,
    GroupConfig,
    HostCheckConfig,
    IntensityConfig,
    ProgramConfig,
    ProgramHealthConfig,
)
from watchkeeper.config.secrets import SECRET_KEYS, check_secrets, resolve_secret
from watchkeeper.config.settings import (
    DEFAULT_BUDGETS,
    FALLBACK_BUDGET_S,
    KIND_NAME_PATTERN,
    Settings,
)
from watchkeeper.config.tables import (
    ActionConfig,
    DiagnoseConfig,
    ForgeConfig,
    KindConfig,
    OrgConfig,
    PriceOverride,
    QueueConfig,
    RecordsConfig,
    RunbooksConfig,
    ServerConfig,
)
from watchkeeper.paths import CONFIG_ENV, DATABASE_URL_ENV, DEFAULT_DATA_DIR

__all__ = [
    "CONFIG_ENV",
    "DATABASE_URL_ENV",
    "DEFAULT_BUDGETS",
    "DEFAULT_DATA_DIR",
    "FALLBACK_BUDGET_S",
    "KIND_NAME_PATTERN",
    "SECRET_KEYS",
    "ActionConfig",
    "AdminsConfig",
    "BackoffConfig",
    "ChatConfig",
    "DiagnoseConfig",
    "DiscordConfig",
    "ForgeConfig",
    "GroupConfig",
    "HostCheckConfig",
    "IntensityConfig",
    "KindConfig",
    "OpsConfig",
    "OrgConfig",
    "PriceOverride",
    "ProgramConfig",
    "ProgramHealthConfig",
    "QueueConfig",
    "RecordsConfig",
    "RunbooksConfig",
    "ServerConfig",
    "Settings",
    "SlackConfig",
    "TelegramConfig",
    "check_secrets",
    "explain",
    "load",
    "parse",
    "resolve_secret",
]
