"""The tables that shape the work: kinds and their actions, runbooks, the queue, prices, forges."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from watchkeeper.config.presets import PAGED_CONDITIONS, condition_list, preset_table
from watchkeeper.contract import DEFAULT_LOOP_AFTER


class ActionConfig(BaseModel):
    """How a kind performs one action: an HTTP call to the owning system, or a Python function.

    ``url`` may use ``{run_id}``, ``{kind}``, ``{incident_id}`` and ``{action}``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = Field(
        default="POST", description="the HTTP method of the call"
    )
    url: str | None = Field(default=None, description="the URL template to call")
    auth_header: str | None = Field(default=None, description="the Authorization header's value")
    auth_header_env: str | None = Field(default=None, description="environment variable holding it")
    expected_status: list[int] = Field(
        default_factory=lambda: [200, 201, 202, 204],
        description="the statuses that count as done; any other is a failed action",
    )
    timeout_s: float = Field(default=10.0, gt=0, le=300, description="the call's time limit")
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
    """One ``[kinds.NAME]`` table. Keys other than these are the adapter's options.

    ``preset`` names a preset the table starts from (its keys win); ``reports``
    lists the conditions the work already alerts on by itself, which are recorded
    but never messaged. ``reports_itself = true`` is short for every paged one.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    adapter: str = Field(
        default="push",
        description="`push`, `sql`, an engine's name, or an installed plugin's name",
    )
    engine: Literal["celery", "rq", "arq", "langgraph", "prefect"] | None = Field(
        default=None,
        description="an engine the work already runs in, read as it stands (docs/engines.md): "
        "sets `adapter` to it; `url` is its broker, store or API and `backend` Celery's result "
        "backend when not the broker",
    )
    preset: str | None = Field(
        default=None,
        description="the preset the table starts from (default: the table's name, when it names "
        "one); every other key the table sets wins",
    )
    budget_s: float | None = Field(
        default=None,
        gt=0,
        description="seconds without progress before running work is stalled "
        "(default: the preset's, else 600)",
    )
    expected_s: float | None = Field(
        default=None, gt=0, description="seconds the work is expected to take; past it, slow"
    )
    loop_after: int = Field(
        default=DEFAULT_LOOP_AFTER,
        ge=0,
        le=1_000_000,
        description="identical progress reports in a row (same step, same counters) that make "
        "running work looping; 0 never by count (the same reports for longer than the budget "
        "still are)",
    )
    timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="the time limit of one read of this kind, from when it starts",
    )
    reports: tuple[str, ...] = Field(
        default=(),
        description="the conditions (`failed`, `stuck`, `stalled`, `looping`) the work already "
        "alerts on by itself: recorded and listed, never messaged (default: the preset's)",
    )
    actions: dict[Literal["cancel", "retry", "close_turn"], ActionConfig] = Field(
        default_factory=dict,
        description="How the kind performs each action (see decisions.md, Kind actions).",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_preset(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        table = dict(data)
        if "reports_itself" in table:
            if "reports" in table:
                raise ValueError(
                    "set reports (the conditions the work reports itself) or reports_itself, "
                    "not both"
                )
            flag = table.pop("reports_itself")
            if not isinstance(flag, bool):
                raise ValueError("reports_itself must be true or false")
            table["reports"] = list(PAGED_CONDITIONS) if flag else []
        if table.get("preset") is not None:
            table = {**preset_table(table["preset"]), **table}
        engine = table.get("engine")
        if isinstance(engine, str):
            adapter = table.setdefault("adapter", engine)
            if adapter != engine:
                raise ValueError(
                    f"engine = {engine!r} reads the work through the {engine} adapter: "
                    f"remove adapter = {adapter!r}"
                )
        return table

    @field_validator("reports", mode="before")
    @classmethod
    def _paged_conditions(cls, value: object) -> tuple[str, ...]:
        return condition_list(value)

    @field_validator("loop_after")
    @classmethod
    def _repeats_at_least_once(cls, value: int) -> int:
        if value == 1:
            raise ValueError(
                "one report cannot repeat itself: set 2 or more, or 0 to never count repeats"
            )
        return value

    @property
    def reports_itself(self) -> bool:
        """Whether the work alerts on every paged condition by itself."""
        return self.reports == PAGED_CONDITIONS

    def self_reports(self, condition: str) -> bool:
        """Whether the work already alerts on ``condition`` itself (so nobody is messaged)."""
        return condition in self.reports

    @property
    def options(self) -> dict[str, Any]:
        """The adapter's own options: every key this model does not know."""
        return dict(self.model_extra or {})


