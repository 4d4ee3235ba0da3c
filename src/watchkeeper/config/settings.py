"""The whole configuration, its defaults and the budgets of the built-in kinds."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from watchkeeper.config import chat, tables
from watchkeeper.config.presets import PRESETS
from watchkeeper.config.programs import (
    GroupConfig,
    HostCheckConfig,
    ProgramConfig,
    check_names,
    check_programs,
)
from watchkeeper.config.tables import KindConfig
from watchkeeper.paths import DATABASE_FILE, DEFAULT_DATA_DIR

#: Progress budgets (seconds without progress before work counts as stalled): every
#: preset's, and those of the kinds watchkeeper supervises for itself.
DEFAULT_BUDGETS: dict[str, float] = {
    **{name: preset.budget_s for name, preset in PRESETS.items()},
    "process": 600.0,
    # Children of in-process supervision trees, reported by watchkeeper.supervise.ChildReporter.
    "child": 600.0,
    # Tasks of the job queue, leased by runners (watchkeeper.queue).
    "task": 600.0,
    # Programs `serve` keeps running ([programs.NAME]): never stalled while they run.
    "program": 600.0,
}
#: Built-in kinds read by an adapter of their own instead of ``push``.
_BUILTIN_ADAPTERS = {"process": "process", "task": "tasks", "program": "program"}
FALLBACK_BUDGET_S = 600.0
KIND_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,62}$"


def _from_built_in(name: str, table: Any) -> Any:
    """A ``[kinds.NAME]`` table starting from what kind NAME is without one: its preset, or
    the adapter that reads it; other kinds' tables (and keys the table sets) as they are."""
    if not isinstance(table, dict) or "preset" in table:
        return table
    if name in PRESETS:
        return {"preset": name, **table}
    if name in _BUILTIN_ADAPTERS and "adapter" not in table:
        return {"adapter": _BUILTIN_ADAPTERS[name], **table}
    return table


#: Every built-in kind as configured without a table (frozen, so shared by all settings).
_BUILTIN_KINDS: dict[str, KindConfig] = {
    name: KindConfig.model_validate(_from_built_in(name, {})) for name in DEFAULT_BUDGETS
}


class Settings(BaseModel):
    """The whole configuration, validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data_dir: Path = Field(
        default=Path(DEFAULT_DATA_DIR),
        description="where the SQLite database, the record key and local state live",
    )
    database_url: str | None = Field(
        default=None,
        description="`sqlite:///path` or `postgresql+psycopg://user@host/db` (default: SQLite in "
        "`data_dir`); `WATCHKEEPER_DATABASE_URL` overrides it",
    )
    check_interval_s: float = Field(
        default=30.0, gt=0, le=3600, description="the longest time between two sweeps"
    )
    down_after_s: float = Field(
        default=300.0,
        gt=0,
        description="how long sweeps may keep failing before operators are told",
    )
    kinds: dict[str, KindConfig] = Field(default_factory=dict)
    ops: chat.OpsConfig = chat.OpsConfig()
    server: tables.ServerConfig = tables.ServerConfig()
    admins: chat.AdminsConfig = chat.AdminsConfig()
    telegram: chat.TelegramConfig = chat.TelegramConfig()
    discord: chat.DiscordConfig = chat.DiscordConfig()
    slack: chat.SlackConfig = chat.SlackConfig()
    runbooks: tables.RunbooksConfig = tables.RunbooksConfig()
    diagnose: tables.DiagnoseConfig = tables.DiagnoseConfig()
    orgs: dict[str, tables.OrgConfig] = Field(default_factory=dict)
    queue: tables.QueueConfig = tables.QueueConfig()
    prices: dict[str, tables.PriceOverride] = Field(default_factory=dict)
    forge: tables.ForgeConfig = tables.ForgeConfig()
    records: tables.RecordsConfig = tables.RecordsConfig()
    programs: dict[str, ProgramConfig] = Field(
        default_factory=dict,
        description="programs the server keeps running on its host (docs/programs.md)",
    )
    groups: dict[str, GroupConfig] = Field(
        default_factory=dict,
        description="programs restarted together, with their strategy and intensity",
    )
    host_checks: dict[str, HostCheckConfig] = Field(
        default_factory=dict,
        description="checks of the host that pause the start of the programs they name",
    )

    @field_validator("kinds", mode="before")
    @classmethod
    def _named_after_a_preset(cls, kinds: Any) -> Any:
        # A table for a built-in kind changes that kind, so it starts from the kind as it is.
        if not isinstance(kinds, dict):
            return kinds
        return {name: _from_built_in(name, table) for name, table in kinds.items()}

    @field_validator("kinds")
    @classmethod
    def _kind_names(cls, kinds: dict[str, KindConfig]) -> dict[str, KindConfig]:
        for name in kinds:
            if not re.match(KIND_NAME_PATTERN, name):
                raise ValueError(
                    f"kind name {name!r} must be lowercase letters, digits and underscores, "
                    "starting with a letter"
                )
        return kinds

    @model_validator(mode="after")
    def _programs_agree(self) -> Settings:
        check_names(self.programs, "programs")
        check_names(self.groups, "groups")
        check_programs(self.programs, self.groups, self.host_checks)
        return self

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
        return self.database_url or f"sqlite:///{self.data_dir / DATABASE_FILE}"

    def kind_configs(self) -> dict[str, KindConfig]:
        """Every kind in force: the built-in push kinds, overridden by the file's tables."""
        merged = dict(_BUILTIN_KINDS)
        merged.update(self.kinds)
        return merged

    def budget_for(self, name: str) -> float:
        """The progress budget of kind ``name``."""
        configured = self.kind_configs().get(name)
        if configured is not None and configured.budget_s is not None:
            return configured.budget_s
        return DEFAULT_BUDGETS.get(name, FALLBACK_BUDGET_S)
