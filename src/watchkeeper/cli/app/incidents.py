"""``watchkeeper incidents``, ``decide``, ``diagnose`` and ``runbooks``: acting on incidents.

These talk to a server (``--server`` / ``WATCHKEEPER_URL`` and an admin
``--token`` / ``WATCHKEEPER_TOKEN``), so a decision goes through the same
function whichever channel it comes from.
"""

from __future__ import annotations

from typing import Any

import typer

from watchkeeper.cli.app.options import JSON, SERVER, TOKEN, connect, print_json, print_table, say


def _incident_row(item: dict[str, Any]) -> list[str]:
    decision = item.get("decision")
    decided = f"{decision['label']} by {decision['by']}" if decision else ""
    fields = ("id", "kind", "run_id", "condition", "status", "since")
    return [*(str(item[name]) for name in fields), decided]


def incidents(
    status: str | None = typer.Option("live", "--status", help="live, open, recovered or resolved"),
    as_json: bool = JSON,
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """List incidents, newest first."""
    with connect(server, token) as client:
        items = client.incidents.list(status=status)
    if as_json:
        print_json(items)
        return
    columns = ("id", "kind", "run", "condition", "status", "since", "decided")
    print_table("Incidents", columns, [_incident_row(item) for item in items])


def decide(
    incident_id: int = typer.Argument(..., help="the incident's id"),
    action: str = typer.Argument(
        ..., help="cancel, retry, retry_checked, close_turn, dismiss, diagnose, restart or stop"
    ),
    state_token: str | None = typer.Option(
        None, "--state-token", help="the token you saw (default: the incident's current one)"
    ),
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Press a button on an incident. The first decision wins; a later one is told who won."""
    from watchkeeper.errors import ClientError

    with connect(server, token) as client:
        try:
            result = client.incidents.decide(
                incident_id, action, state_token=state_token, via="cli"
            )
        except ClientError as exc:
            if exc.status in {403, 409, 422}:  # refused: told in the server's own words
                say(exc.message, stderr=True)
                raise typer.Exit(1) from None
            raise
    if result["outcome"] == "failed":
        say(result["message"], stderr=True)
        raise typer.Exit(1)
    say(result["message"])


def diagnose(
    incident_id: int = typer.Argument(..., help="the incident's id"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Ask to diagnose: a read-only look, answered in a few sentences."""
    with connect(server, token) as client:
        result = client.incidents.diagnose(incident_id)
    say(result["diagnosis"])


def runbooks(
    switch: str | None = typer.Argument(None, help="on or off (omit to list)"),
    name: str | None = typer.Argument(None, help="the runbook to switch"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """List the automatic first steps, or switch one on or off: ``runbooks on NAME``."""
    from watchkeeper.errors import InvalidInput

    with connect(server, token) as client:
        if switch is not None:
            if switch not in {"on", "off"} or name is None:
                raise InvalidInput(
                    "write `watchkeeper runbooks on NAME` or `watchkeeper runbooks off NAME`"
                )
            client.runbooks.switch(name, switch == "on")
        items = client.runbooks.list()
    rows = [
        [item["name"], item["description"], "yes" if item["enabled"] else "no", item["source"]]
        for item in items
    ]
    print_table("Automatic first steps", ("runbook", "does", "on", "set by"), rows)
