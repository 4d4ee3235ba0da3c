"""``watchkeeper serve``: the API, the dashboard and the sweep loop in one process."""

from __future__ import annotations

import contextlib
import gc
import logging
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import typer

from watchkeeper import logsafety
from watchkeeper.cli.common import settings, state
from watchkeeper.cli_console import console

if TYPE_CHECKING:
    from watchkeeper.runtime import Runtime


def serve(
    ctx: typer.Context,
    host: str | None = typer.Option(None, help="address to listen on (default 127.0.0.1)"),
    port: int | None = typer.Option(None, help="port to listen on (default 8750)"),
    access_log: bool = typer.Option(False, "--access-log", help="log every request"),
) -> None:
    """Start the server with the sweep loop."""
    # Imported here: every other command loads this module, and the configuration's models
    # cost more than a whole `runs` against a server.
    from watchkeeper.config import check_secrets
    from watchkeeper.server.app import create_app

    logsafety.install(logging.INFO)
    from watchkeeper.runtime import Runtime

    loaded = settings(ctx)
    check_secrets(loaded)  # before the store exists: a bad secret leaves no data folder behind
    runtime = Runtime.open(loaded)
    announce_first_token(runtime)
    bind_host = host or loaded.server.host
    bind_port = port or loaded.server.port
    config_file = _read_from(state(ctx).config_path)
    console.print(
        f"watchkeeper serving on http://{bind_host}:{bind_port} "
        f"(config: {config_file or 'no file, the defaults'}; "
        f"store: {_safe_url(loaded.resolved_database_url)}, "
        f"{len(runtime.sweeper.adapters)} kinds, sweep every {loaded.check_interval_s:g} s)",
        markup=False,
    )
    from watchkeeper.server.http import Server, server_config
    from watchkeeper.server.routes_events import stop_streams

    try:
        app = create_app(runtime)
        app.state.config_file = config_file
        server = Server(
            server_config(app, bind_host, bind_port, log_level="info", access_log=access_log),
            on_stop=[lambda: stop_streams(app)],
        )
        # What start-up built lives as long as the server: frozen, it is no longer walked by
        # every full collection, each of which (about 200,000 objects, 50-200 ms) stalled
        # every request in flight.
        gc.collect()
        gc.freeze()
        # uvicorn stops gracefully on SIGTERM, then raises the signal again with the handler it
        # found: by default that kills the process before the runtime below is closed.
        with _terminated_exits(), contextlib.suppress(KeyboardInterrupt):
            server.run()
        if not server.started:
            raise typer.Exit(3)  # uvicorn said why (e.g. the port is in use)
    finally:
        runtime.close()


def _read_from(given: str | None) -> str | None:
    """The configuration file this server read (``--config`` or ``WATCHKEEPER_CONFIG``), whole."""
    import os

    from watchkeeper.config import CONFIG_ENV

    chosen = given or os.environ.get(CONFIG_ENV)
    return str(Path(chosen).resolve()) if chosen else None


def _exit_cleanly(_signal: int, _frame: FrameType | None) -> None:
    # A normal exit unwinds through the ``finally`` that closes the runtime.
    raise SystemExit(0)


@contextlib.contextmanager
def _terminated_exits() -> Iterator[None]:
    """SIGTERM here is a clean exit 0 (the main thread only: elsewhere it cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _exit_cleanly)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def announce_first_token(runtime: Runtime) -> None:
    """A new data folder gets one admin token, printed once."""
    secret = runtime.tokens.first_admin()
    if secret is None:
        return
    console.print(
        "[bold]Created the first admin token. It is shown only now; keep it:[/bold]\n"
        f"  {secret}\n"
        "Use it as `Authorization: Bearer <token>`, or export WATCHKEEPER_TOKEN."
    )


def _safe_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
