"""What commands that print tables or talk to a server share: options, a client, output.

``--server`` / ``WATCHKEEPER_URL``, ``--token`` / ``WATCHKEEPER_TOKEN`` and
``--json`` mean the same in every command, so they are declared once here.
Heavy modules (the HTTP client, Rich's tables) are imported on first use, so
a command that never needs them starts fast.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import typer

from watchkeeper.cli.common import console, err_console

if TYPE_CHECKING:
    from watchkeeper.client import Client

SERVER = typer.Option(None, "--server", envvar="WATCHKEEPER_URL", help="the server's URL")
TOKEN = typer.Option(None, "--token", envvar="WATCHKEEPER_TOKEN", help="API token")
JSON = typer.Option(False, "--json", help="print JSON instead of text")


def connect(server: str | None, token: str | None) -> Client:
    """A client of the server named by ``--server`` (or ``WATCHKEEPER_URL``)."""
    from watchkeeper.client import Client

    return Client(server, token)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout."""
    console.print_json(json.dumps(data))


def say(text: str, *, stderr: bool = False) -> None:
    """One line printed as it is: no markup, no highlighting."""
    (err_console if stderr else console).print(text, highlight=False, markup=False)


def print_table(
    title: str, columns: Sequence[str], rows: Iterable[Sequence[str]], *, fold: bool = True
) -> None:
    """A table of ``rows`` under ``title``; long cells wrap (``fold``) rather than cut."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold" if fold else "ellipsis")
    for row in rows:
        table.add_row(*row)
    console.print(table)


def print_rows(
    as_json: bool,
    title: str,
    columns: Sequence[str],
    rows: Sequence[dict[str, Any]],
    cells: Callable[[dict[str, Any]], Sequence[str]],
) -> None:
    """``rows`` as JSON (``--json``), or a table titled with their count, ``cells`` per row."""
    if as_json:
        print_json(rows)
        return
    print_table(f"{title} ({len(rows)})", columns, map(cells, rows))
