"""``watchkeeper db``: schema migrations.

``db`` is, with ``serve``, the command that may create a store: ``upgrade``
makes or migrates the database of the configuration, or of ``--store PATH``.
``current`` reads that database, unless ``--server`` (or ``WATCHKEEPER_URL``)
names a server: then it asks that server for its database's revision.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from watchkeeper.cli.app.common import settings
from watchkeeper.cli.app.options import TOKEN, connect, server_url
from watchkeeper.cli.console import console
from watchkeeper.client.wire import URL_ENV

if TYPE_CHECKING:
    from watchkeeper.config import Settings

app = typer.Typer(help="Database schema.", no_args_is_help=True)

STORE = typer.Option(
    None,
    "--store",
    help="this data folder or database URL instead of the configuration's (made if need be)",
)


def _settings(ctx: typer.Context, store: str | None) -> Settings:
    loaded = settings(ctx)
    if not store:
        return loaded
    if "://" in store:
        return loaded.model_copy(update={"database_url": store})
    return loaded.model_copy(update={"data_dir": Path(store), "database_url": None})


@app.command("upgrade")
def upgrade(ctx: typer.Context, store: str | None = STORE) -> None:
    """Apply every pending migration (making the database if there is none)."""
    from watchkeeper.runtime import upgrade_database

    before, head = upgrade_database(_settings(ctx, store))
    console.print(f"schema at {head} (was {before or 'empty'})")


@app.command("current")
def current(
    ctx: typer.Context,
    server: str | None = typer.Option(
        None, "--server", help="ask this server about its database [env: WATCHKEEPER_URL]"
    ),
    token: str | None = TOKEN,
    store: str | None = STORE,
) -> None:
    """Show the schema revision of the database and of this version of watchkeeper."""
    if not store and (server or os.environ.get(URL_ENV)):
        url, _ = server_url(server)
        with connect(server, token) as client:
            found = client.request_object("GET", "/api/v1/schema")
        console.print(
            f"database: {found['database'] or 'empty'}; code: {found['code']} (server {url})",
            highlight=False,
            markup=False,
        )
        return
    from watchkeeper.runtime import database_revisions

    revision, head = database_revisions(_settings(ctx, store))
    console.print(f"database: {revision or 'empty'}; code: {head}")
