"""``watchkeeper programs``: the programs a server keeps running on its host.

``programs`` alone shows them; ``programs start|stop|restart NAME`` acts on a
program or a whole group (an admin token); ``programs logs NAME [-f]`` prints a
program's log, redacted. Every command asks the server, like ``decide``.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from watchkeeper.cli.app.options import JSON, SERVER, TOKEN, connect, print_json, print_table, say

app = typer.Typer(
    help="Programs the server keeps running ([programs.NAME] in watchkeeper.toml).",
    invoke_without_command=True,
)
NAME = typer.Argument(..., help="a program, or a group of programs")


def _when(program: dict[str, Any]) -> str:
    backoff, paused = program["backoff"], program["paused"]
    if backoff is not None:
        return f"restarts in {backoff['restart_in_s']:g} s"
    if paused:
        return str(paused)
    if program["uptime_s"] is not None:
        return f"up {_duration(program['uptime_s'])}"
    return str(program["last_exit"] or "")


def _duration(seconds: float) -> str:
    whole = int(seconds)
    if whole < 120:
        return f"{whole} s"
    if whole < 7200:
        return f"{whole // 60} min"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def _health(program: dict[str, Any]) -> str:
    bad = [c["name"] for c in program["health"] if c["status"] != "healthy"]
    if not program["health"]:
        return ""
    return "ok" if not bad else "failing: " + ", ".join(bad)


def _row(program: dict[str, Any]) -> list[str]:
    pid = str(program["pid"]) if program["pid"] is not None else ""
    return [
        program["name"],
        program["group"] or "",
        program["state"],
        pid,
        str(program["restarts"]),
        _when(program),
        _health(program),
    ]


@app.callback()
def programs(
    ctx: typer.Context,
    as_json: bool = JSON,
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Show every program: its state, pid, restarts, and what it waits for."""
    if ctx.invoked_subcommand is not None:
        return
    with connect(server, token) as client:
        status = client.programs.list()
    if as_json:
        print_json(status)
        return
    if not status["programs"] and not status["elsewhere"]:
        say("no programs: add [programs.NAME] tables to watchkeeper.toml (docs/programs.md)")
        return
    columns = ("program", "group", "state", "pid", "restarts", "now", "health")
    title = f"Programs on {status['host']} ({len(status['programs'])})"
    print_table(title, columns, map(_row, status["programs"]))
    for group in status["groups"]:
        if group["state"] == "gave_up":
            looped = group["crash_loop"]
            say(
                f"group {group['name']} gave up after {looped}'s crash loop; "
                f"`watchkeeper programs restart {looped}` starts it again"
            )
    for check in status["host_checks"]:
        if check["pausing"]:
            say(
                f"host check {check['name']} fails ({check['detail']}): "
                f"{', '.join(check['pauses'])} do not start until it clears"
            )
    for other in status["elsewhere"]:
        say(f"{other['name']} runs on {other['host']}: ask the server there")


def _act(verb: str, name: str, server: str | None, token: str | None, as_json: bool) -> None:
    with connect(server, token) as client:
        answer = getattr(client.programs, verb)(name)
    if as_json:
        print_json(answer)
        return
    say(answer["message"])


@app.command("start")
def start(
    name: str = NAME, as_json: bool = JSON, server: str | None = SERVER, token: str | None = TOKEN
) -> None:
    """Start a stopped program, or every program of a group."""
    _act("start", name, server, token, as_json)


@app.command("stop")
def stop(
    name: str = NAME, as_json: bool = JSON, server: str | None = SERVER, token: str | None = TOKEN
) -> None:
    """Stop a program, or a whole group in reverse start order, until it is started again."""
    _act("stop", name, server, token, as_json)


@app.command("restart")
def restart(
    name: str = NAME, as_json: bool = JSON, server: str | None = SERVER, token: str | None = TOKEN
) -> None:
    """Stop a program if it runs and start it again; a group that gave up starts anew."""
    _act("restart", name, server, token, as_json)


@app.command("logs")
def logs(
    name: str = typer.Argument(..., help="a program"),
    follow: bool = typer.Option(False, "--follow", "-f", help="keep printing what it writes"),
    tail: int = typer.Option(65536, "--tail-bytes", help="how much of its end to print first"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Print a program's log (stdout and stderr, secrets redacted); -f follows it."""
    with connect(server, token) as client:
        if not follow:
            _write(client.programs.log(name, tail_bytes=tail)["text"])
            return
        try:
            for text in client.programs.follow(name, tail_bytes=tail):
                _write(text)
        except KeyboardInterrupt:
            return


def _write(text: str) -> None:
    if text:
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.buffer.flush()
