"""Cards delivered per second to a local Slack-like platform across 100 chats, and the time
from incident open to card delivered.

What it measures: ``--chats`` conversations each get ``--per-chat`` incidents
(failed push runs whose origin is that Slack channel). One sweep opens them
all; the notifier routes them into the outbox and delivers them with the real
Slack channel (HTTP, Block Kit) to the fake Slack server the tests use, with
per-conversation pacing on:

- "platform pace": each conversation at Slack's 1 message per second, the
  fake enforcing 5 per 5 s per channel (a 429 comes back if we overrun);
- "capacity": pacing and the fake's limit off, to show what the outbox and
  the deliverer can push through.

Cards/s is cards sent / wall time of the delivery; latency is, per card, the
moment its delivery row was settled ``sent`` minus its incident's
``opened_at``. Goal (issue 4): at least 200 cards/s across 100 chats.

Run::

    .venv/bin/python bench/notify.py                  # SQLite
    .venv/bin/python bench/notify.py --db both --json notify.json
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import tempfile
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import select
from tests.integration.fakes.slack import TOKEN, fake_slack

import _common as common
from watchkeeper.notify.channels.slack import SlackChannel
from watchkeeper.runtime import Runtime
from watchkeeper.server.app import reports_for
from watchkeeper.store import Store
from watchkeeper.store.runs import NewRun
from watchkeeper.store.schema import incidents
from watchkeeper.store.schema_notify import deliveries


def serve_fake(paced: bool, conn: Any) -> None:
    """The fake platform in a process of its own, so it does not share our interpreter."""
    ThreadingHTTPServer.request_queue_size = 512  # a burst of 100 chats at once
    with fake_slack() as fake:
        fake.per_channel_limit = 5 if paced else None
        conn.send(fake.url)
        conn.recv()  # told to stop
        conn.send(sum(1 for c in fake.calls if c.status == 429))


def serve_bare(paced: bool, conn: Any) -> None:
    """A bare Slack-shaped answer from raw asyncio streams: measures our side, not the fake's."""
    import itertools

    counter = itertools.count(1)
    common.serve_json_answers(
        conn,
        lambda _path, _body: {"ok": True, "channel": "C", "ts": f"1700000000.{next(counter):06d}"},
        lambda: 0,
    )


def one_run(
    url: str, folder: Path, chats: int, per_chat: int, paced: bool, bare: bool = False
) -> common.Figures:
    """Open ``chats * per_chat`` incidents and deliver their cards."""
    ours, theirs = multiprocessing.get_context("fork").Pipe()
    serve = serve_bare if bare else serve_fake
    platform = multiprocessing.get_context("fork").Process(target=serve, args=(paced, theirs))
    platform.start()
    fake_url = ours.recv()
    try:
        settings = common.settings_for(
            folder, url, slack={"bot_token": TOKEN, "base_url": fake_url, "timeout_s": 10}
        )
        runtime = Runtime.open(settings, store=Store(url))
        reports = reports_for(runtime)
        for chat in range(chats):
            origin = {"platform": "slack", "chat_id": f"C{chat:04d}"}
            for index in range(per_chat):
                run_id = f"c{chat}-{index}"
                reports.start(
                    NewRun("crawl", run_id, f"crawl {run_id}", origin, "none", None, None, 90)
                )
                reports.fail("crawl", run_id, "quota exceeded", None, None)
        channel = SlackChannel(settings.slack)
        if not paced:
            channel.per_chat_rate = 10_000.0
        notifier = runtime.build_notifier({"slack": channel})

        async def deliver() -> float:
            await runtime.sweeper.sweep()
            started = time.perf_counter()
            await asyncio.to_thread(notifier.route, runtime.clock())
            while await asyncio.to_thread(runtime.store.outbox.due, runtime.clock(), 1):
                await notifier.deliver_due(limit=1000)
            elapsed = time.perf_counter() - started
            await notifier.aclose()
            return elapsed

        elapsed = asyncio.run(deliver())
        with runtime.store.engine.connect() as conn:
            rows = conn.execute(
                select(deliveries.c.status, deliveries.c.updated_at, incidents.c.opened_at).join(
                    incidents, incidents.c.id == deliveries.c.incident_id
                )
            ).all()
        runtime.close()
    finally:
        ours.send("stop")
        limited = ours.recv()
        platform.join(timeout=30)
    sent = [r for r in rows if r.status == "sent"]
    latencies = [r.updated_at - r.opened_at for r in sent]
    return {
        "cards": len(rows),
        "sent": len(sent),
        "not_sent": len(rows) - len(sent),
        "seconds": elapsed,
        "cards_per_s": len(sent) / elapsed,
        "open_to_delivered_p50_s": common.percentile(latencies, 50),
        "open_to_delivered_p99_s": common.percentile(latencies, 99),
        "fake_429s": limited,
    }


def measure(backend: str, args: argparse.Namespace) -> common.Figures:
    """Three modes on one database: platform pace, no pacing, and no pacing on a bare platform."""
    results = {}
    modes = {
        "platform pace, fake Slack": (True, False),
        "no pacing, fake Slack": (False, False),
        "no pacing, bare platform": (False, True),
    }
    for mode, (paced, bare) in modes.items():
        with (
            tempfile.TemporaryDirectory(prefix="wk-notify-") as folder,
            common.database(backend, Path(folder)) as url,
        ):
            results[mode] = one_run(url, Path(folder), args.chats, args.per_chat, paced, bare)
    return results


def show(backend: str, figures: common.Figures) -> None:
    """Print one database's figures."""
    for mode, f in figures.items():
        common.print_table(
            f"{f['cards']} cards, {mode} ({backend})",
            [
                ("cards sent / not sent", f"{f['sent']} / {f['not_sent']}"),
                ("cards/s", f"{f['cards_per_s']:.1f}  (goal >= 200/s across 100 chats)"),
                (
                    "open -> delivered p50 / p99 (s)",
                    f"{f['open_to_delivered_p50_s']:.2f} / {f['open_to_delivered_p99_s']:.2f}",
                ),
                ("429s from the platform", f["fake_429s"]),
            ],
        )


def main() -> None:
    """Parse the options and run."""
    parser = common.parser(__doc__ or "")
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--per-chat", type=int, default=4)
    args = parser.parse_args()
    common.run_backends(args, "notify", measure, show)


if __name__ == "__main__":
    main()
