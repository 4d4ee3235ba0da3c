"""Commands for the processes watchkeeper starts on this host.

``run``, ``ps``, ``status``, ``logs``, ``wait``, ``abort``, ``reclaim``,
``park`` and ``parked``. ``run`` starts its command on this host, or on the
server's host when ``--server`` is given on its command line. Every one of them
records on, and reads from, the same place (:mod:`watchkeeper.cli.app.procs_where`):
the server in reach, else the local store, said on stderr; the readers take
``--store PATH`` too. They print the same either way.
Heavy modules are imported inside the commands so start-up stays fast.
"""

from __future__ import annotations

import sys
from contextlib import closing
from typing import TYPE_CHECKING, Any

import typer

from watchkeeper.cli.app.options import (
    JSON,
    SERVER,
    STORE,
    TOKEN,
    connect,
    parse_duration,
    print_json,
    print_rows,
    say,
)
from watchkeeper.cli.app.procs_remote import print_log, start_there, wait_showing, wait_there
from watchkeeper.cli.app.procs_where import Place, place
from watchkeeper.cli.console import console
from watchkeeper.client.locate import note
from watchkeeper.paths import SESSION_ENV
from watchkeeper.procs.settle import exit_status

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from watchkeeper.config import Settings
    from watchkeeper.procs.engine import ProcEngine

_RUN = typer.Argument(..., help="the run's id (see `watchkeeper ps`)")


def _engine(loaded: Settings) -> closing[ProcEngine]:
    """The engine of the local store ``loaded`` names, closed when the ``with`` block ends."""
    from watchkeeper.procs.engine import ProcEngine

    return closing(ProcEngine.open(loaded))


def _local(where: Place, done: str) -> Settings | None:
    """The local store to use (saying why when it stands in for a server), or ``None``."""
    where.tell(done)
    return where.local


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

    It runs on this host, recorded on the server in reach (WATCHKEEPER_URL, else
    the default URL) or, when none answers, in the local store; stderr says which.
    With --server URL it runs on that server's host, in the server's working folder
    (an admin token is needed there).
    """
    from watchkeeper.cli.app.report import _parse_origin
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
    where = place(ctx, None, token, makes=True)
    if where.local is None:
        from watchkeeper.cli.app.procs_recorded import run_recorded

        status_there = run_recorded(where, request)
        if status_there is None:
            return
        raise typer.Exit(status_there)
    with _engine(where.local) as engine:
        launched = engine.start(request, tee=not detach)
        where.tell("recorded in")
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
    where = place(ctx, server, token, store=store)
    if local := _local(where, "read from"):
        with _engine(local) as engine:
            rows = [engine.describe(run) for run in engine.runs(include_finished=all_)]
    else:
        with where.client() as client:
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
    where = place(ctx, server, token, store=store)
    if local := _local(where, "read from"):
        with _engine(local) as engine:
            body = engine.status(run_id)
    else:
        with where.client() as client:
            body = client.procs.get(run_id)
    if as_json:
        print_json(body)
        return
    for key in (
        "id",
        "name",
        "effective_status",
        "status",
        "argv",
        "cwd",
        "host",
        "pid",
        "pgid",
        "alive",
        "started_at",
        "progress_at",
        "finished_at",
        "exit_code",
        "signal",
        "reason",
        "step",
        "hook_state",
        "hook_error",
        "containment",
        "ended_descendants",
        "log_path",
    ):
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

    where = place(ctx, server, token, store=store)
    local = _local(where, "read from")
    if local is None:
        with where.client() as client:
            print_log(client, run_id, follow=follow)
        return
    with _engine(local) as engine:
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
    where = place(ctx, server, token, store=store)
    if local := _local(where, "read from"):
        with _engine(local) as engine:
            run = _wait_here(engine, run_id, timeout_s)
    else:
        with where.client() as client:
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
    where = place(ctx, server, token, store=store)
    if local := _local(where, "read from"):
        with _engine(local) as engine:
            result = engine.abort(run_id, grace_s=grace_s)
        data = {
            "outcome": result.outcome.value,
            "detail": result.detail,
            "status": result.run.status.value,
        }
    else:
        with where.client() as client:
            answer = client.procs.abort(run_id, grace_s=grace_s)
        data = {
            "outcome": answer["outcome"],
            "detail": answer["detail"],
            "status": answer["run"]["status"],
        }
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
    """Settle runs now: read witnesses, reclaim stale runs, enforce timeouts.

    Over a server: the runs of the server's host, and this host's runs recorded there
    (then reported to it). With --store, or when no server answers, this host's runs in
    the local store.
    """
    where = place(ctx, server, token, store=store)
    if local := _local(where, "settled in"):
        with _engine(local) as engine:
            report = engine.reap()
        data = {
            "collected": report.collected,
            "reclaimed": report.reclaimed,
            "timed_out": report.timed_out,
        }
    else:
        from watchkeeper.cli.app.procs_recorded import reclaim_here

        with where.client() as client:
            answer = client.procs.reclaim()
        here = reclaim_here(where)
        data = {key: [*answer[key], *here[key]] for key in ("collected", "reclaimed", "timed_out")}
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
    where = place(ctx, server, token, store=store)
    if local := _local(where, "recorded in"):
        with _engine(local) as engine:
            done = engine.park(session, reason, until, wake_cmd=wake, progress=progress)
        parked_as = (done.session, done.until_run, done.id)
    else:
        with where.client() as client:
            answer = client.procs.park(session, until, reason, wake_cmd=wake, progress=progress)
        parked_as = (answer["session"], answer["until"], answer["id"])
        note(f"recorded on {where.url}")
    console.print(f"parked {parked_as[0]} until {parked_as[1]} ({parked_as[2]})", highlight=False)


def parked(
    ctx: typer.Context,
    as_json: bool = JSON,
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = STORE,
) -> None:
    """Parked sessions, what each waits on, and which became wakeable."""
    where = place(ctx, server, token, store=store)
    if local := _local(where, "read from"):
        with _engine(local) as engine:
            rows = [view.as_dict() for view in engine.parked()]
    else:
        with where.client() as client:
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
