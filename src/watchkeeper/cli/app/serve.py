"""``watchkeeper serve``: the API, the dashboard and the sweep loop in one process."""

from __future__ import annotations

import errno
import gc
import logging
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from watchkeeper import logsafety
from watchkeeper.cli.app.common import settings, state
from watchkeeper.cli.app.stopping import StopSignals
from watchkeeper.cli.console import console
from watchkeeper.errors import ConfigError

#: Connections the kernel queues before the server takes them (uvicorn's default).
BACKLOG = 2048

if TYPE_CHECKING:
    from watchkeeper.config import Settings
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

    logsafety.install(logging.INFO)
    loaded = settings(ctx)
    check_secrets(loaded)  # before the store exists: a bad secret leaves no data folder behind
    bind_host = host or loaded.server.host
    bind_port = port or loaded.server.port
    # The port before the store: a server that cannot listen must not open the store, write
    # to it or take the leader lease from the server that holds the port.
    with StopSignals() as stop:
        sock = listening(bind_host, bind_port)
        try:
            _serve(ctx, loaded, sock, bind_host, bind_port, access_log, stop)
        finally:
            sock.close()


def _serve(
    ctx: typer.Context,
    loaded: Settings,
    sock: socket.socket,
    bind_host: str,
    bind_port: int,
    access_log: bool,
    stop: StopSignals,
) -> None:
    """Open the store and serve the app on ``sock``, which already listens."""
    from watchkeeper.runtime import Runtime
    from watchkeeper.server.app import create_app

    runtime = Runtime.open(loaded)
    # From here a stop signal waits for the server to start, then stops it gracefully: an
    # exit raised inside the app's start-up or the event loop could be swallowed there.
    stop.hold()
    announce_first_token(runtime)
    config_file = _read_from(state(ctx).config_path)
    console.print(
        f"watchkeeper serving on http://{bind_host}:{bind_port} "
        f"(config: {config_file or 'no file, the defaults'}; "
        f"store: {_safe_url(loaded.resolved_database_url)}, "
        f"{len(runtime.sweeper.adapters)} kinds, sweep every {loaded.check_interval_s:g} s)",
        markup=False,
    )
    from watchkeeper.server.api.events import stop_streams
    from watchkeeper.server.http.protocol import Server, server_config

    try:
        app = create_app(runtime)
        app.state.config_file = config_file
        server = Server(
            server_config(app, bind_host, bind_port, log_level="info", access_log=access_log),
            on_stop=[lambda: stop_streams(app)],
            stop_requested=lambda: stop.requested,
        )
        # What start-up built lives as long as the server: frozen, it is no longer walked by
        # every full collection, each of which (about 200,000 objects, 50-200 ms) stalled
        # every request in flight.
        gc.collect()
        gc.freeze()
        server.run(sockets=[sock])
        if not server.started:
            raise typer.Exit(3)  # uvicorn said why (the app's start-up failed, say)
    finally:
        runtime.close()


def listening(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, or a :class:`ConfigError` that says why it
    cannot be had and what to do."""
    where = f"{host}:{port}"
    try:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as exc:
        raise ConfigError(f"cannot serve on {where}: {exc.strerror}") from None
    try:
        # As uvicorn binds: a port left in TIME_WAIT by an earlier run is free, a listener is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise ConfigError(_why_not(host, port, exc)) from None
    return sock


def _why_not(host: str, port: int, exc: OSError) -> str:
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"cannot serve on {where}: port {port} is taken by another process (another "
            f"`watchkeeper serve`?). Stop that process (`ss -ltnp` or `lsof -i :{port}` shows "
            "which one), or serve on another port with --port (or [server] port)"
        )
    if exc.errno == errno.EACCES:
        return (
            f"cannot serve on {where}: ports below 1024 need privileges; "
            "serve on a port from 1024 up with --port (or [server] port)"
        )
    if exc.errno == errno.EADDRNOTAVAIL or isinstance(exc, socket.gaierror):
        return (
            f"cannot serve on {where}: {host} is not an address of this machine; "
            "pass --host 127.0.0.1, 0.0.0.0 or one of its addresses (or set [server] host)"
        )
    return f"cannot serve on {where}: {exc.strerror or exc}"


def _read_from(given: str | None) -> str | None:
    """The configuration file this server read (``--config`` or ``WATCHKEEPER_CONFIG``), whole."""
    import os

    from watchkeeper.config import CONFIG_ENV

    chosen = given or os.environ.get(CONFIG_ENV)
    return str(Path(chosen).resolve()) if chosen else None


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
