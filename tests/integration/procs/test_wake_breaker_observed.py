"""The wake breaker resets on what the engine sees the watched work do, never on the session's word.

A session that keeps parking on work that no longer moves, saying each time
that it made progress, is held after :data:`WAKE_LIMIT` wakes: its notes are
recorded and shown, but only a new log line of the run it watches (or that run
ending after the park) releases it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper import Client
from watchkeeper.clock import utcnow
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.procs import layout
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.park import WAKE_LIMIT
from watchkeeper.records.procs import ParkState
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...conftest import make_settings
from ...support.cli import wk
from ...support.live_server import LiveServer, live_server
from ...support.waiting import wait_for
from .conftest import kill_leftovers

SESSION = "looping-agent"


@pytest.fixture
def served(tmp_path: Path, store: Store) -> Iterator[tuple[LiveServer, ProcEngine]]:
    settings = make_settings(tmp_path, store.url)
    runtime = Runtime.open(settings, store=store, clock=utcnow, notifier=OpsNotifier(settings.ops))
    # The test sweeps by hand with this engine, on the server's data folder.
    engine = ProcEngine(store, settings.data_dir, clock=utcnow, grace_s=2.0)
    with live_server(runtime) as server:
        yield server, engine
    runtime.sweeper.close()
    kill_leftovers(engine)


def server_env(server: LiveServer) -> dict[str, str]:
    """The command line pointed at the test server, as an admin."""
    return {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["admin"]}


def park_by_cli(server: LiveServer, run_id: str, progress: str | None = None) -> None:
    args = ["park", "--session", SESSION, "--until", run_id, "--reason", "waiting on the build"]
    if progress is not None:
        args += ["--progress", progress]
    done = wk(*args, env=server_env(server))
    assert done.returncode == 0, done.stderr


def states(engine: ProcEngine) -> list[ParkState]:
    return [view.park.state for view in reversed(engine.parked())]


def test_the_sessions_own_word_does_not_reset_the_breaker_but_a_log_line_does(
    served: tuple[LiveServer, ProcEngine], tmp_path: Path
) -> None:
    server, engine = served
    with Client(server.url, server.tokens["admin"]) as admin:
        ended = admin.procs.start(["true"], cwd=str(tmp_path))["id"]
        admin.procs.wait(ended, timeout_s=30)
        gate = tmp_path / "go"
        build = admin.procs.start(
            ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done; echo built; exec sleep 120"],
            cwd=str(tmp_path),
        )["id"]
    wait_for(lambda: engine.get(build).status.value == "running", what="the build running")

    rounds = WAKE_LIMIT + 2
    with Client(server.url, server.tokens["reporter"]) as reporter:
        for attempt in range(rounds):
            # The session's own word, over the API and on the command line: recorded, no reset.
            answer = reporter.procs.session_progress(SESSION, f"api note {attempt}")
            assert answer["released"] == 0
            park_by_cli(server, ended, progress=f"cli note {attempt}")
            engine.sweep(utcnow())
    assert states(engine) == [ParkState.WOKEN] * WAKE_LIMIT + [ParkState.SUPPRESSED] * 2
    breaker = engine.procs.session(SESSION)
    assert breaker.wakes_without_progress == WAKE_LIMIT
    assert breaker.progress_note == f"cli note {rounds - 1}"
    shown = json.loads(wk("parked", "--json", env=server_env(server)).stdout)
    assert {row["progress_note"] for row in shown} == {f"cli note {rounds - 1}"}
    assert all(row["breaker_open"] for row in shown)

    # Parked on the build, which has written nothing yet: still held.
    park_by_cli(server, build)
    engine.sweep(utcnow())
    engine.sweep(utcnow())
    assert states(engine)[WAKE_LIMIT:] == [ParkState.SUPPRESSED] * 2 + [ParkState.WAITING]
    assert engine.procs.session(SESSION).wakes_without_progress == WAKE_LIMIT

    # The watched run writes a real log line: the engine sees it and lets the held wakes go.
    gate.touch()
    log = layout.log_path(engine.data_dir, build)
    wait_for(lambda: b"built" in log.read_bytes(), what="the build's log line")

    def released() -> bool:
        engine.sweep(utcnow())
        return ParkState.WOKEN in states(engine)[WAKE_LIMIT : WAKE_LIMIT + 2]

    # Released together, they wake the session once, for the newer; the older is superseded.
    wait_for(released, what="the held wakes released by the build's log line")
    assert states(engine)[WAKE_LIMIT:] == [
        ParkState.SUPERSEDED,
        ParkState.WOKEN,
        ParkState.WAITING,  # the build still runs
    ]
    # Reset to zero, then the one wake counted: the breaker is closed again.
    assert engine.procs.session(SESSION).wakes_without_progress == 1
