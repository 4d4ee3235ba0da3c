"""``watchkeeper silence add/list/expire`` and ``watchkeeper incidents ack``.

Like ``decide``, these talk to a server (``--server`` / ``WATCHKEEPER_URL``, an
admin ``--token`` / ``WATCHKEEPER_TOKEN``), so a silence set here holds for
every replica and every chat.
"""

from __future__ import annotations

from typing import Any

import typer

from watchkeeper.cli.app.options import JSON, SERVER, TOKEN, connect, print_json, print_rows, say

app = typer.Typer(
    help="Silence matching work for a while: nothing is sent about it.", no_args_is_help=True
)


def _matchers(item: dict[str, Any]) -> str:
    m = item["matchers"]
    parts = [f"{name}={m[name]}" for name in ("kind", "run_id", "origin") if m.get(name)]
    if m.get("title"):
        parts.append(f"title~{m['title']} ({m['title_syntax']})")
    return ", ".join(parts)


def _row(item: dict[str, Any]) -> list[str]:
    return [
        str(item["id"]),
        _matchers(item),
        item["state"],
        item["ends_at"],
        item["created_by"],
        item["comment"],
    ]


@app.command("add")
def add(
    duration: str = typer.Option(..., "--for", help='how long: "30m", "1h", "2h30m", "1d"'),
    kind: str | None = typer.Option(None, "--kind", help="only work of this kind"),
    run_id: str | None = typer.Option(None, "--run", help="only this piece of work (run id)"),
    title: str | None = typer.Option(
        None, "--title", help="titles matching this glob (whole title), or regex with --regex"
    ),
    regex: bool = typer.Option(False, "--regex", help="--title is a regular expression"),
    origin: str | None = typer.Option(
        None, "--origin", help="work from this chat: PLATFORM:CHAT or PLATFORM:CHAT/THREAD"
    ),
    comment: str = typer.Option("", "--comment", "-m", help="why, for whoever reads it later"),
    as_json: bool = JSON,
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Silence matching work from now on: incidents are still recorded, never messaged."""
    with connect(server, token) as client:
        silence = client.silences.add(
            duration=duration,
            kind=kind,
            run_id=run_id,
            title=title,
            title_syntax="regex" if regex else "glob",
            origin=origin,
            comment=comment,
        )
    if as_json:
        print_json(silence)
        return
    say(f"silence {silence['id']}: {_matchers(silence)} until {silence['ends_at']}")


@app.command("list")
def list_silences(
    all_: bool = typer.Option(False, "--all", help="ended silences too"),
    as_json: bool = JSON,
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Silences, newest first (the active ones unless --all)."""
    with connect(server, token) as client:
        items = client.silences.list(all=all_)
    columns = ("id", "matches", "state", "ends", "by", "comment")
    print_rows(as_json, "Silences", columns, items, _row)


@app.command("expire")
def expire(
    silence_id: int = typer.Argument(..., help="the silence's id (see `silence list`)"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """End a silence now; its end is announced once, like a natural one."""
    with connect(server, token) as client:
        silence = client.silences.expire(silence_id)
    say(
        f"silence {silence['id']} expired; it had held back {len(silence['incidents'])} incident(s)"
    )


def ack(
    incident_id: int = typer.Argument(..., help="the incident's id"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Say you are on an incident ("I am on it"): shown on its cards; decides nothing."""
    with connect(server, token) as client:
        result = client.incidents.ack(incident_id, via="cli")
    by = result["acknowledged"]
    say(f"incident {incident_id}: {by['by']} is on it since {by['at']}")


def incidents_app(list_incidents: Any) -> typer.Typer:
    """``watchkeeper incidents`` lists incidents (``list_incidents``); ``incidents ack ID``
    acknowledges one."""
    group = typer.Typer(
        help="List incidents, newest first; `incidents ack ID` to say you are on one."
    )

    @group.callback(invoke_without_command=True)
    def _list(
        ctx: typer.Context,
        status: str | None = typer.Option(
            "live", "--status", help="live, open, recovered or resolved"
        ),
        as_json: bool = JSON,
        server: str | None = SERVER,
        token: str | None = TOKEN,
    ) -> None:
        if ctx.invoked_subcommand is None:
            list_incidents(status=status, as_json=as_json, server=server, token=token)

    group.command("ack")(ack)
    return group
