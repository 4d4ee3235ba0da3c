"""Latency of short requests while 60 viewers hold long-polls on a running process.

What it measures:

- A real ``watchkeeper serve`` (its own process, a temporary data folder,
  default limits: 8 held requests per token, 64 in total) on 127.0.0.1.
- An admin token starts ``sleep 3600`` through ``POST /api/v1/procs``.
- Baseline: ``--requests`` sequential ``GET /api/v1/runs`` (viewer token) and
  as many ``GET /healthz``, over one keep-alive connection each; p50/p99.
- Held: ``--held`` long-polls ``GET /api/v1/procs/{id}/wait?timeout_s=30``
  spread over 8 viewer tokens (each asks again when its poll returns), then
  the same requests again while they are held. Reported: the same p50/p99,
  how many long-polls were refused (429), and how many were still open when
  the measurement ended.

Before held requests were waited on the event loop, a sync ``wait`` blocked a
thread-pool thread: 40 of them used every thread, and every other request
waited up to the poll's 30 s.

Run::

    .venv/bin/python bench/longpoll.py                        # SQLite
    .venv/bin/python bench/longpoll.py --db both --json longpoll.json
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

import _common as common

TOKENS = 8
POLL_S = 30


def _latencies(client: httpx.Client, path: str, count: int) -> list[float]:
    took = []
    for _ in range(count):
        started = time.perf_counter()
        response = client.get(path)
        took.append(time.perf_counter() - started)
        response.raise_for_status()
    return took


def _figures(prefix: str, took: list[float]) -> dict[str, float]:
    return {
        f"{prefix}_p50_ms": common.percentile(took, 50) * 1000,
        f"{prefix}_p99_ms": common.percentile(took, 99) * 1000,
    }


class Holders:
    """``held`` long-polls on a background event loop, each asking again when it returns."""

    def __init__(self, base_url: str, tokens: list[str], run_id: str, held: int) -> None:
        self.base_url = base_url
        self.tokens = tokens
        self.run_id = run_id
        self.held = held
        self.open = 0
        self.refused = 0
        self.returned = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def start(self) -> None:
        """Open every long-poll; returns once each request is sent."""
        self._thread.start()
        deadline = time.monotonic() + 30
        while self.open < self.held and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # let the server take every request in before measuring

    def stop(self) -> None:
        """Stop asking again (open polls end with the run)."""
        self._stop.set()

    def join(self) -> None:
        """Wait until every long-poll returned."""
        self._thread.join(timeout=POLL_S + 30)

    async def _main(self) -> None:
        limits = httpx.Limits(max_connections=self.held + 10)
        async with httpx.AsyncClient(
            base_url=self.base_url, limits=limits, timeout=POLL_S + 30
        ) as client:
            await asyncio.gather(*(self._poll(client, i) for i in range(self.held)))

    async def _poll(self, client: httpx.AsyncClient, index: int) -> None:
        headers = {"Authorization": f"Bearer {self.tokens[index % len(self.tokens)]}"}
        path = f"/api/v1/procs/{self.run_id}/wait"
        while not self._stop.is_set():
            self.open += 1
            try:
                answer = await client.get(path, params={"timeout_s": POLL_S}, headers=headers)
            finally:
                self.open -= 1
            if answer.status_code == 429:
                self.refused += 1
                await asyncio.sleep(1)
            else:
                self.returned += 1
                if answer.json().get("status") != "running":
                    return


def measure(backend: str, args: argparse.Namespace) -> common.Figures:
    """Short-request latency without and with ``args.held`` long-polls held."""
    with (
        tempfile.TemporaryDirectory(prefix="wk-bench-longpoll-") as tmp,
        common.database(backend, Path(tmp)) as db_url,
        common.serve(db_url, Path(tmp)) as server,
    ):
        config_path = Path(tmp) / "watchkeeper.toml"
        admin = common.create_token(config_path, "admin")
        viewers = [common.create_token(config_path, "viewer") for _ in range(TOKENS)]
        figures: dict[str, Any] = {"held": args.held, "requests": args.requests}
        with httpx.Client(
            base_url=server.base_url, headers={"Authorization": f"Bearer {admin}"}, timeout=60
        ) as admin_client:
            started = admin_client.post("/api/v1/procs", json={"argv": ["sleep", "3600"]})
            started.raise_for_status()
            run_id = started.json()["id"]
            with httpx.Client(
                base_url=server.base_url,
                headers={"Authorization": f"Bearer {viewers[0]}"},
                timeout=60,
            ) as viewer:
                _latencies(viewer, "/api/v1/runs", 20)  # warm up
                figures |= _figures("idle_runs", _latencies(viewer, "/api/v1/runs", args.requests))
                figures |= _figures("idle_healthz", _latencies(viewer, "/healthz", args.requests))
                holders = Holders(server.base_url, viewers, run_id, args.held)
                holders.start()
                returned_before = holders.returned
                figures |= _figures("held_runs", _latencies(viewer, "/api/v1/runs", args.requests))
                figures |= _figures("held_healthz", _latencies(viewer, "/healthz", args.requests))
                figures["still_open"] = holders.open
                figures["returned_during"] = holders.returned - returned_before
                figures["refused"] = holders.refused
            holders.stop()
            admin_client.post(f"/api/v1/procs/{run_id}/abort", json={"grace_s": 1})
            holders.join()
        return figures


def show(backend: str, figures: common.Figures) -> None:
    """Print one database's figures."""
    common.print_table(
        f"{backend}: {figures['requests']} requests each, {figures['held']} long-polls held",
        [
            ("GET /api/v1/runs p50 / p99 ms, no long-polls",
             f"{figures['idle_runs_p50_ms']:.1f} / {figures['idle_runs_p99_ms']:.1f}"),
            ("GET /api/v1/runs p50 / p99 ms, long-polls held",
             f"{figures['held_runs_p50_ms']:.1f} / {figures['held_runs_p99_ms']:.1f}"),
            ("GET /healthz p50 / p99 ms, no long-polls",
             f"{figures['idle_healthz_p50_ms']:.1f} / {figures['idle_healthz_p99_ms']:.1f}"),
            ("GET /healthz p50 / p99 ms, long-polls held",
             f"{figures['held_healthz_p50_ms']:.1f} / {figures['held_healthz_p99_ms']:.1f}"),
            ("long-polls still open at the end", figures["still_open"]),
            ("long-polls that returned meanwhile", figures["returned_during"]),
            ("long-polls refused (429)", figures["refused"]),
        ],
    )  # fmt: skip


def main() -> None:
    """Parse the options and run."""
    parser = common.parser(__doc__ or "")
    parser.add_argument("--held", type=int, default=60, help="long-polls held at once")
    parser.add_argument("--requests", type=int, default=200, help="requests per measurement")
    args = parser.parse_args()
    common.run_backends(args, "longpoll", measure, show)


if __name__ == "__main__":
    main()
