"""``watchkeeper db``: schema migrations."""

from __future__ import annotations

import typer

from watchkeeper.cli.common import console, settings

app = typer.Typer(help="Database schema.", no_args_is_help=True)


@app.command("upgrade")
def upgrade(ctx: typer.Context) -> None:
    """Apply every pending migration."""
    from watchkeeper.store.engine import make_engine
    from watchkeeper.store.migrate import current_revision, head_revision
    from watchkeeper.store.migrate import upgrade as run_upgrade

    engine = make_engine(settings(ctx).resolved_database_url)
    try:
        before = current_revision(engine)
        run_upgrade(engine)
        console.print(f"schema at {head_revision()} (was {before or 'empty'})")
    finally:
        engine.dispose()


@app.command("current")
def current(ctx: typer.Context) -> None:
    """Show the schema revision of the database and of this version of watchkeeper."""
    from watchkeeper.store.engine import make_engine
    from watchkeeper.store.migrate import current_revision, head_revision

    engine = make_engine(settings(ctx).resolved_database_url)
    try:
        console.print(f"database: {current_revision(engine) or 'empty'}; code: {head_revision()}")
    finally:
        engine.dispose()
