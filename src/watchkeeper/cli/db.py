"""``watchkeeper db``: schema migrations."""

from __future__ import annotations

import typer

from watchkeeper.cli.common import console, settings

app = typer.Typer(help="Database schema.", no_args_is_help=True)


@app.command("upgrade")
def upgrade(ctx: typer.Context) -> None:
    """Apply every pending migration."""
    from watchkeeper.runtime import upgrade_database

    before, head = upgrade_database(settings(ctx))
    console.print(f"schema at {head} (was {before or 'empty'})")


@app.command("current")
def current(ctx: typer.Context) -> None:
    """Show the schema revision of the database and of this version of watchkeeper."""
    from watchkeeper.runtime import database_revisions

    found, head = database_revisions(settings(ctx))
    console.print(f"database: {found or 'empty'}; code: {head}")
