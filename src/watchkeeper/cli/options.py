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

from watchkeeper.cli.common import console, err_console

if TYPE_CHECKING:
    from watchkeeper.client import Client

SERVER = typer.Option(None, "--server", help="the server's URL [env: WATCHKEEPER_URL]")
TOKEN = typer.Option(None, "--token", help="API token [env: WATCHKEEPER_TOKEN]")
JSON = typer.Option(False, "--json", help="print JSON instead of text")
STORE = typer.Option(
    None,
    "--store",
    help="read this existing local store instead of a server: a data folder or a database URL",
)

URL_ENV = "WATCHKEEPER_URL"
TOKEN_ENV = "WATCHKEEPER_TOKEN"  # noqa: S105 - the variable's name, not a secret
DEFAULT_URL = "http://127.0.0.1:8750"


def server_url(server: str | None) -> tuple[str, str]:
    """The server's URL and where it came from (said when nothing answers there)."""
    if server:
        return server.rstrip("/"), "--server"
    if os.environ.get(URL_ENV):
        return os.environ[URL_ENV].rstrip("/"), URL_ENV
    config_path = _config_path()
    if config_path:
        from watchkeeper import config

        loaded = config.load(config_path)
        # A server listening on every address is reached on loopback from its own host.
        host = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(  # noqa: S104 - compared, not bound
            loaded.server.host, loaded.server.host
        )
        return f"http://{host}:{loaded.server.port}", f"[server] of {config_path}"
    return DEFAULT_URL, "the default"


def _config_path() -> str | None:
    """``--config`` of this invocation, or ``WATCHKEEPER_CONFIG``."""
    import click

    from watchkeeper.cli.common import CliState

    ctx = click.get_current_context(silent=True)
    found = None if ctx is None else ctx.find_root().obj
    chosen = found.config_path if isinstance(found, CliState) else None
    return chosen or os.environ.get("WATCHKEEPER_CONFIG") or None


def connect(server: str | None, token: str | None) -> Client:
    """A client of the server this invocation names (see the module's docstring)."""
    url, source = server_url(server)
    return _cli_client(url, source, token or os.environ.get(TOKEN_ENV) or None)


def _cli_client(url: str, source: str, token: str | None) -> Client:
    from watchkeeper.client import Client
    from watchkeeper.errors import ClientError

    class CliClient(Client):
        """The SDK's client, whose "nothing answers" says how to point it elsewhere."""

        def request(self, method: str, path: str, **kwargs: Any) -> Any:
            try:
                return super().request(method, path, **kwargs)
            except ClientError as exc:
                if exc.code != "unreachable":
                    raise
                raise ClientError(0, "unreachable", unreachable(url, source)) from exc.__cause__

    return CliClient(url, token)


def unreachable(url: str, source: str) -> str:
    """What to say when no server answers at ``url`` (found from ``source``)."""
    return (
        f"cannot reach watchkeeper at {url} (from {source}): no watchkeeper server answers there."
        " Start one with `watchkeeper serve`, or point at yours with --server URL"
        f" or {URL_ENV} (or --config FILE with its [server] table)"
    )


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
