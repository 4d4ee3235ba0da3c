"""Commands for the processes watchkeeper starts on this host.

``run``, ``ps``, ``status``, ``logs``, ``wait``, ``abort``, ``reclaim``,
``park`` and ``parked``. ``run`` starts its command on this host, or on the
server's host when ``--server`` is given on its command line. The others talk
to the server (found as :mod:`watchkeeper.cli.options` says) and read a local
store only when asked with ``--store PATH``; they print the same either way.
Heavy modules are imported inside the commands so start-up stays fast.
"""

from __future__ import annotations

import sys
from contextlib import closing
from typing import TYPE_CHECKING, Any

import typer

from watchkeeper.cli.common import settings, store_settings
from watchkeeper.cli.options import (
    JSON,
    SERVER,
    STORE,
    TOKEN,
    connect,
    print_json,
    print_rows,
    say,
)
from watchkeeper.cli.procs_remote import print_log, start_there, wait_showing, wait_there
from watchkeeper.cli_console import console
from watchkeeper.paths import SESSION_ENV
from watchkeeper.procs.settle import exit_status

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from watchkeeper.procs.engine import ProcEngine

_RUN = typer.Argument(..., help="the run's id (see `watchkeeper ps`)")


def parse_duration(value: str | None, option: str) -> float | None:
    """``90``, ``90s``, ``10m``, ``2h30m``, ``1d`` as seconds (``None`` stays ``None``)."""
    if value is None:
        return None
    from watchkeeper.durations import seconds_of
    from watchkeeper.errors import InvalidInput

    seconds = seconds_of(value)
    if seconds is None:
        raise InvalidInput(f"{option} {value!r}: write a duration like 90s, 10m or 2h30m")
    if seconds <= 0:
        raise InvalidInput(f"{option} {value!r}: must be more than zero")
    return seconds


def _engine(ctx: typer.Context, store: str | None = None) -> closing[ProcEngine]:
    """This host's engine, closed when the ``with`` block ends: over ``--store`` (which must
    exist) when given, else over the configured store (``run`` may create it)."""
    from watchkeeper.procs.engine import ProcEngine

    loaded = settings(ctx) if store is None else store_settings(ctx, store)
    return closing(ProcEngine.open(loaded))


def run(
    ctx: typer.Context,
    argv: list[str] = typer.Argument(
        ..., metavar="CMD", help="the command and its arguments, after --"
    ),
    detach: bool = typer.Option(False, "--detach", "-d", help="run in its own session; return"),
    name: str | None = typer.Option(None, "--name", help="a short human name"),
    budget: str | None = typer.Option(None, "--budget", help="no progress this long: stalled"),
    timeout: str | None = typer.Option(None, "--timeout", help="abort the run after this long"),
    origin: str | None = typer.Option(None, "--origin", help="PLATFORM:CHAT[/THREAD]"),
    on_done: str | None = typer.Option(None, "--on-done", help="shell command run at the end"),
    on_done_url: str | None = typer.Option(None, "--on-done-url", help="POST the result here"),
    session: str | None = typer.Option(
        None, "--session", envvar=SESSION_ENV, help="the agent session it belongs to"
    ),
    server: str | None = typer.Option(
        None,
        "--server",
        help="start it on this server's host instead of here (never taken from the environment)",
    ),
    token: str | None = TOKEN,
) -> None:
    """Record a run, then start CMD under watchkeeper (`watchkeeper run -- CMD ARGS...`).

    It runs on this host; with --server URL, on that server's host, in the
    server's working folder (an admin token is needed there).
    """
    from watchkeeper.cli.report import _parse_origin
    from watchkeeper.procs.launch import LaunchRequest

    if on_done_url and not on_done_url.startswith(("http://", "https://")):
        from watchkeeper.errors import InvalidInput

        raise InvalidInput(f"--on-done-url {on_done_url!r}: must be an http:// or https:// URL")
    if server:
        options = {
            "name": name,
            "budget_s": parse_duration(budget, "--budget"),
            "timeout_s": parse_duration(timeout, "--timeout"),
            "origin": _parse_origin(origin),
            "session": session,
            "on_done_cmd": on_done,
            "on_done_url": on_done_url,
        }
        with connect(server, token) as client:
            ended_there = start_there(client, list(argv), detach=detach, options=options)
        if ended_there is None:
            return
        raise typer.Exit(_exit_of(ended_there))
    request = LaunchRequest(
        argv=tuple(argv),
        name=name,
        detach=detach,
        budget_s=parse_duration(budget, "--budget"),
        timeout_s=parse_duration(timeout, "--timeout"),
        origin=_parse_origin(origin),
        session=session,
        on_done_cmd=on_done,
        on_done_url=on_done_url,
    )
    with _engine(ctx) as engine:
        launched = engine.start(request, tee=not detach)
        if detach:
            console.print(launched.run.run_id, highlight=False)
            return
        ended = engine.finish_foreground(launched)
    raise typer.Exit(exit_status(ended.exit_code, ended.signal, ended.status.value))


