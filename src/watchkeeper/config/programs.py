"""``[programs.NAME]``, ``[groups.NAME]`` and ``[host_checks.NAME]``: programs ``serve`` keeps
running on its host, the groups that restart them together, and the host checks that pause
their starts.

docs/programs.md describes what each key does and how it maps to supervisord's options.
"""

from __future__ import annotations

import re
import shlex
import signal
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from watchkeeper.config.chat import check_notify

#: Program and group names: safe in paths, URLs and run ids.
PROGRAM_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
#: The signals a program may be stopped with, by the names supervisord uses.
STOP_SIGNALS = ("TERM", "INT", "QUIT", "HUP", "KILL", "USR1", "USR2")


class IntensityConfig(BaseModel):
    """How many restarts a group takes within a period before it gives up (a crash loop)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    restarts: int = Field(default=5, ge=0, le=10_000, description="restarts allowed ...")
    within_s: float = Field(default=60.0, gt=0, description="... within this many seconds")


class BackoffConfig(BaseModel):
    """The delay before each restart: `initial_s`, times `factor` per restart in a row, at
    most `max_s`, the last `jitter` of it random."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    initial_s: float = Field(default=0.5, ge=0, description="the delay before the first restart")
    factor: float = Field(
        default=2.0, ge=1, description="each restart in a row waits this much longer"
    )
    max_s: float = Field(default=30.0, ge=0, description="the longest delay")
    jitter: float = Field(
        default=0.5, ge=0, le=1, description="the fraction of each delay that is random"
    )
    reset_after_s: float = Field(
        default=60.0,
        ge=0,
        description="a program up this long starts its delays from initial_s again",
    )


class GroupConfig(BaseModel):
    """One ``[groups.NAME]`` table: programs that name it restart together by its strategy and
    share its intensity and backoff. They start in the order the file lists them and stop in
    the reverse order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: Literal["one_for_one", "one_for_all", "rest_for_one"] = Field(
        default="one_for_one",
        description="which programs a failed one takes down with it: itself, all, or itself "
        "and those listed after it",
    )
    intensity: IntensityConfig = Field(
        default=IntensityConfig(), description="the crash-loop limit its programs share"
    )
    backoff: BackoffConfig = Field(
        default=BackoffConfig(), description="the delays before its programs' restarts"
    )
    notify: str | None = Field(
        default=None,
        description="where its programs' notices go (a crash loop's card) unless a program "
        "says otherwise: `PLATFORM:CHAT[/THREAD]` (`slack:C0123`, `telegram:-1001234/7`) or "
        "`ops`, the ops channels (the default)",
    )

    @field_validator("notify")
    @classmethod
    def _notify_place(cls, value: str | None) -> str | None:
        return check_notify(value)


class ProgramHealthConfig(BaseModel):
    """Checks on a running program; `failures` bad answers in a row restart it (counted in its
    group's intensity like a crash)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    http: str | None = Field(
        default=None, description="a URL answered with a status below 400 while it is healthy"
    )
    heartbeat_file: Path | None = Field(
        default=None, description="a file the program touches while it works"
    )
    heartbeat_max_age_s: float = Field(
        default=60.0, gt=0, description="how old the heartbeat file may grow"
    )
    max_memory_mb: float | None = Field(
        default=None, gt=0, description="the most memory (RSS, its whole process tree) it may use"
    )
    interval_s: float = Field(default=10.0, gt=0, description="how often the checks run")
    timeout_s: float = Field(default=5.0, gt=0, description="the time limit of the HTTP probe")
    failures: int = Field(
        default=3, ge=1, le=100, description="bad answers in a row before it is restarted"
    )

    @field_validator("http")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @model_validator(mode="after")
    def _something_to_check(self) -> ProgramHealthConfig:
        if self.http is None and self.heartbeat_file is None and self.max_memory_mb is None:
            raise ValueError("set at least one of http, heartbeat_file or max_memory_mb")
        return self