class RunbooksConfig(BaseModel):
    """Automatic first steps, each off until switched on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    retry_failed_without_effects: bool = Field(
        default=False, description="retry a failed task whose effects are `none`"
    )
    retry_out_of_attempts: bool = Field(
        default=False, description="retry a job that ran out of attempts"
    )
    close_abandoned_turns: bool = Field(
        default=False, description="close a chat turn left open with nothing running it"
    )


class DiagnoseConfig(BaseModel):
    """An optional OpenAI-compatible endpoint for "Ask to diagnose"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = Field(default=None, description="the endpoint's API root")
    model: str | None = Field(default=None, description="the model to ask")
    api_key_env: str | None = Field(
        default=None, description="the environment variable holding the API key"
    )
    timeout_s: float = Field(
        default=20.0, gt=0, le=300, description="the time limit of one diagnosis"
    )

    @model_validator(mode="after")
    def _complete(self) -> DiagnoseConfig:
        if (self.base_url is None) != (self.model is None):
            raise ValueError("set both base_url and model, or neither")
        return self


class ServerConfig(BaseModel):
    """Where ``watchkeeper serve`` listens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(default="127.0.0.1", description="the address to listen on")
    port: int = Field(default=8750, ge=1, le=65535, description="the port to listen on")
    long_waits_per_token: int = Field(
        default=8,
        ge=1,
        le=10_000,
        description="long-polls and event streams one token may hold open at once; past it "
        "the request gets 429 with Retry-After",
    )
    long_waits_total: int = Field(
        default=64,
        ge=1,
        le=100_000,
        description="long-polls and event streams the whole server may hold open at once",
    )


class OrgConfig(BaseModel):
    """One ``[orgs.NAME]`` table: the org's caps on the job queue and how to start a runner."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_concurrent_jobs: int | None = Field(
        default=None, ge=1, description="jobs of the org that may run at once (default: no cap)"
    )
    monthly_agent_minutes: float | None = Field(
        default=None,
        gt=0,
        description="runner minutes the org may use in a calendar month (default: no cap)",
    )
    launcher: str | None = Field(
        default=None, min_length=1, description="command that cold-starts a runner for the org"
    )


class QueueConfig(BaseModel):
    """The ``[queue]`` table: leases, attempts, runner liveness and cold starts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lease_s: float = Field(
        default=60.0, ge=1, le=86400, description="a lease lapses this long after its last renewal"
    )
    max_attempts: int = Field(
        default=3, ge=1, le=100, description="lapsed leases re-queue a task this many times in all"
    )
    runner_offline_after_s: float = Field(
        default=30.0,
        gt=0,
        le=86400,
        description="a runner without a heartbeat this long is offline",
    )
    provision_timeout_s: float = Field(
        default=300.0,
        gt=0,
        le=86400,
        description="a cold start that produced no runner by then failed",
    )
    provision_retry_s: float = Field(
        default=120.0, gt=0, le=86400, description="try a failed cold start again after this long"
    )
    launcher_timeout_s: float = Field(
        default=60.0, gt=0, le=3600, description="the time limit of one launcher command"
    )


class PriceOverride(BaseModel):
    """One ``[prices."provider/model"]`` table: USD per million tokens for a private or new model.

    Cache reads and writes are priced as uncached input when their own price is not given.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: float = Field(ge=0, description="USD per million input tokens")
    output_per_mtok: float = Field(ge=0, description="USD per million output tokens")
    cache_read_per_mtok: float | None = Field(
        default=None, ge=0, description="USD per million cached input tokens read"
    )
    cache_write_per_mtok: float | None = Field(
        default=None, ge=0, description="USD per million input tokens written to the cache"
    )


