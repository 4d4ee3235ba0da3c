"""``watchkeeper incidents``, ``decide``, ``diagnose`` and ``runbooks``: acting on incidents.

These talk to a server (``--server`` / ``WATCHKEEPER_URL`` and an admin
``--token`` / ``WATCHKEEPER_TOKEN``), so a decision goes through the same
function whichever channel it comes from.
"""

from __future__ import annotations

import json
from typing import Any

import typer

from watchkeeper.cli.common import console, err_console

_SERVER = typer.Option(None, "--server", envvar="WATCHKEEPER_URL", help="server URL")
_TOKEN = typer.Option(None, "--token", envvar="WATCHKEEPER_TOKEN", help="API token")


def _client(server: str | None, token: str | None) -> Any:
    from watchkeeper.client import Client

    return Client(server, token)


def incidents(
    status: str | None = typer.Option("live", "--status", help="live, open, recovered or resolved"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    server: str | None = _SERVER,
    token: str | None = _TOKEN,
) -> None:
    """List incidents, newest first."""
    with _client(server, token) as client:
        items = client.incidents.list(status=status)
    if as_json:
        console.print_json(json.dumps(items))
        return
    from rich.table import Table

    table = Table("id", "kind", "run", "condition", "status", "since", "decided", title="Incidents")
    for item in items:
        decision = item.get("decision")
        table.add_row(
            str(item["id"]),
            item["kind"],
            item["run_id"],
            item["condition"],
            item["status"],
            item["since"],
            f"{decision['label']} by {decision['by']}" if decision else "",
        )
    console.print(table)


def decide(
    incident_id: int = typer.Argument(..., help="the incident's id"),
    action: str = typer.Argument(
        ..., help="cancel, retry, retry_checked, close_turn, dismiss or diagnose"
    ),
    state_token: str | None = typer.Option(
        None, "--state-token", help="the token you saw (default: the incident's current one)"
    ),
    server: str | None = _SERVER,
    token: str | None = _TOKEN,
) -> None:
    """Press a button on an incident. The first decision wins; a later one is told who won."""
    from watchkeeper.errors import ClientError

    with _client(server, token) as client:
        try:
            result = client.incidents.decide(
                incident_id, action, state_token=state_token, via="cli"
            )
        except ClientError as exc:
            if exc.status in {403, 409, 422}:  # refused: told in the server's own words
                err_console.print(exc.message, highlight=False)
                raise typer.Exit(1) from None
            raise
    if result["outcome"] == "failed":
        err_console.print(result["message"], highlight=False)
        raise typer.Exit(1)
    console.print(result["message"], highlight=False)


def diagnose(
    incident_id: int = typer.Argument(..., help="the incident's id"),
    server: str | None = _SERVER,
    token: str | None = _TOKEN,
) -> None:
    """Ask to diagnose: a read-only look, answered in a few sentences."""
    with _client(server, token) as client:
        result = client.incidents.diagnose(incident_id)
    console.print(result["diagnosis"], highlight=False)


def runbooks(
    switch: str | None = typer.Argument(None, help="on or off (omit to list)"),
    name: str | None = typer.Argument(None, help="the runbook to switch"),
    server: str | None = _SERVER,
    token: str | None = _TOKEN,
) -> None:
    """List the automatic first steps, or switch one on or off: ``runbooks on NAME``."""
    from watchkeeper.errors import InvalidInput

    with _client(server, token) as client:
        if switch is not None:
            if switch not in {"on", "off"} or name is None:
                raise InvalidInput(
                    "write `watchkeeper runbooks on NAME` or `watchkeeper runbooks off NAME`"
                )
            client.runbooks.switch(name, switch == "on")
        items = client.runbooks.list()
    from rich.table import Table

    table = Table("runbook", "does", "on", "set by", title="Automatic first steps")
    for item in items:
        table.add_row(
            item["name"], item["description"], "yes" if item["enabled"] else "no", item["source"]
        )
    console.print(table)