def _exit_of(run: dict[str, Any]) -> int:
    """:func:`exit_status` of a run as the API and ``status --json`` show it."""
    return exit_status(run["exit_code"], run["signal"], run["status"])


def ps(
    ctx: typer.Context,
    all_: bool = typer.Option(False, "--all", "-a", help="add runs that ended in the last day"),
    as_json: bool = JSON,
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = STORE,
) -> None:
    """List process runs."""
    if store:
        with _engine(ctx, store) as engine:
            rows = [engine.describe(run) for run in engine.runs(include_finished=all_)]
    else:
        with connect(server, token) as client:
            rows = client.procs.list(all=all_)
    print_rows(as_json, "Process runs", _RUN_COLUMNS, rows, _run_row)


_RUN_COLUMNS = ("id", "name", "status", "pid", "started", "exit", "command")


def _run_row(row: dict[str, Any]) -> tuple[str, ...]:
    return (
        row["id"],
        row["name"],
        row["effective_status"],
        str(row["pid"] or ""),
        row["started_at"] or "",
        _exit_text(row),
        " ".join(row["argv"])[:60],
    )


def _exit_text(row: dict[str, Any]) -> str:
    if row["signal"] is not None:
        return f"signal {row['signal']}"
    return "" if row["exit_code"] is None else str(row["exit_code"])


def status(
    ctx: typer.Context,
    run_id: str = _RUN,
    as_json: bool = JSON,
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = STORE,
) -> None:
    """One run: its status as it really is, owner, exit, hooks (it settles nothing)."""
    if store:
        with _engine(ctx, store) as engine:
            body = engine.status(run_id)
    else:
        with connect(server, token) as client:
            body = client.procs.get(run_id)
    if as_json:
        print_json(body)
        return
    for key in (
        "id", "name", "effective_status", "status", "argv", "cwd", "host", "pid", "pgid",
        "alive", "started_at", "progress_at", "finished_at", "exit_code", "signal", "reason",
        "step", "hook_state", "hook_error", "containment", "ended_descendants", "log_path",
    ):  # fmt: skip
        value = body.get(key)
        if value is None or value == "":
            continue
        if key == "hook_state" and value == "maybe_fired":
            value = "maybe_fired (watchkeeper stopped while firing; not fired again)"
        if key == "ended_descendants":
            if not value:
                continue
            value = _ended_text(body[key])
        say(f"{key:>16}  {value}")


def _ended_text(ended: list[dict[str, Any]]) -> str:
    """The processes the shim ended after the leader, in one line."""
    return ", ".join(
        f"{item.get('name', '?')} (pid {item.get('pid')}, {item.get('signal', '?')})"
        for item in ended
    )


