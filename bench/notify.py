"""Cards delivered per second to a local Slack-like platform across 100 chats, and the time
from incident open to card delivered.

What it measures: ``--chats`` conversations each get ``--per-chat`` incidents
(failed push runs whose origin is that Slack channel). One sweep opens them
all; the notifier routes them into the outbox and delivers them with the real
Slack channel (HTTP, Block Kit) to the fake Slack server the tests use, with
per-conversation pacing on:

- "Slack limits": the real Slack channel, each conversation at Slack's 1
  message per second, to a platform speaking Slack's Web API that enforces it
  (a 429 with ``Retry-After`` if we overrun; ``tests/integration/notify/limited.py``,
  raw asyncio streams, so its own speed stays out of the figure: the fake Slack
  the tests use serves only 150-220 calls a second, which once set this row);
- "Telegram limits": the real Telegram channel to a platform that enforces
  Telegram's bot limits (1 message/s per chat, 30/s across all chats) and
  answers 429 past them (``tests/integration/notify/limited.py``);
- "capacity": pacing and the fake's limit off, to show what the outbox and
  the deliverer can push through; to the bare platform, each round also runs a bare
  aiohttp sender posting the same number of cards of the same shape (no database), and
  CPU per card is given beside it (issue 39's goal: at most 1.5x).

For the paced modes the allowed rate follows from the limits: the quickest
schedule they permit puts a chat's cards ``1/per_chat_rate`` apart and all
cards ``1/global_rate`` apart, so ``cards - 1`` gaps take
``max((per_chat - 1) / per_chat_rate, (cards - 1) / global_rate)`` seconds.
The achieved rate is ``cards - 1`` over the time from the first card settled
to the last; the fraction is achieved / allowed (goal: at least 0.95 with no
429s). Every figure is given as min / median / max over ``--rounds`` rounds.

CPU per card is the CPU time this process (the notifier, and SQLite's work,
which runs in it; not PostgreSQL's server nor the platform, which runs in a
process of its own) spent from routing's start to the end, over the cards sent.

Cards/s is cards sent / wall time of the delivery, from routing's start to the
last card settled (not to the moment the bench's polling notices, up to 50 ms
later); latency is, per card, the
moment its delivery row was settled ``sent`` minus its incident's
``opened_at``. Goal (issue 4): at least 400 cards/s unpaced to a bare platform.

Run::

    .venv/bin/python bench/notify.py                  # SQLite
    .venv/bin/python bench/notify.py --db both --json notify.json
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import select
from tests.integration.fakes.slack import TOKEN, fake_slack
from tests.integration.notify.limited import TOKEN as LIMITED_TOKEN

import _common as common
from watchkeeper.notify.channels.base import ChatChannel
from watchkeeper.notify.channels.slack import SlackChannel
from watchkeeper.notify.channels.telegram import TelegramChannel
from watchkeeper.runtime import Runtime
from watchkeeper.server.app import reports_for
from watchkeeper.store import Store
from watchkeeper.store.runs import NewRun
from watchkeeper.store.schema import incidents
from watchkeeper.store.schema.notify import deliveries


def serve_fake(_: Any, conn: Any) -> None:
    """The fake Slack, limits off, in a process of its own, so it does not share our interpreter."""
    ThreadingHTTPServer.request_queue_size = 512  # a burst of 100 chats at once
    with fake_slack() as fake:
        fake.per_channel_limit = None
        conn.send(fake.url)
        conn.recv()  # told to stop
        conn.send(sum(1 for c in fake.calls if c.status == 429))


def serve_bare(_: Any, conn: Any) -> None:
    """A bare Slack-shaped answer from raw asyncio streams: measures our side, not the fake's."""
    import itertools

    counter = itertools.count(1)
    common.serve_json_answers(
        conn,
        lambda _path, _body: {"ok": True, "channel": "C", "ts": f"1700000000.{next(counter):06d}"},
        lambda: 0,
    )


def serve_limited(wire: Any, conn: Any) -> None:
    """A platform keeping Telegram's bot limits or Slack's, in a process of its own."""
    from tests.integration.notify.limited import limited_platform

    per_chat_rate, global_rate = LIMITS[wire]
    with limited_platform(per_chat_rate=per_chat_rate, global_rate=global_rate,
                          wire=wire) as platform:  # fmt: skip
        conn.send(platform.url)
        conn.recv()  # told to stop
        conn.send(platform.refused)


#: Each paced mode's limits: per-chat rate and the platform-wide rate (None: none).
LIMITS = {"slack": (1.0, None), "telegram": (1.0, 30.0)}


@contextmanager
def platform_process(serve: Any, name: str) -> Iterator[tuple[str, list[int]]]:
    """``serve`` (one of the platforms above) in a process of its own for the block: yields
    its URL and a list that holds, once the block ends, the 429s it answered."""
    ours, theirs = multiprocessing.get_context("fork").Pipe()
    platform = multiprocessing.get_context("fork").Process(target=serve, args=(name, theirs))
    platform.start()
    refused: list[int] = []
    try:
        yield ours.recv(), refused
    finally:
        ours.send("stop")
        refused.append(ours.recv())
        platform.join(timeout=30)


