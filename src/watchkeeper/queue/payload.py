"""What a task's payload must hold for a runner to run it."""

from __future__ import annotations

from typing import Any

from watchkeeper.errors import InvalidInput


def check_payload(payload: dict[str, Any]) -> None:
    """A task's payload names the command to run: ``{"argv": ["cmd", "arg", ...]}``."""
    argv = payload.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise InvalidInput(
            'the payload needs "argv": a non-empty list of strings (the command to run)',
            "payload.argv",
        )
    cwd = payload.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise InvalidInput('"cwd" must be a string (a folder on the runner\'s host)', "payload.cwd")