class ForgeConfig(BaseModel):
    """The ``[forge]`` table: signed webhooks from GitHub and Linear (``/webhooks/...``).

    ``job_pattern`` finds job ids in a pull request's title, body or branch (its first group
    is the id): ``wk-job:j-...`` in text, ``wk-job/j-...`` in a branch name. With
    ``github_token_env``, a merge link also names who approved the pull request (its reviews,
    read from ``github_api_url``). A Sentry issue (an alert or a new issue) becomes a job
    running ``sentry_argv`` on ``sentry_fleet`` for ``sentry_org``; a regression reopens it.
    A Linear issue becomes a job running ``linear_argv`` (``{identifier}``, ``{issue_id}`` and
    ``{url}`` are filled in) on ``linear_fleet`` for ``linear_org``; without ``linear_argv`` the
    request is kept as pending. A process run started with ``--origin github:OWNER/REPO#N``
    posts its result on that pull request or issue with ``github_token_env``, linking to
    ``public_url``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    github_secret: str | None = Field(
        default=None, description="the GitHub webhook's secret (prefer `github_secret_env`)"
    )
    github_secret_env: str | None = Field(
        default=None, description="the environment variable holding it"
    )
    linear_secret: str | None = Field(
        default=None, description="the Linear webhook's signing secret (prefer `linear_secret_env`)"
    )
    linear_secret_env: str | None = Field(
        default=None, description="the environment variable holding it"
    )
    github_token: str | None = Field(
        default=None,
        description="a GitHub token that may read the repository's pull requests, so merge "
        "links name who approved (prefer `github_token_env`)",
    )
    github_token_env: str | None = Field(
        default=None, description="the environment variable holding it"
    )
    github_api_url: str = Field(
        default="https://api.github.com",
        description="GitHub's REST API (a GitHub Enterprise server's `https://HOST/api/v3`)",
    )
    public_url: str | None = Field(
        default=None,
        description="the server's address as readers reach it (`https://watchkeeper.example`): "
        "a result posted on GitHub links to the run's record there",
    )
    sentry_secret: str | None = Field(
        default=None,
        description="the Sentry integration's client secret, which signs its webhooks (prefer "
        "`sentry_secret_env`)",
    )
    sentry_secret_env: str | None = Field(
        default=None, description="the environment variable holding it"
    )
    sentry_org: str = Field(default="default", description="the org of jobs from Sentry")
    sentry_fleet: str = Field(default="default", description="the fleet of jobs from Sentry")
    sentry_argv: list[str] = Field(
        default_factory=list,
        description="the command a Sentry issue's job runs (`{issue_id}`, `{short_id}`, `{url}` "
        "filled in); without it the request is kept as pending",
    )
    job_pattern: str = Field(
        default=r"wk-job[:/](j-[0-9a-f]{1,60})",
        description="finds job ids in a pull request's title, body or branch; its first group is "
        "the id",
    )
    linear_label: str = Field(
        default="watchkeeper", description="the Linear label that makes an issue a job"
    )
    linear_org: str = Field(default="default", description="the org of jobs from Linear")
    linear_fleet: str = Field(default="default", description="the fleet of jobs from Linear")
    linear_argv: list[str] = Field(
        default_factory=list,
        description="the command a Linear issue's job runs; without it the request is kept as "
        "pending",
    )

    @field_validator("job_pattern")
    @classmethod
    def _one_group(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        if compiled.groups < 1:
            raise ValueError("needs a group capturing the job id, e.g. wk-job:(j-[0-9a-f]+)")
        return value


class RecordsConfig(BaseModel):
    """The ``[records]`` table: the Ed25519 key execution records are signed with.

    Without ``key_env`` a random key is generated once into ``DATA_DIR/record.ed25519``.
    Replicas share one key through ``key_env``; the public key is
    ``GET /api/v1/records/key``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    key_env: str | None = Field(
        default=None,
        description="the environment variable holding the signing key: an Ed25519 seed, 64 "
        "hex digits",
    )
