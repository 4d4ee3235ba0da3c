"""Who decided whether a run's command starts: its shim, or the engine that gave up on it.

A run is committed as ``starting`` before its shim exists. Two parties may then
decide its fate without hearing from each other: the shim, about to start the
command, and the engine's reaper, which takes a ``starting`` run whose launcher
stalled past the grace as never started. Both take the run's start claim, a
file created once with its content in place (a hard link of a finished file,
which fails if the name exists), so exactly one of them wins:

- the shim wins: the command starts, and the reaper waits for its owner report;
- the engine wins: the run is failed, and a shim that comes later refuses to
  start the command, so no command ever runs under a ``failed`` record that
  neither abort nor reclaim would touch again;
- the shim declines (its launcher went away before handing over the witness
  key): the claim says why, and the engine fails the run with those words.

Only the standard library: the shim imports it and must start fast.
"""

from __future__ import annotations

import json
import os

CLAIM_NAME = "start.json"
SHIM = "shim"
ENGINE = "engine"


def take(run_dir: str, claim: dict[str, object]) -> dict[str, object] | None:
    """Take the run's start claim with ``claim``; ``None`` if taken, else the one there first.

    The claim appears whole or not at all: it is written to a file of its own,
    then linked to its name, and the link fails if the name exists.
    """
    path = os.path.join(run_dir, CLAIM_NAME)
    draft = f"{path}.{os.getpid()}.draft"
    with open(draft, "w", encoding="utf-8") as file:
        json.dump(claim, file)
        file.flush()
        os.fsync(file.fileno())
    try:
        os.link(draft, path)
    except FileExistsError:
        return read(run_dir) or {"by": "unknown"}
    finally:
        os.unlink(draft)
    return None


def read(run_dir: str) -> dict[str, object] | None:
    """The run's start claim, ``None`` while nobody has taken it (or it is unreadable)."""
    try:
        with open(os.path.join(run_dir, CLAIM_NAME), encoding="utf-8") as file:
            found = json.load(file)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def by_shim(pid: int, start: str | None) -> dict[str, object]:
    """The shim's claim: it starts the command now."""
    return {"by": SHIM, "pid": pid, "start": start}


def declined(pid: int, why: str) -> dict[str, object]:
    """The shim's claim that the command will not start, and why."""
    return {"by": SHIM, "pid": pid, "declined": why}


def by_engine(why: str) -> dict[str, object]:
    """The engine's claim: the run never started and is failed; no shim may start it now."""
    return {"by": ENGINE, "declined": why}
