"""``watchkeeper demo``: see a card arrive, press Retry, see the second card."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from watchkeeper.cli.common import console


def demo(
    port: int = typer.Option(8750, help="port to serve the demo on"),
    limit: float = typer.Option(5.0, help="the demo task's time limit, in seconds"),
    data_dir: Path | None = typer.Option(None, help="data folder (default: a new temporary one)"),
) -> None:
    """Start a server with a swarm-like task that keeps hitting its time limit."""
    import asyncio
    import logging

    import uvicorn

    from watchkeeper import config
    from watchkeeper.access.tokens import Role
    from watchkeeper.demo import DEMO_KIND, DemoSwarm, install
    from watchkeeper.runtime import Runtime
    from watchkeeper.server.app import create_app

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    folder = data_dir or Path(tempfile.mkdtemp(prefix="watchkeeper-demo-"))
    settings = config.parse(
        {
            "data_dir": str(folder),
            "check_interval_s": 2,
            "kinds": {
                DEMO_KIND: {"actions": {"retry": {"entry_point": "watchkeeper.demo:retry_task"}}}
            },
            "ops": {"channels": ["log"]},
        },
        "demo settings",
    )
    runtime = Runtime.open(settings)
    _, token = runtime.tokens.create(Role.ADMIN, "demo")
    swarm = DemoSwarm(runtime, limit)
    install(swarm)

    async def start_swarm() -> None:
        swarm.loop = asyncio.get_running_loop()
        swarm.launch()

    app = create_app(runtime, on_start=start_swarm)

    console.print(
        f"[bold]watchkeeper demo[/bold] on http://127.0.0.1:{port} (data in {folder})\n"
        f"A swarm task with a {limit:g} s time limit is starting; its card appears below "
        "(the log is the demo chat) within about 30 s.\n"
        "Press a button from another terminal:\n"
        f"  export WATCHKEEPER_URL=http://127.0.0.1:{port} WATCHKEEPER_TOKEN={token}\n"
        "  watchkeeper incidents\n"
        "  watchkeeper decide <incident id> retry     # or dismiss, diagnose",
        soft_wrap=True,
        highlight=False,
    )
    try:
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
    finally:
        runtime.close()
