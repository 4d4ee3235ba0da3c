"""Never twice, even across SIGKILL: 200 sends to a local platform, the deliverer killed
mid-request again and again. The platform sees no duplicate; every interrupted send is
``maybe_sent`` and never sent again."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from sqlalchemy import select

from watchkeeper import config
from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.webhook import WebhookChannel
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.runs import NewRun
from watchkeeper.store.schema.notify import deliveries

from ...conftest import make_settings
from ..helpers import reports_for, sweep

SENDS = 200
#: Requests (by arrival number) during which the deliverer is killed.
KILL_AT = (3, 17, 40, 41, 77, 120, 121, 160, 199)
FORK = multiprocessing.get_context("fork")


@dataclass
class Platform:
    url: str = ""
    keys: list[str] = field(default_factory=list)
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextmanager
def platform() -> Iterator[Platform]:
    """Receives messages; at each kill point it holds the answer until told to let go."""
    state = Platform()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            with state.lock:
                state.keys.append(body["idempotency_key"])
                arrival = len(state.keys)
            if arrival in KILL_AT:
                state.held.set()
                state.release.wait(30)
                return  # the client is dead by now: no answer
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()


def deliverer(settings: config.Settings) -> None:
    """A deliverer process: recover, then send until nothing is due."""
    runtime = Runtime.open(settings, store=Store(settings.resolved_database_url, migrate=False))
    notifier = runtime.build_notifier({"webhook": WebhookChannel(settings.ops)})
    notifier.recover(runtime.clock())

    async def drain() -> None:
        while runtime.store.outbox.due(runtime.clock()):
            await notifier.deliver_due()
        await notifier.aclose()

    asyncio.run(drain())
    runtime.close()


def sending_ids(store: Store) -> set[int]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(deliveries.c.id).where(deliveries.c.status == "sending"))
        return set(rows.scalars())


def test_sigkill_during_200_sends_never_sends_twice(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    with platform() as fake:
        ops = {"channels": ["webhook"], "webhook_url": fake.url, "timeout_s": 30}
        settings = make_settings(tmp_path, store.url, ops=ops)
        runtime = Runtime.open(settings, clock=clock, store=store)
        reports = reports_for(runtime)
        for index in range(SENDS):
            reports.start(NewRun("crawl", f"r{index}", "t", None, "none", None, None, 90))
            reports.fail("crawl", f"r{index}", f"failure {index}", f"f{index}", None)
        sweep(runtime)
        assert runtime.store.outbox.enqueue([], clock()) == []
        assert runtime.build_notifier({}).route(clock()) == SENDS
        runtime.sweeper.close()
        store.engine.dispose()  # children must not inherit pooled connections

        interrupted: set[int] = set()
        for _ in range(len(KILL_AT) + 5):
            fake.held.clear()
            child = FORK.Process(target=deliverer, args=(settings,))
            child.start()
            # Wait for the child either to be held mid-request, or to finish everything.
            while not fake.held.wait(0.05):
                if not child.is_alive():
                    break
            if not child.is_alive():
                child.join()
                assert child.exitcode == 0
                break
            assert child.pid is not None
            os.kill(child.pid, signal.SIGKILL)
            child.join(timeout=30)
            interrupted |= sending_ids(store)
        else:
            raise AssertionError("the deliverer never finished")

    with store.engine.connect() as conn:
        rows = conn.execute(select(deliveries.c.id, deliveries.c.status)).all()
    final = dict(rows)
    received = Counter(fake.keys)
    assert [key for key, count in received.items() if count > 1] == []  # no duplicate
    assert len(interrupted) == len(KILL_AT)
    assert all(final[i] == "maybe_sent" for i in interrupted)
    assert Counter(final.values()) == {"sent": SENDS - len(KILL_AT), "maybe_sent": len(KILL_AT)}
    assert len(received) == SENDS  # each held request had arrived: sent once, never again