def logs(
    ctx: typer.Context,
    run_id: str = _RUN,
    follow: bool = typer.Option(False, "--follow", "-f", help="keep printing until it ends"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = STORE,
) -> None:
    """Print a run's output (stdout and stderr), secrets redacted as the API shows it."""
    from watchkeeper.redact import redact_lines

    if not store:
        with connect(server, token) as client:
            print_log(client, run_id, follow=follow)
        return
    with _engine(ctx, store) as engine:
        chunks = engine.follow(run_id) if follow else _read_chunks(engine.log_path(run_id))
        for cleaned in redact_lines(chunks):
            sys.stdout.buffer.write(cleaned)
            sys.stdout.buffer.flush()


def _read_chunks(path: Path, size: int = 65536) -> Iterator[bytes]:
    """A file's bytes in pieces (nothing when it does not exist), so a big log is not held whole."""
    if not path.exists():
        return
    with path.open("rb") as handle:
        while chunk := handle.read(size):
            yield chunk


def wait(
    ctx: typer.Context,
    run_id: str = _RUN,
    timeout: str | None = typer.Option(None, "--timeout", help="give up after this long"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = STORE,
) -> None:
    """Block until the run ends; exit with its exit status.

    On a terminal a spinner tells the run's last step and how long ago it moved.
    """
    timeout_s = parse_duration(timeout, "--timeout")
    if store:
        with _engine(ctx, store) as engine:
            run = _wait_here(engine, run_id, timeout_s)
    else:
        with connect(server, token) as client:
            run = wait_there(client, run_id, timeout_s)
    if run["status"] not in ("succeeded", "failed", "cancelled"):
        from watchkeeper.procs.errors import ProcsError

        raise ProcsError(f"process run {run_id} is still {run['status']} after {timeout}")
    if run["reason"]:
        console.print(f"{run_id} {run['status']}: {run['reason']}", highlight=False)
    raise typer.Exit(_exit_of(run))


def _wait_here(engine: ProcEngine, run_id: str, timeout_s: float | None) -> dict[str, Any]:
    """Wait on the run in the local store; on a terminal, a spinner shows where it is."""
    if not console.is_terminal:
        return engine.wait(run_id, timeout_s=timeout_s).as_dict()
    return wait_showing(
        lambda left: engine.wait(run_id, timeout_s=left).as_dict(),
        lambda: engine.status(run_id),
        timeout_s,
    )


def abort(
    ctx: typer.Context,
    run_id: str = _RUN,
    grace: str | None = typer.Option(None, "--grace", help="SIGTERM, then SIGKILL after this"),
    as_json: bool = JSON,
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = STORE,
) -> None:
    """Abort a run: SIGTERM its process group, SIGKILL after a grace period."""
    grace_s = parse_duration(grace, "--grace")
    if store:
        with _engine(ctx, store) as engine:
            result = engine.abort(run_id, grace_s=grace_s)
        data = {"outcome": result.outcome.value, "detail": result.detail,
                "status": result.run.status.value}  # fmt: skip
    else:
        with connect(server, token) as client:
            answer = client.procs.abort(run_id, grace_s=grace_s)
        data = {"outcome": answer["outcome"], "detail": answer["detail"],
                "status": answer["run"]["status"]}  # fmt: skip
    if as_json:
        print_json(data)
        return
    say(f"{data['outcome']}: {data['detail']}")


def reclaim(
    ctx: typer.Context,
    as_json: bool = JSON,
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = STORE,
) -> None:
    """Settle the runs of the server's host (or, with --store, this host's) now: read
    witnesses, reclaim stale runs, enforce timeouts."""
    if store:
        with _engine(ctx, store) as engine:
            report = engine.reap()
        data = {
            "collected": report.collected,
            "reclaimed": report.reclaimed,
            "timed_out": report.timed_out,
        }
    else:
        with connect(server, token) as client:
            answer = client.procs.reclaim()
        data = {key: answer[key] for key in ("collected", "reclaimed", "timed_out")}
    if as_json:
        print_json(data)
        return
    for key, ids in data.items():
        console.print(f"{key}: {', '.join(ids) or 'none'}", highlight=False)


def park(
    ctx: typer.Context,
    until: str = typer.Option(..., "--until", help="the run this session waits on"),
    reason: str = typer.Option(..., "--reason", help="what it waits for, in words"),
    session: str = typer.Option(
        ..., "--session", envvar=SESSION_ENV, help="the agent session parking"
    ),
    wake: str | None = typer.Option(None, "--wake", help="shell command the engine runs to wake"),
    progress: str | None = typer.Option(
        None,
        "--progress",
        help="what the session achieved since it was last woken (recorded; resets no breaker)",
    ),
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = STORE,
) -> None:
    """Record that a session handed back, waiting on a run; the engine wakes it."""
    if store:
        with _engine(ctx, store) as engine:
            done = engine.park(session, reason, until, wake_cmd=wake, progress=progress)
        where = (done.session, done.until_run, done.id)
    else:
        with connect(server, token) as client:
            answer = client.procs.park(session, until, reason, wake_cmd=wake, progress=progress)
        where = (answer["session"], answer["until"], answer["id"])
    console.print(f"parked {where[0]} until {where[1]} ({where[2]})", highlight=False)


def parked(
    ctx: typer.Context,
    as_json: bool = JSON,
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = STORE,
) -> None:
    """Parked sessions, what each waits on, and which became wakeable."""
    if store:
        with _engine(ctx, store) as engine:
            rows = [view.as_dict() for view in engine.parked()]
    else:
        with connect(server, token) as client:
            rows = client.procs.parked()
    print_rows(as_json, "Parked sessions", _PARK_COLUMNS, rows, _park_row)


_PARK_COLUMNS = ("session", "waits on", "run", "state", "wakeable", "reason", "note")


def _park_row(row: dict[str, Any]) -> tuple[str, ...]:
    return (
        row["session"],
        row["until"],
        row["run_status"] or "?",
        row["state"] + (" (breaker open)" if row["breaker_open"] else ""),
        "yes" if row["wakeable"] else "no",
        row["reason"],
        row["note"] or "",
    )
