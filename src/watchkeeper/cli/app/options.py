"""What commands that print tables or talk to a server share: options, a client, output.

``--server`` / ``WATCHKEEPER_URL``, ``--token`` / ``WATCHKEEPER_TOKEN`` and
``--json`` mean the same in every command, so they are declared once here.
Heavy modules (the HTTP client, Rich's tables) are imported on first use, so
a command that never needs them starts fast.

Where a command looks: the URL of ``--server``, else ``WATCHKEEPER_URL``,
else the ``[server]`` table of the configuration file ``serve`` would read
(``--config`` or ``WATCHKEEPER_CONFIG``), else the default local URL. When no
server answers there, the command says which URL it tried and why that one,
and stops: it never falls back on a local store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import typer

from watchkeeper.cli.console import console, err_console
from watchkeeper.client.locate import cli_client, find_server
from watchkeeper.client.wire import URL_ENV

if TYPE_CHECKING:
    from watchkeeper.client import Client

SERVER = typer.Option(None, "--server", help="the server's URL [env: WATCHKEEPER_URL]")
TOKEN = typer.Option(None, "--token", help="API token [env: WATCHKEEPER_TOKEN]")
JSON = typer.Option(False, "--json", help="print JSON instead of text")


def parse_duration(value: str | None, option: str) -> float | None:
    """``90``, ``90s``, ``10m``, ``2h30m``, ``1d`` as seconds (``None`` stays ``None``); a
    value that is no duration, or not more than zero, is refused naming ``option``."""
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


STORE = typer.Option(
    None,
    "--store",
    help="read this existing local store instead of a server: a data folder or a database URL",
)


def server_url(server: str | None) -> tuple[str, str]:
    """The server's URL and where it came from (said when nothing answers there)."""
    from watchkeeper.cli.app.common import chosen_config, invocation, tell_unread

    # The global options are looked up, not handed down: every command calls this.
    found = find_server(server, chosen_config(invocation()))
    assert found is not None  # the configuration is read when it names the server
    if not server and not os.environ.get(URL_ENV):
        tell_unread(invocation())  # a [server] table there would have named another URL
    return found


def connect(server: str | None, token: str | None) -> Client:
    """A client of the server this invocation names (see the module's docstring)."""
    url, source = server_url(server)
    return cli_client(url, source, token)


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