class ProgramConfig(BaseModel):
    """One ``[programs.NAME]`` table: a command ``serve`` starts on its host and keeps running."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: tuple[str, ...] = Field(
        description='the program and its arguments, `["python", "-m", "crawler"]` (a string is '
        "split as a shell would, without running one)"
    )
    description: str | None = Field(default=None, description="what it does, in words")
    directory: Path | None = Field(
        default=None, description="its working folder (default: the configuration file's)"
    )
    environment: dict[str, str] = Field(
        default_factory=dict, description="variables set on top of the server's environment"
    )
    restart: Literal["permanent", "transient", "temporary"] = Field(
        default="permanent",
        description="`permanent`: always restarted; `transient`: only after an abnormal exit; "
        "`temporary`: never",
    )
    autostart: bool = Field(default=True, description="start it when the server starts")
    start_s: float = Field(
        default=1.0,
        ge=0,
        le=3600,
        description="a run shorter than this is a failed start; the next program of its group "
        "starts once it has run this long",
    )
    stop_signal: str = Field(
        default="TERM", description=f"the signal that stops it: {', '.join(STOP_SIGNALS)}"
    )
    stop_timeout_s: float = Field(
        default=10.0, ge=0, le=3600, description="how long it has to stop before it is killed"
    )
    exit_codes: tuple[int, ...] = Field(
        default=(0,), description="the exit statuses that are a normal exit"
    )
    group: str | None = Field(default=None, description="the `[groups.NAME]` it belongs to")
    host: str | None = Field(
        default=None,
        description="the host whose server runs it (default: every server that reads this file)",
    )
    contain: Literal["tree", "group"] = Field(
        default="tree",
        description="`tree`: a small keeper process holds every process it starts and ends "
        "them with it, as `run` does; `group`: its process group only, no keeper",
    )
    log_max_mb: float = Field(
        default=50.0, gt=0, description="its log is rotated when it grows past this"
    )
    log_backups: int = Field(default=10, ge=0, le=1000, description="rotated logs kept")
    intensity: IntensityConfig | None = Field(
        default=None, description="for a program in no group: its own crash-loop limit"
    )
    backoff: BackoffConfig | None = Field(
        default=None, description="for a program in no group: its own restart delays"
    )
    health: ProgramHealthConfig | None = Field(
        default=None, description="checks that restart it when they fail"
    )
    notify: str | None = Field(
        default=None,
        description="where its notices go (a crash loop's card): `PLATFORM:CHAT[/THREAD]` or "
        "`ops`, the ops channels (default: its group's `notify`, else `ops`)",
    )

    @field_validator("notify")
    @classmethod
    def _notify_place(cls, value: str | None) -> str | None:
        return check_notify(value)

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return shlex.split(value)
            except ValueError as exc:
                raise ValueError(f"cannot be split into arguments: {exc}") from None
        return value

    @field_validator("command")
    @classmethod
    def _not_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or not value[0]:
            raise ValueError('must name the program to run, e.g. ["python", "-m", "crawler"]')
        return value

    @field_validator("stop_signal")
    @classmethod
    def _signal_name(cls, value: str) -> str:
        name = value.upper().removeprefix("SIG")
        if name not in STOP_SIGNALS:
            raise ValueError(f"is not a stop signal; use one of {', '.join(STOP_SIGNALS)}")
        return name

    @property
    def stop_signum(self) -> signal.Signals:
        """The stop signal as a number."""
        return signal.Signals[f"SIG{self.stop_signal}"]


class HostCheckConfig(BaseModel):
    """One ``[host_checks.NAME]`` table: a check of this host that pauses the start (and the
    restarts) of the programs it names while it fails, and says so; running programs go on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["disk", "memory"] = Field(
        description="`disk`: free space where `path` is; `memory`: the host's available memory"
    )
    path: Path | None = Field(default=None, description="for `disk`: a path on the filesystem")
    min_free_mb: float | None = Field(
        default=None, gt=0, description="for `disk`: fails below this much free space"
    )
    min_available_mb: float | None = Field(
        default=None, gt=0, description="for `memory`: fails below this much available memory"
    )
    interval_s: float = Field(default=10.0, gt=0, description="how often it looks")
    pauses: tuple[str, ...] = Field(
        description="the programs (or groups) whose starts wait while it fails"
    )

    @model_validator(mode="after")
    def _kind_keys(self) -> HostCheckConfig:
        if not self.pauses:
            raise ValueError("pauses must name at least one program or group")
        if self.kind == "disk":
            if self.path is None or self.min_free_mb is None:
                raise ValueError('kind = "disk" needs path and min_free_mb')
            if self.min_available_mb is not None:
                raise ValueError('min_available_mb is for kind = "memory"; use min_free_mb')
        else:
            if self.min_available_mb is None:
                raise ValueError('kind = "memory" needs min_available_mb')
            if self.path is not None or self.min_free_mb is not None:
                raise ValueError('path and min_free_mb are for kind = "disk"')
        return self


def check_names(names: dict[str, Any], table: str) -> None:
    """Every table name under ``[table.*]`` is a program name."""
    for name in names:
        if not re.match(PROGRAM_NAME_PATTERN, name):
            raise ValueError(
                f"{table}.{name}: a name is letters, digits, '.', '_' and '-', starting with a "
                "letter or digit, at most 63 characters"
            )


def check_programs(
    programs: dict[str, ProgramConfig],
    groups: dict[str, GroupConfig],
    host_checks: dict[str, HostCheckConfig],
) -> None:
    """The tables agree: each group named exists and has programs, names do not clash,
    a grouped program leaves intensity and backoff to its group, checks pause what exists."""
    for name, program in programs.items():
        if program.group is None:
            continue
        if program.group not in groups:
            raise ValueError(
                f"programs.{name}.group = {program.group!r}: there is no [groups.{program.group}]; "
                "add the table (its strategy and intensity) or remove group"
            )
        for key in ("intensity", "backoff"):
            if getattr(program, key) is not None:
                raise ValueError(
                    f"programs.{name}.{key}: the programs of a group share the group's; "
                    f"set it in [groups.{program.group}]"
                )
    named = {program.group for program in programs.values()}
    for group in groups:
        if group in programs:
            raise ValueError(
                f"groups.{group}: a program has that name too; give the group another name"
            )
        if group not in named:
            raise ValueError(
                f"groups.{group}: no program names it; add group = {group!r} to its programs "
                "or remove the table"
            )
    for check_name, check in host_checks.items():
        for target in check.pauses:
            if target not in programs and target not in groups:
                raise ValueError(
                    f"host_checks.{check_name}.pauses: {target!r} is neither a program nor a "
                    "group of this file"
                )


def rebased(programs: dict[str, ProgramConfig], base_dir: Path) -> dict[str, Any]:
    """The programs with their relative paths read from ``base_dir`` (the file's folder)."""
    out: dict[str, Any] = {}
    for name, program in programs.items():
        table = program.model_dump(exclude_unset=True)
        folder = program.directory
        table["directory"] = base_dir if folder is None else base_dir / folder
        health = program.health
        if health is not None and health.heartbeat_file is not None:
            table["health"]["heartbeat_file"] = table["directory"] / health.heartbeat_file
        out[name] = table
    return out