def one_run(
    url: str,
    folder: Path,
    chats: int,
    per_chat: int,
    paced: bool,
    bare: bool = False,
    platform_name: str = "slack",
) -> common.Figures:
    """Open ``chats * per_chat`` incidents and deliver their cards."""
    serve = serve_limited if paced else serve_bare if bare else serve_fake
    with platform_process(serve, platform_name) as (fake_url, refused):
        chat_settings = {"base_url": fake_url, "timeout_s": 10}
        settings = common.settings_for(
            folder, url, **{platform_name: {"bot_token": LIMITED_TOKEN if platform_name ==
                                            "telegram" else TOKEN, **chat_settings}}
        )  # fmt: skip
        runtime = Runtime.open(settings, store=Store(url))
        reports = reports_for(runtime)
        for chat in range(chats):
            chat_id = f"C{chat:04d}" if platform_name == "slack" else str(1000 + chat)
            origin = {"platform": platform_name, "chat_id": chat_id}
            for index in range(per_chat):
                run_id = f"c{chat}-{index}"
                reports.start(
                    NewRun("crawl", run_id, f"crawl {run_id}", origin, "none", None, None, 90)
                )
                reports.fail("crawl", run_id, "quota exceeded", None, None)
        channel: ChatChannel[Any] = (
            TelegramChannel(settings.telegram)
            if platform_name == "telegram"
            else SlackChannel(settings.slack)
        )
        if not paced:
            channel.per_chat_rate = 10_000.0
        notifier = runtime.build_notifier({platform_name: channel})

        async def deliver() -> tuple[float, float, float]:
            await runtime.sweeper.sweep()
            started = time.perf_counter()
            started_at = time.time()
            cpu_before = time.process_time()
            await asyncio.to_thread(notifier.route, runtime.clock())
            # The server's own loop of passes, woken as it is when paced conversations come due.
            stop = asyncio.Event()
            passes = asyncio.create_task(notifier.run(stop))
            while set(await asyncio.to_thread(runtime.store.outbox.counts)) & {
                "pending",
                "sending",
            }:
                await asyncio.sleep(0.05)
            stop.set()
            await passes
            seen = time.perf_counter() - started
            cpu = time.process_time() - cpu_before
            await notifier.aclose()
            return started_at, seen, cpu

        started_at, seen, cpu = asyncio.run(deliver())
        with runtime.store.engine.connect() as conn:
            rows = conn.execute(
                select(deliveries.c.status, deliveries.c.updated_at, incidents.c.opened_at).join(
                    incidents, incidents.c.id == deliveries.c.incident_id
                )
            ).all()
        runtime.close()
    sent = [r for r in rows if r.status == "sent"]
    # The delivery ends with its last card settled; the loop above only notices at its next look.
    elapsed = max(r.updated_at for r in sent) - started_at if sent else seen
    latencies = [r.updated_at - r.opened_at for r in sent]
    span = max(r.updated_at for r in sent) - min(r.updated_at for r in sent) if sent else 0.0
    per_chat_rate, global_rate = LIMITS[platform_name]
    quickest = max((per_chat - 1) / per_chat_rate,
                   (chats * per_chat - 1) / global_rate if global_rate else 0.0)  # fmt: skip
    allowed = (chats * per_chat - 1) / quickest if quickest else float("inf")
    achieved = (len(sent) - 1) / span if span else float("inf")
    return {
        "allowed_per_s": allowed if paced else None,
        "achieved_per_s": achieved,
        "fraction_of_allowed": achieved / allowed if paced else None,
        "cards": len(rows),
        "sent": len(sent),
        "not_sent": len(rows) - len(sent),
        "seconds": elapsed,
        "seconds_until_seen": seen,
        "cards_per_s": len(sent) / elapsed,
        "cards_per_s_until_seen": len(sent) / seen,
        "cpu_ms_per_card": 1000 * cpu / len(sent) if sent else float("nan"),
        "open_to_delivered_p50_s": common.percentile(latencies, 50),
        "open_to_delivered_p99_s": common.percentile(latencies, 99),
        "fake_429s": refused[0],
    }


