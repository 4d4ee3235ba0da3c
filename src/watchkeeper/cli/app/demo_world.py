"""``watchkeeper demo``: a swarm-like task that keeps hitting its time limit, and its cards.

A task with a short time limit is started as push work with no effects
outside, so Retry is offered. When the limit passes it fails, and its card
(Retry, Dismiss, Ask to diagnose) appears in the log and in every chat the
configuration names in ``[ops] channels``. Retry starts it again with the same
limit; it fails again: a note under the card says so and the card's buttons come back.

The demo keeps its own data folder: it borrows only the configuration's chat
platforms, admins and ops chats, so it never touches a real store.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watchkeeper.config import Settings
from watchkeeper.errors import ConfigError
from watchkeeper.kinds.actions import ActionRequest
from watchkeeper.runtime import Runtime
from watchkeeper.watch.reports import NewRun

log = logging.getLogger(__name__)
DEMO_KIND = "swarm_task"
DEMO_RUN = "demo-swarm-task"
_CHAT_PLATFORMS = ("telegram", "discord", "slack")


def demo_chats(configured: Settings) -> tuple[list[str], list[str]]:
    """The ops chats the demo can post to, and those it skips for want of a bot token."""
    usable: list[str] = []
    skipped: list[str] = []
    for entry in configured.ops.channels:
        platform = entry.partition(":")[0]
        if platform not in _CHAT_PLATFORMS:
            continue
        table = getattr(configured, platform)
        (usable if table.bot_token or table.bot_token_env else skipped).append(entry)
    return usable, skipped


def demo_settings(configured: Settings, data_dir: Path, check_interval_s: float = 2) -> Settings:
    """The demo's settings: its own data folder and kind, the configuration's chats and admins."""
    chats, _ = demo_chats(configured)
    raw: dict[str, Any] = {
        "data_dir": str(data_dir),
        "check_interval_s": check_interval_s,
        "kinds": {
            DEMO_KIND: {
                "actions": {"retry": {"entry_point": "watchkeeper.cli.app.demo_world:retry_task"}}
            }
        },
        # The log is always a demo chat: the terminal shows every card, wherever else it goes.
        "ops": {**configured.ops.model_dump(), "channels": ["log", *chats]},
        "admins": configured.admins.model_dump(),
        **{platform: getattr(configured, platform).model_dump() for platform in _CHAT_PLATFORMS},
    }
    return Settings.model_validate(raw)


def listening_socket(host: str, port: int, *, asked: bool) -> tuple[socket.socket, str | None]:
    """A socket bound to ``host:port``; when that port is taken and was not ``asked`` for,
    one bound to a free port instead, with a sentence saying so."""
    try:
        return _bound(host, port), None
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        if asked:
            raise ConfigError(
                f"port {port} on {host} is in use (is `watchkeeper serve` running?): "
                "pass another --port, or leave --port out to let the demo pick a free one"
            ) from None
    chosen = _bound(host, 0)
    free = chosen.getsockname()[1]
    return chosen, (
        f"port {port} is in use (is `watchkeeper serve` running?); "
        f"the demo serves on http://{host}:{free} instead"
    )


def _bound(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        # As uvicorn binds: a port left in TIME_WAIT by an earlier run is free, a listener is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock


@dataclass
class DemoSwarm:
    """Runs the demo task in the server's event loop; its retry is the kind's own action."""

    runtime: Runtime
    limit_s: float
    loop: asyncio.AbstractEventLoop | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def launch(self) -> None:
        """Start (or restart) the task; safe from any thread."""
        assert self.loop is not None
        self.loop.call_soon_threadsafe(self._spawn)

    def _spawn(self) -> None:
        task = asyncio.get_running_loop().create_task(self._run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self) -> None:
        reports = self.runtime.reports
        new = NewRun(
            DEMO_KIND, DEMO_RUN, "summarise the weekly reports", None, "none", None, None, 3600
        )
        await asyncio.to_thread(reports.start, new)
        for step in range(1, 100):
            await asyncio.sleep(min(1.0, self.limit_s / 4))
            await asyncio.to_thread(
                reports.progress, DEMO_KIND, DEMO_RUN, f"reading report {step}", None
            )
            if step >= 4:
                break
        reason = f"time limit of {self.limit_s:g} s exceeded while reading report 4"
        await asyncio.to_thread(reports.fail, DEMO_KIND, DEMO_RUN, reason, "time_limit", None)
        self.runtime.sweeper.poke(self.runtime.clock())
        log.warning("Demo task failed: %s", reason, extra={"action": "demo"})

    async def stop(self) -> None:
        """Cancel the running task, if any."""
        for task in list(self.tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


_SWARM: DemoSwarm | None = None


def install(swarm: DemoSwarm) -> None:
    """Make ``swarm`` the one the retry action talks to."""
    global _SWARM
    _SWARM = swarm


def retry_task(request: ActionRequest) -> str:
    """The demo kind's retry: start the task again with the same limit."""
    if _SWARM is None:
        raise RuntimeError("the demo swarm is not running")
    _SWARM.launch()
    return "the swarm started the task again"
