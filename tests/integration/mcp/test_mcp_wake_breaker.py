"""The wake breaker holds for agents: an agent's own tool calls never re-arm its wake.

An agent that reports progress on its own run and parks with a progress note,
round after round, on work that no longer moves, is held after
:data:`~watchkeeper.procs.park.WAKE_LIMIT` wakes, as a session on the command line
is; only what the engine sees the watched run do (a new log line) releases it.
"""

from __future__ import annotations

from pathlib import Path

from watchkeeper.clock import utcnow
from watchkeeper.procs import layout
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.park import WAKE_LIMIT
from watchkeeper.records.procs import ParkState

from ...support.live_server import LiveServer
from ...support.waiting import wait_for
from .conftest import agent

SESSION = "looping-agent"


def states(engine: ProcEngine) -> list[ParkState]:
    return [view.park.state for view in reversed(engine.parked())]


def test_an_agents_own_word_never_rearms_its_wake_but_a_log_line_does(
    served: LiveServer, transport: str, tmp_path: Path
) -> None:
    # The server does not sweep by itself here: the test sweeps with its engine, by hand.
    engine = served.runtime.procs
    gate = tmp_path / "go"
    with agent(served, transport) as session:
        ended = session.answer("run", {"command": ["true"], "cwd": str(tmp_path)})["id"]
        session.answer("wait", {"run_id": ended})
        build = session.answer(
            "run",
            {
                "command": [
                    "sh",
                    "-c",
                    f"while [ ! -e {gate} ]; do sleep 0.05; done; echo built; exec sleep 120",
                ],
                "cwd": str(tmp_path),
            },
        )["id"]
        wait_for(lambda: engine.get(build).status.value == "running", what="the build running")
        own = session.answer("report_start", {"kind": "swarm_task", "title": "builder"})

        rounds = WAKE_LIMIT + 2
        for attempt in range(rounds):
            # The agent's own word, each round: its run's progress and the park's note.
            session.answer(
                "report_progress",
                {"kind": "swarm_task", "run_id": own["run_id"], "step": f"round {attempt}"},
            )
            session.answer(
                "park",
                {
                    "until": ended,
                    "reason": "waiting on the build",
                    "session": SESSION,
                    "progress": f"note {attempt}",
                },
            )
            engine.sweep(utcnow())
        assert states(engine) == [ParkState.WOKEN] * WAKE_LIMIT + [ParkState.SUPPRESSED] * 2
        assert engine.procs.session(SESSION).wakes_without_progress == WAKE_LIMIT
        shown = session.answer("parked")["parks"]
        assert {park["progress_note"] for park in shown} == {f"note {rounds - 1}"}
        assert all(park["breaker_open"] for park in shown)

        # Parked on the build, which has written nothing yet: still held.
        session.answer(
            "park", {"until": build, "reason": "waiting on the build", "session": SESSION}
        )
        engine.sweep(utcnow())
        engine.sweep(utcnow())
        assert states(engine)[WAKE_LIMIT:] == [ParkState.SUPPRESSED] * 2 + [ParkState.WAITING]

        # The watched run writes a real log line: the engine sees it and lets the held wakes go.
        gate.touch()
        log = layout.log_path(engine.data_dir, build)
        wait_for(lambda: b"built" in log.read_bytes(), what="the build's log line")

        def released() -> bool:
            engine.sweep(utcnow())
            return ParkState.WOKEN in states(engine)[WAKE_LIMIT : WAKE_LIMIT + 2]

        wait_for(released, what="the held wakes released by the build's log line")
        assert engine.procs.session(SESSION).wakes_without_progress == 1
        assert not any(park["breaker_open"] for park in session.answer("parked")["parks"])
        session.answer("abort", {"run_id": build, "grace": "1s"})
