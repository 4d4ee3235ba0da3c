"""``/api/v1/programs``: the programs this server keeps running on its host, and acting on them.

Viewers read; starting, stopping and restarting a program is admin only (it runs
commands on the server's host). A program or group another host runs is answered
409 naming that host. docs/programs.md describes the answers.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, Field

from watchkeeper.errors import NotFound
from watchkeeper.programs import view
from watchkeeper.programs.host import ProgramHost
from watchkeeper.programs.output import read_log
from watchkeeper.server.api.runs import ERRORS
from watchkeeper.server.deps import services
from watchkeeper.server.http.auth import admin, viewer

router = APIRouter(prefix="/api/v1/programs", tags=["programs"], responses=ERRORS)
#: A program's or a group's name, as ``[programs.NAME]`` allows it.
Name = Annotated[
    str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$", description="a program or group")
]

State = Literal[
    "running", "starting", "restarting", "paused", "stopped", "exited", "failed", "gave_up"
]


class BackoffNowOut(BaseModel):
    """When a program waiting out its backoff starts again."""

    restart_at: str = Field(description="RFC 3339")
    restart_in_s: float


class CheckOut(BaseModel):
    """A health check's latest answer."""

    name: str = Field(description="`http`, `heartbeat_file` or `memory`")
    status: Literal["healthy", "degraded", "unhealthy"]
    detail: str


class LogOut(BaseModel):
    """Where a program's log is on the server's host."""

    path: str
    size: int


class MomentOut(BaseModel):
    """One thing that happened to a program."""

    at: str
    event: Literal["started", "exited", "restarting", "paused", "unhealthy", "gave_up", "stopped"]
    text: str


class NotifyOut(BaseModel):
    """Where a program's notices (a crash loop's card) go, and who chose that."""

    to: str = Field(description="`ops` (the ops channels) or `PLATFORM:CHAT[/THREAD]`")
    set_by: Literal["program", "group", "default"] = Field(
        description="its own `notify`, its group's, or neither (ops)"
    )


class ProgramOut(BaseModel):
    """One program on this host."""

    name: str
    id: str = Field(description="its node in the supervision tree: `programs/GROUP/NAME`")
    group: str | None = Field(description="its `[groups.NAME]`, or null when alone")
    host: str
    run_id: str = Field(description="its run of kind `program`: `NAME@HOST`")
    description: str | None
    state: State
    wanted: bool = Field(description="false once stopped on request (or autostart is off)")
    pid: int | None = Field(description="the program's own process, while it runs")
    started_at: str | None
    uptime_s: float | None
    restarts: int = Field(description="since the server started, failures and requests")
    last_exit: str | None = Field(description="`reason: detail`, e.g. `error: exit status 1`")
    backoff: BackoffNowOut | None = Field(description="while it waits to restart")
    paused: str | None = Field(description="why its start waits (a host check), while it does")
    health: list[CheckOut]
    log: LogOut
    command: list[str] = Field(description="secrets redacted")
    directory: str | None
    restart: Literal["permanent", "transient", "temporary"]
    autostart: bool
    start_s: float
    stop_signal: str
    stop_timeout_s: float
    exit_codes: list[int]
    contain: Literal["tree", "group"]
    notify: NotifyOut = Field(description="in the running configuration")
    history: list[MomentOut] | None = Field(
        None, description="the latest 50 moments, oldest first (one program's answer only)"
    )


class IntensityOut(BaseModel):
    """More restarts than this within the period and the group gives up."""

    restarts: int
    within_s: float


class BackoffOut(BaseModel):
    """The delays before restarts."""

    initial_s: float
    factor: float
    max_s: float
    jitter: float
    reset_after_s: float


class GroupOut(BaseModel):
    """A group (or a program alone, `declared` false) and its supervisor."""

    name: str
    declared: bool = Field(description="a `[groups.NAME]` table, or a program alone")
    strategy: Literal["one_for_one", "one_for_all", "rest_for_one"]
    state: Literal["running", "stopped", "gave_up"]
    intensity: IntensityOut
    backoff: BackoffOut
    restarts: int
    restarts_in_window: int
    gave_up_at: str | None
    crash_loop: str | None = Field(description="the program whose crash loop made it give up")
    programs: list[str] = Field(description="in start order")
    notify: str | None = Field(description="where its programs' notices go; null: ops")


