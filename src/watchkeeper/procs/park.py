"""Park and wake for agent sessions: only the engine checks, so waiting costs no session.

A session parks (``watchkeeper park --until RUN``) and hands back. On each
sweep the engine finds parks whose run has ended and wakes them: the park
becomes ``woken`` and its wake command (if any) runs with the run's result.

The wake breaker: a session woken :data:`WAKE_LIMIT` times in a row without
progress is not woken again (its parks become ``suppressed``, and
``watchkeeper parked`` says so) until the engine sees the work move. Progress
is only what the engine observes for itself: the run a park watches wrote to
its log, or ended, after the park. A session's own ``--progress`` note is
recorded and shown but resets nothing: a session stuck in a loop says it moved
every round.

A session is woken once per sweep, for the newest of its parks whose run ended;
its older parks that came due with it are ``superseded`` (and say by which park),
never woken later. A session held by the breaker parks again and again meanwhile,
so when the engine sees its work move, several parks are released at once: waking
it for each would run its wake command for work it has long moved past.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchkeeper.errors import NotFound
from watchkeeper.paths import SESSION_ENV
from watchkeeper.procs import hooks
from watchkeeper.records.procs import Park, ParkState, ProcRun, SessionBreaker

if TYPE_CHECKING:
    from watchkeeper.store.procs import ProcStore

log = logging.getLogger(__name__)
WAKE_LIMIT = 3
#: Parks that may still wake their session.
_OPEN = frozenset({ParkState.WAITING, ParkState.SUPPRESSED})


@dataclass(frozen=True, slots=True)
class ParkedView:
    """One park as ``watchkeeper parked`` shows it."""

    park: Park
    run_status: str | None
    wakeable: bool
    breaker: SessionBreaker

    def as_dict(self) -> dict[str, Any]:
        """Plain values for JSON."""
        from watchkeeper.clock import rfc3339

        return {
            "id": self.park.id,
            "session": self.park.session,
            "reason": self.park.reason,
            "until": self.park.until_run,
            "state": self.park.state.value,
            "run_status": self.run_status,
            "wakeable": self.wakeable,
            "parked_at": rfc3339(self.park.parked_at),
            "woken_at": rfc3339(self.park.woken_at),
            "note": self.park.note,
            "wakes_without_progress": self.breaker.wakes_without_progress,
            "breaker_open": self.breaker.wakes_without_progress >= WAKE_LIMIT,
            "progress_note": self.breaker.progress_note,
        }


def views(procs: ProcStore, *, limit: int = 200) -> list[ParkedView]:
    """Parks with the state of the run each waits on and its session's breaker."""
    parks = procs.parks(limit=limit)
    breakers = procs.sessions([park.session for park in parks])
    result = []
    for park in parks:
        try:
            status: str | None = procs.get(park.until_run).status.value
        except NotFound:
            status = None
        ended = status is not None and status not in ("starting", "running")
        wakeable = ended and park.state in _OPEN
        result.append(ParkedView(park, status, wakeable, breakers[park.session]))
    return result


def wake_due(procs: ProcStore, data_dir: Path, now: datetime) -> list[tuple[int, ParkState]]:
    """Wake each session with a waiting park whose run ended, once, unless its breaker is open.

    First the watched runs are looked at: a session whose run moved since the
    last look has its breaker reset and its held parks released. Then each
    session's due parks are taken together: the newest wakes it (or is held by
    its breaker), the older ones are superseded by it.
    """
    for session in procs.observe_watched(now):
        log.info(
            "Session %s: its watched run moved; wake breaker reset",
            session,
            extra={"action": "proc_wake"},
        )
    due: dict[str, list[tuple[Park, ProcRun]]] = {}
    for park, run in procs.wakeable_parks():
        due.setdefault(park.session, []).append((park, run))
    moved: list[tuple[int, ParkState]] = []
    for session, parks in due.items():
        *older, (newest, run) = sorted(parks, key=lambda found: found[0].id)
        breaker = procs.session(session)
        if breaker.wakes_without_progress >= WAKE_LIMIT:
            moved += _hold(procs, [park for park, _ in (*older, (newest, run))], breaker, now)
            continue
        # At most once: the move is committed before the wake command runs.
        if not procs.move_park(newest.id, ParkState.WOKEN, now):
            continue  # another engine took this session's wake
        procs.record_wake(session, now)
        moved += _supersede(procs, [park for park, _ in older], newest, now)
        _run_wake(newest, run, data_dir, now)
        moved.append((newest.id, ParkState.WOKEN))
    return moved


def _hold(
    procs: ProcStore, parks: list[Park], breaker: SessionBreaker, now: datetime
) -> list[tuple[int, ParkState]]:
    """The breaker is open: each of the session's due parks is held, not woken."""
    note = (
        f"woken {breaker.wakes_without_progress} times in a row without progress: "
        "further wakes held until a run it waits on writes to its log or ends"
    )
    held = []
    for park in parks:
        if procs.move_park(park.id, ParkState.SUPPRESSED, now, note):
            log.warning(
                "Wake of session %s suppressed: %s",
                park.session,
                note,
                extra={"action": "proc_wake"},
            )
            held.append((park.id, ParkState.SUPPRESSED))
    return held


def _supersede(
    procs: ProcStore, older: list[Park], newest: Park, now: datetime
) -> list[tuple[int, ParkState]]:
    """The session was woken for ``newest``: its ``older`` due parks never wake it."""
    note = f"superseded by park {newest.id}, a newer park of the session that woke it"
    done = []
    for park in older:
        if procs.move_park(park.id, ParkState.SUPERSEDED, now, note):
            log.info(
                "Park %s of session %s superseded by park %s",
                park.id,
                park.session,
                newest.id,
                extra={"action": "proc_wake"},
            )
            done.append((park.id, ParkState.SUPERSEDED))
    return done


def _run_wake(park: Park, run: ProcRun, data_dir: Path, now: datetime) -> None:
    log.info(
        "Woke session %s: run %s is %s",
        park.session,
        run.run_id,
        run.status.value,
        extra={"action": "proc_wake"},
    )
    if not park.wake_cmd:
        return
    result = hooks.result_of(run, data_dir, now)
    env = {
        **os.environ,
        SESSION_ENV: park.session,
        "WATCHKEEPER_RUN_ID": run.run_id,
        "WATCHKEEPER_RESULT": json.dumps(result, sort_keys=True),
    }
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", park.wake_cmd],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=hooks.HOOK_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning(
            "Wake command of session %s failed: %s",
            park.session,
            exc,
            extra={"action": "proc_wake"},
        )
        return
    if done.returncode != 0:
        log.warning(
            "Wake command of session %s exited with %s",
            park.session,
            done.returncode,
            extra={"action": "proc_wake"},
        )
