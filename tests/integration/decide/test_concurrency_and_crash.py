"""64 presses from 64 processes: one winner. A SIGKILL inside the kind's function: never re-run."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from watchkeeper import config
from watchkeeper.clock import ManualClock
from watchkeeper.contract import Action
from watchkeeper.decide.actors import Actor
from watchkeeper.decide.journal import INTERRUPTED_NOTE
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...conftest import make_settings
from ..helpers import start, sweep
from ..recorder import recording_server
from .fixtures import acting_kinds

PRESSERS = 64
FORK = multiprocessing.get_context("fork")


def _press(
    settings: config.Settings, incident_id: int, token: str, name: str, barrier: Any, results: Any
) -> None:
    runtime = Runtime.open(settings, store=Store(settings.resolved_database_url, migrate=False))
    barrier.wait(timeout=120)
    outcome = runtime.decider.press(incident_id, "cancel", token, Actor(name, "slack", True))
    results.put((name, outcome.outcome.value, outcome.message))
    runtime.close()


def test_sixty_four_concurrent_presses_one_winner(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    with recording_server() as service:
        settings = make_settings(tmp_path, store.url, kinds=acting_kinds(service.url))
        runtime = Runtime.open(settings, clock=clock, store=store)
        start(runtime, "contended", "swarm_task", budget_s=60, lease_s=10**6)
        clock.advance(61)
        incident_id = sweep(runtime).applied.opened[0]
        token = store.incidents.get(incident_id).state_token
        store.engine.dispose()  # children must not inherit pooled connections
        barrier, results = FORK.Barrier(PRESSERS), FORK.Queue()
        processes = [
            FORK.Process(
                target=_press, args=(settings, incident_id, token, f"@p{i}", barrier, results)
            )
            for i in range(PRESSERS)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=120)
        assert [p.exitcode for p in processes] == [0] * PRESSERS
        answers = [results.get(timeout=10) for _ in processes]
        winners = [a for a in answers if a[1] == "done"]
        losers = [a for a in answers if a[1] != "done"]
        assert len(winners) == 1
        winner = winners[0][0]
        assert len(losers) == PRESSERS - 1
        assert {a[1] for a in losers} == {"already_decided"}
        assert all(
            a[2].startswith(f"already decided: Cancel by {winner} on Slack at ") for a in losers
        )
        assert len(service.requests) == 1
        decision = store.incidents.get(incident_id).decision
        assert decision is not None
        assert decision.actor == winner
        assert len(store.decisions.presses_for(incident_id)) == PRESSERS
        runtime.sweeper.close()


@contextmanager
def hanging_service() -> Iterator[tuple[str, threading.Event, threading.Event, list[str]]]:
    """An owning system whose cancel never answers until released."""
    arrived, release = threading.Event(), threading.Event()
    calls: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            calls.append(self.path)
            arrived.set()
            release.wait(30)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", arrived, release, calls
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def _press_and_hang(settings: config.Settings, incident_id: int, token: str) -> None:
    runtime = Runtime.open(settings, store=Store(settings.resolved_database_url, migrate=False))
    runtime.decider.press(incident_id, "cancel", token, Actor("@ana", "slack", True))


def test_sigkill_inside_the_kind_function_marks_the_action_interrupted(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    with hanging_service() as (url, arrived, release, calls):
        settings = make_settings(tmp_path, store.url, kinds=acting_kinds(url))
        runtime = Runtime.open(settings, clock=clock, store=store)
        start(runtime, "victim", "swarm_task", budget_s=60, lease_s=10**6)
        clock.advance(61)
        incident_id = sweep(runtime).applied.opened[0]
        token = store.incidents.get(incident_id).state_token
        runtime.sweeper.close()
        store.engine.dispose()
        child = FORK.Process(target=_press_and_hang, args=(settings, incident_id, token))
        child.start()
        assert arrived.wait(60), "the kind's function was never called"
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(timeout=30)
        assert child.exitcode == -signal.SIGKILL
        journal = store.decisions.actions_for_incident(incident_id)
        assert [a.status.value for a in journal] == ["started"]

        # The restart: start-up reconciliation.
        restarted = Runtime.open(settings, clock=clock, store=Store(store.url, migrate=False))
        journal = restarted.store.decisions.actions_for_incident(incident_id)
        assert [a.status.value for a in journal] == ["interrupted"]
        incident = restarted.store.incidents.get(incident_id)
        assert incident.events[-1].type == "action_interrupted"
        assert incident.events[-1].detail == INTERRUPTED_NOTE
        # It may or may not have happened: the decision is lifted and the buttons are back.
        assert incident.decision is None
        assert Action.CANCEL in restarted.decider.offered(incident)
        # A second restart changes nothing more.
        Runtime.open(settings, clock=clock, store=restarted.store).sweeper.close()
        assert [
            a.status.value for a in restarted.store.decisions.actions_for_incident(incident_id)
        ] == ["interrupted"]
        release.set()
        time.sleep(0)  # let the handler thread finish its answer to a dead client
        assert calls == ["/cancel/victim"]
        restarted.close()