class HostCheckOut(BaseModel):
    """A host check and the programs whose starts it pauses while it fails."""

    name: str
    kind: Literal["disk", "memory"]
    status: Literal["healthy", "degraded", "unhealthy"]
    detail: str
    pausing: bool
    pauses: list[str]
    checked_at: str | None


class ElsewhereOut(BaseModel):
    """A program of the configuration another host's server runs."""

    name: str
    host: str


class ProgramsOut(BaseModel):
    """``GET /api/v1/programs``."""

    host: str
    running: bool = Field(description="whether this server runs its programs now")
    programs: list[ProgramOut]
    groups: list[GroupOut]
    host_checks: list[HostCheckOut]
    elsewhere: list[ElsewhereOut]


class ActedOut(BaseModel):
    """What an action did, and the program (or group) after it."""

    ok: bool
    message: str
    program: ProgramOut | None = Field(description="the program as it is now (null for a group)")


class LogPieceOut(BaseModel):
    """A piece of a program's log (already redacted when written)."""

    name: str
    size: int
    next_offset: int = Field(description="where to ask next (`offset`)")
    generation: int = Field(description="changes when the log is rotated: then ask from 0")
    text: str


def programs_of(request: Request) -> ProgramHost:
    """The programs of the app serving ``request``."""
    return services(request).programs


# Reads run on the event loop, where the programs change (a worker thread could see a
# program half moved); each is a few lookups in memory and /proc.
@router.get("", response_model=ProgramsOut, dependencies=[Depends(viewer)])
async def programs(request: Request) -> dict[str, Any]:
    """Every program of this host, its groups and host checks, and the programs elsewhere."""
    return view.status(programs_of(request))


@router.get("/{name}", response_model=ProgramOut, dependencies=[Depends(viewer)])
async def program(request: Request, name: Name) -> dict[str, Any]:
    """One program with its history."""
    host = programs_of(request)
    _group, state = host.find(name)
    if state is None:
        raise NotFound(f"{name} is a group, not a program: GET /api/v1/programs lists its programs")
    return view.program(host, name)


@router.get("/{name}/log", response_model=LogPieceOut, dependencies=[Depends(viewer)])
async def log(
    request: Request,
    name: Name,
    offset: int | None = Query(None, ge=0, description="from this byte on (`next_offset`)"),
    tail_bytes: int = Query(65536, ge=1, le=4 * 1024 * 1024, description="without offset"),
) -> dict[str, Any]:
    """The end of the program's log, or what follows ``offset``, in whole lines."""
    host = programs_of(request)
    _group, state = host.find(name)
    if state is None:
        raise NotFound(f"{name} is a group: ask for the log of one of its programs")
    piece = await asyncio.to_thread(read_log, state.log.path, offset, tail_bytes)
    return {
        "name": name,
        "size": piece.size,
        "next_offset": piece.next_offset,
        "generation": piece.generation,
        "text": piece.text,
    }


async def _acted(host: ProgramHost, name: str, message: str) -> dict[str, Any]:
    _group, state = host.find(name)
    shown = view.program(host, name) if state is not None else None
    return {"ok": True, "message": message, "program": shown}


@router.post("/{name}/start", response_model=ActedOut, dependencies=[Depends(admin)])
async def start(request: Request, name: Name) -> dict[str, Any]:
    """Start a stopped program (or a group's programs); 409 while a host check pauses it."""
    host = programs_of(request)
    return await _acted(host, name, await host.start_program(name))


@router.post("/{name}/stop", response_model=ActedOut, dependencies=[Depends(admin)])
async def stop(request: Request, name: Name) -> dict[str, Any]:
    """Stop a program (or a whole group, in reverse start order) until it is started again."""
    host = programs_of(request)
    return await _acted(host, name, await host.stop_program(name))


@router.post("/{name}/restart", response_model=ActedOut, dependencies=[Depends(admin)])
async def restart(request: Request, name: Name) -> dict[str, Any]:
    """Stop a program if it runs and start it again; a group that gave up starts anew."""
    host = programs_of(request)
    return await _acted(host, name, await host.restart_program(name))
