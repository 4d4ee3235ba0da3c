"""Request and response bodies of the HTTP API, with their limits."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from watchkeeper.config import KIND_NAME_PATTERN
from watchkeeper.server.api.fields import Line, Moment, Text

TITLE_MAX = 500
STEP_MAX = 2000
REASON_MAX = 2000
DETAIL_MAX = 64 * 1024
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,199}$"
#: The largest counter a report may carry: any count of pages, tests or tokens fits.
COUNTER_MAX = 2**53
#: The longest budget (30 days) and expected time (a year) a run or one step may have.
BUDGET_MAX_S = 30 * 86400
EXPECTED_MAX_S = 365 * 86400

KindName = Annotated[str, StringConstraints(pattern=KIND_NAME_PATTERN)]
RunId = Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)]
ShortText = Annotated[str, Line(200)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OriginIn(_Body):
    """Where the work started, so its card goes back there.

    ``github`` is a pull request or issue (``chat_id`` ``OWNER/REPO``, ``thread_id`` its
    number): a process run's end is posted there; cards go where cards of work without
    an origin go.
    """

    platform: Literal["telegram", "discord", "slack", "web", "github"]
    chat_id: ShortText | None = None
    thread_id: ShortText | None = None
    message_id: ShortText | None = None

    @model_validator(mode="after")
    def _names_an_issue(self) -> OriginIn:
        """A github origin names one pull request or issue, or is refused saying how."""
        if self.platform != "github":
            return self
        from watchkeeper.procs.github_results import parse

        try:
            parse(f"{self.chat_id or ''}#{self.thread_id or ''}")
        except ValueError:
            raise ValueError(
                "a github origin names a pull request or issue: send chat_id OWNER/REPO and "
                "thread_id its number (github:OWNER/REPO#N)"
            ) from None
        return self


class StartRun(_Body):
    """``POST /api/v1/runs``: work started."""

    kind: KindName
    run_id: RunId | None = Field(default=None, description="omit to get a fresh id")
    title: Annotated[str, Text(TITLE_MAX, min_length=1)]
    origin: OriginIn | None = None
    effects: Literal["none", "unknown"] = "unknown"
    budget_s: float | None = Field(default=None, gt=0, le=BUDGET_MAX_S)
    expected_s: float | None = Field(default=None, gt=0, le=EXPECTED_MAX_S)
    lease_s: float = Field(default=90.0, ge=1, le=7 * 86400)
    started_at: Moment | None = None


class Progress(_Body):
    """``POST .../progress``: where the work is. The same ``step``, ``done`` and ``total`` as
    the report before is a repeat, not progress (``loop_after`` repeats in a row: looping).
    ``budget_s`` and ``expected_s`` are the step's, in force until the next report."""

    step: Annotated[str, Text(STEP_MAX)] | None = None
    # Strict: a count is a whole JSON number, never true or 3.5; a time never true.
    done: int | None = Field(
        default=None, ge=0, le=COUNTER_MAX, strict=True, description="how many are done"
    )
    total: int | None = Field(
        default=None, ge=0, le=COUNTER_MAX, strict=True, description="how many in all"
    )
    budget_s: float | None = Field(
        default=None,
        gt=0,
        le=BUDGET_MAX_S,
        strict=True,
        description="seconds this step may go without another report before stalled",
    )
    expected_s: float | None = Field(
        default=None,
        gt=0,
        le=EXPECTED_MAX_S,
        strict=True,
        description="seconds this step is expected to take",
    )
    at: Moment | None = None


class StepProgress(_Body):
    """``POST .../progress`` of a process run: its step only. A process run is judged by its
    log, so counters and a step's times are refused rather than dropped."""

    step: Annotated[str, Text(STEP_MAX)] | None = None
    at: Moment | None = None


class Waiting(_Body):
    """``POST .../waiting``: the work waits for a person."""

    reason: Annotated[str, Text(STEP_MAX)] | None = None


class Finish(_Body):
    """``POST .../finish``: the work succeeded."""

    step: Annotated[str, Text(STEP_MAX)] | None = None


class Fail(_Body):
    """``POST .../fail``: the work failed."""

    reason: Annotated[str, Text(REASON_MAX, min_length=1)]
    fingerprint: Annotated[str, Line(200, min_length=1)] | None = None
    detail: Annotated[str, Text(DETAIL_MAX)] | None = None


class FailureOut(BaseModel):
    """Why a run failed."""

    reason: str
    fingerprint: str | None


class RunOut(BaseModel):
    """A push run as stored."""

    kind: str
    run_id: str
    title: str
    status: str
    attempt: int
    state_token: str
    origin: dict[str, str] | None
    effects: str
    budget_s: float | None
    expected_s: float | None
    lease_s: float
    started_at: datetime
    progress_at: datetime
    last_seen_at: datetime
    finished_at: datetime | None
    step: str | None
    failure: FailureOut | None
    detail: str | None = None
    reported_at: datetime | None = None
    repeats: int = 0
    step_budget_s: float | None = None
    step_expected_s: float | None = None
    done: int | None = None
    total: int | None = None


class CreateToken(_Body):
    """``POST /api/v1/tokens``."""

    role: Literal["admin", "reporter", "viewer"]
    name: Annotated[str, Line(100, min_length=1)] = "api"


class ErrorBody(BaseModel):
    """Every error answer: a stable code and a sentence saying what to change."""

    code: str
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    """``{"error": {...}}``."""

    error: ErrorBody
