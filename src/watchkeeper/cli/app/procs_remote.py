"""The process commands' ways over the server, and the waiting both ways share.

A run's output is read by offset (``client.procs.log_from``): each piece
ends after a complete line while the run goes on, so a secret is redacted
whole on the server and never reaches the terminal in two halves.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from watchkeeper.cli.console import console
from watchkeeper.client.procs import ENDED

if TYPE_CHECKING:
    from rich.text import Text

    from watchkeeper.client import Client

#: Longest a follower waits for more output before it asks again.
FOLLOW_PAUSE_S = 0.5


def print_log(client: Client, run_id: str, *, follow: bool) -> None:
    """Print the run's output from the server, secrets redacted; ``follow``: until it ends."""
    LogReader(client, run_id).print(follow=follow)


class LogReader:
    """A run's output read from the server piece by piece, remembering how far it printed."""

    def __init__(self, client: Client, run_id: str) -> None:
        self.client = client
        self.run_id = run_id
        self.offset = 0

    def print(self, *, follow: bool) -> None:
        """Print what follows ``offset``: what there is now, or (``follow``) until the run ends."""
        procs = self.client.procs
        while True:
            piece = procs.log_from(self.run_id, self.offset)
            _write(piece["text"])
            moved = piece["next_offset"] > self.offset
            self.offset = piece["next_offset"]
            if piece["ended"] and self.offset >= piece["size"]:
                return
            if moved:
                continue
            if not follow:
                # Only an unfinished last line is left: print it as it is, as a local read does.
                _write(procs.log_from(self.run_id, self.offset, whole_lines=False)["text"])
                return
            # Returns as soon as the run ends, so the last piece is asked for at once.
            procs.wait(self.run_id, timeout_s=FOLLOW_PAUSE_S)


def _write(text: str) -> None:
    if text:
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.buffer.flush()


def wait_there(client: Client, run_id: str, timeout_s: float | None) -> dict[str, Any]:
    """Wait on the run over the server; on a terminal, a spinner shows where it is."""
    if not console.is_terminal:
        return client.procs.wait(run_id, timeout_s=timeout_s)
    return wait_showing(
        lambda left: client.procs.wait(run_id, timeout_s=left),
        lambda: client.procs.get(run_id),
        timeout_s,
    )


def wait_showing(
    wait_up_to: Callable[[float], dict[str, Any]],
    look: Callable[[], dict[str, Any]],
    timeout_s: float | None,
) -> dict[str, Any]:
    """``wait_up_to`` a second at a time, a spinner showing ``look``'s run meanwhile."""
    import time

    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with console.status(where(look())) as spinner:
        while True:
            left = 1.0 if deadline is None else min(1.0, max(0.0, deadline - time.monotonic()))
            run = wait_up_to(left)
            if run["status"] in ENDED or (deadline is not None and time.monotonic() >= deadline):
                return run
            spinner.update(where(look()))


def where(body: dict[str, Any]) -> Text:
    """One line: the run, its status, its last step and the age of its last progress."""
    from datetime import UTC, datetime

    from rich.text import Text

    moved = body.get("progress_at") or body.get("started_at")
    age = ""
    if moved:
        when = datetime.fromisoformat(str(moved).replace("Z", "+00:00"))
        seconds = max(0, int((datetime.now(UTC) - when).total_seconds()))
        age = f", moved {_age(seconds)} ago"
    step = body.get("step") or "no step reported yet"
    # Plain text: a step is what the work wrote, and may hold brackets.
    return Text(f"{body['id']} {body['effective_status']}: {step}{age}")


def _age(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def start_there(
    client: Client, argv: list[str], *, detach: bool, options: dict[str, Any]
) -> dict[str, Any] | None:
    """Start ``argv`` on the server's host: print its id (``detach``), or its output as it
    comes, then return the ended run. Ctrl-C aborts the run there, then waits for its end."""
    run_id = str(client.procs.start(argv, detach=True, **options)["id"])
    if detach:
        console.print(run_id, highlight=False)
        return None
    reader = LogReader(client, run_id)
    try:
        reader.print(follow=True)
    except KeyboardInterrupt:
        # Here the interrupt would end only the watching; the run is what the user stops.
        client.procs.abort(run_id)
        reader.print(follow=True)
    return client.procs.wait(run_id)