def bare_sender(chats: int, per_chat: int) -> common.Figures:
    """The peer of the bare-platform mode: the same number of cards posted with nothing but
    an aiohttp session, to the same bare platform, as many at once as there are chats.

    Each card is a Slack ``chat.postMessage`` of the size ours sends (a text, a section and
    three buttons), its answer read and checked; no database, no outbox, no rendering.
    Only this process's CPU counts, as for ours."""
    import aiohttp

    cards = chats * per_chat

    def body(number: int) -> dict[str, Any]:
        text = f"crawl c{number} failed: quota exceeded (incident {number})"
        buttons = [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": name},
                "action_id": f"wk:{number}:{name.lower()}",
                "value": f"{number}:a1v1",
            }
            for name in ("Retry", "Dismiss", "Diagnose")
        ]
        return {
            "channel": f"C{number % chats:04d}",
            "text": text,
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn", "text": text}},
                {"type": "actions", "elements": buttons},
            ],
        }

    async def send_all(base: str) -> tuple[float, float]:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        connector = aiohttp.TCPConnector(limit=chats)
        async with aiohttp.ClientSession(base, headers=headers, connector=connector) as session:

            async def one(number: int) -> None:
                async with session.post("/api/chat.postMessage", json=body(number)) as answer:
                    if not (await answer.json())["ok"]:
                        raise SystemExit("the bare platform refused a card")

            started, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(one(n) for n in range(cards)))
            return time.perf_counter() - started, time.process_time() - cpu

    with platform_process(serve_bare, "slack") as (url, _):
        seconds, cpu = asyncio.run(send_all(url))
    return {"cards": cards, "cards_per_s": cards / seconds, "cpu_ms_per_card": 1000 * cpu / cards}


def measure(backend: str, args: argparse.Namespace) -> common.Figures:
    """Each mode on a fresh database, ``--rounds`` times: min / median / max of each figure."""
    modes = {
        "Slack limits, limited platform": (True, False, "slack"),
        "Telegram limits, limited platform": (True, False, "telegram"),
        "no pacing, fake Slack": (False, False, "slack"),
        "no pacing, bare platform": (False, True, "slack"),
    }
    results: common.Figures = {}
    for mode, (paced, bare, name) in modes.items():
        if args.mode and not any(m.lower() in mode.lower() for m in args.mode):
            continue
        rounds = []
        for _ in range(args.rounds):
            with (
                tempfile.TemporaryDirectory(prefix="wk-notify-") as folder,
                common.database(backend, Path(folder)) as url,
            ):
                rounds.append(
                    one_run(url, Path(folder), args.chats, args.per_chat, paced, bare, name)
                )
            if bare:
                # Its peer in the same round, right after: CPU per card side by side.
                peer = bare_sender(args.chats, args.per_chat)
                rounds[-1]["peer_cpu_ms_per_card"] = peer["cpu_ms_per_card"]
                rounds[-1]["cpu_over_peer"] = (
                    rounds[-1]["cpu_ms_per_card"] / peer["cpu_ms_per_card"]
                )
        results[mode] = {
            key: spread([r[key] for r in rounds]) if rounds[0][key] is not None else None
            for key in rounds[0]
        }
    return results


def spread(values: list[float]) -> list[float]:
    """Min, median and max."""
    ordered = sorted(values)
    return [ordered[0], statistics.median(ordered), ordered[-1]]


def mmm(values: list[float], form: str = "{:.1f}") -> str:
    """``min / median / max`` as text."""
    return " / ".join(form.format(v) for v in values)


def show(backend: str, figures: common.Figures) -> None:
    """Print one database's figures, min / median / max over the rounds."""
    for mode, f in figures.items():
        rows = [
            ("cards sent / not sent (median)", f"{f['sent'][1]:.0f} / {f['not_sent'][1]:.0f}"),
            ("cards/s, wall (min/med/max)", mmm(f["cards_per_s"]) + "  (goal >= 400/s unpaced)"),
            ("cards/s, until the bench saw it", mmm(f["cards_per_s_until_seen"])),
            ("first -> last settled, cards/s", mmm(f["achieved_per_s"])),
            ("CPU of this process per card (ms)", mmm(f["cpu_ms_per_card"], "{:.2f}")),
        ]
        if f["allowed_per_s"] is not None:
            rows += [
                ("allowed by the limits, cards/s", mmm(f["allowed_per_s"])),
                (
                    "fraction of allowed",
                    mmm(f["fraction_of_allowed"], "{:.3f}") + "  (goal >= 0.95)",
                ),
            ]
        if "cpu_over_peer" in f:
            rows += [
                (
                    "a bare aiohttp sender's CPU per card (ms)",
                    mmm(f["peer_cpu_ms_per_card"], "{:.2f}"),
                ),
                (
                    "CPU per card over the bare sender's",
                    mmm(f["cpu_over_peer"], "{:.2f}") + "x  (goal <= 1.5x)",
                ),
            ]
        rows += [
            ("open -> delivered p50 (s)", mmm(f["open_to_delivered_p50_s"], "{:.2f}")),
            ("429s from the platform", mmm(f["fake_429s"], "{:.0f}") + "  (goal 0)"),
        ]
        common.print_table(f"{f['cards'][1]:.0f} cards, {mode} ({backend})", rows)


def main() -> None:
    """Parse the options and run."""
    parser = common.parser(__doc__ or "")
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--per-chat", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--mode", action="append", default=[],
        help="run only the modes whose name holds this text (repeatable), e.g. 'telegram'",
    )  # fmt: skip
    args = parser.parse_args()
    common.run_backends(args, "notify", measure, show)


if __name__ == "__main__":
    main()
