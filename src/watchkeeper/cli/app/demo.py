"""``watchkeeper demo``: see a card arrive, press Retry, see it fail again under the card."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from watchkeeper.cli.app.common import settings
from watchkeeper.cli.console import console


def demo(
    ctx: typer.Context,
    port: int | None = typer.Option(
        None,
        help="port to serve the demo on (default: [server] port, or a free one when it is taken)",
    ),
    limit: float = typer.Option(5.0, help="the demo task's time limit, in seconds"),
    data_dir: Path | None = typer.Option(None, help="data folder (default: a new temporary one)"),
) -> None:
    """Start a server with a swarm-like task that keeps hitting its time limit.

    With ``--config``, its cards also go to the chats named in ``[ops] channels``.
    """
    import asyncio
    import contextlib
    import logging

    from rich.markup import escape

    from watchkeeper.access.tokens import Role
    from watchkeeper.cli.app.demo_world import (
        DemoSwarm,
        demo_chats,
        demo_settings,
        install,
        listening_socket,
    )
    from watchkeeper.config import check_secrets
    from watchkeeper.runtime import Runtime
    from watchkeeper.server.app import create_app
    from watchkeeper.server.http.protocol import Server, server_config

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    configured = settings(ctx)
    check_secrets(configured)
    host = "127.0.0.1"
    sock, moved = listening_socket(host, port or configured.server.port, asked=port is not None)
    bound = sock.getsockname()[1]
    folder = data_dir or Path(tempfile.mkdtemp(prefix="watchkeeper-demo-"))
    runtime = Runtime.open(demo_settings(configured, folder))
    _, token = runtime.tokens.create(Role.ADMIN, "demo")
    swarm = DemoSwarm(runtime, limit)
    install(swarm)

    async def start_swarm() -> None:
        swarm.loop = asyncio.get_running_loop()
        swarm.launch()

    app = create_app(runtime, on_start=start_swarm)
    chats, skipped = demo_chats(configured)
    if moved:
        console.print(moved, soft_wrap=True, highlight=False, markup=False)
    where = (
        f"its cards go to {', '.join(chats)} and appear below"
        if chats
        else "no chat is named in [ops] channels: its cards appear below, in the terminal"
    )
    for entry in skipped:
        platform = entry.partition(":")[0]
        where += f"\n({entry} is skipped: [{platform}] has no bot_token)"
    console.print(
        f"[bold]watchkeeper demo[/bold] on http://{host}:{bound} (data in {folder})\n"
        f"A swarm task with a {limit:g} s time limit is starting; {escape(where)} "
        "within about 30 s.\n"
        "Press a button in the chat, or from another terminal:\n"
        f"  export WATCHKEEPER_URL=http://{host}:{bound} WATCHKEEPER_TOKEN={token}\n"
        "  watchkeeper incidents\n"
        "  watchkeeper decide <incident id> retry     # or dismiss, diagnose",
        soft_wrap=True,
        highlight=False,
    )
    try:
        server = Server(server_config(app, host, bound, log_level="warning"))
        with contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=[sock])
    finally:
        sock.close()
        runtime.close()
