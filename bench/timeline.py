"""Timeline events ingested per second in batches, against a bare executemany; spend rollups.

What it measures, on a fresh database:

- "service": ``TimelineService.ingest`` on batches of ``--batch`` events (after
  one warm-up batch that loads the price data, as a server does once): each
  event priced (genai-prices data, an override, or unpriced), its text
  redacted and capped, the org filled from its job, one ``executemany`` per
  batch in one write transaction;
- "API in-process": the same plus what ``POST /api/v1/events/batch`` adds
  before it: parsing and validating the JSON body with its pydantic models;
- "HTTP": the SDK's ``client.timeline.emit_batch`` (gzip) against a real
  ``watchkeeper serve`` on loopback, one batch at a time;
- "bare executemany": the very rows the service stores, inserted with the
  SQLAlchemy Core ``insert(timeline_events)`` and nothing else, one
  transaction per batch; and "driver executemany": the driver's own
  ``cursor.executemany`` with the same rows, which is what the store sends
  them through. The ratios are service / each of these.

The four ingest paths run in ``--rounds`` interleaved rounds (each round runs
every path once, in turn, on an emptied table); figures are medians over the
rounds, and each ratio is the median of the rounds' own ratios, with their
lowest and highest beside it.

Then ``--rollup-events`` (default 1,000,000) priced events are loaded through
the store's own batch insert and ``GET /api/v1/spend?by=model``'s query
(:func:`watchkeeper.timeline.spend.report`) is timed: best and median of 5.

Goal (issue 8): at least 20,000 events/s on SQLite.

Run::

    .venv/bin/python bench/timeline.py                  # SQLite
    .venv/bin/python bench/timeline.py --db both --json timeline.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# This folder goes last: a benchmark named like a standard module (queue.py) must not shadow it.
sys.path.append(sys.path.pop(0))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import insert

import _common as common
from watchkeeper.clock import to_epoch
from watchkeeper.records.timeline import NewEvent
from watchkeeper.server.api.timeline import Batch
from watchkeeper.store import Store
from watchkeeper.store.schema.timeline import timeline_events
from watchkeeper.timeline import spend
from watchkeeper.timeline.service import TimelineService

T0 = datetime(2026, 3, 1, tzinfo=UTC)
CALLS = [
    ("claude-haiku-4-5", "anthropic"),
    ("claude-haiku-4-5", "quicksilverpro"),
    ("claude-sonnet-4-6", "google"),
    ("gpt-4o", "openai"),
    ("coder-1", "acme"),  # priced by the override
    ("claude-private-9", "anthropic"),  # unpriced
]
PHASES = ("round_start", "implementer", "tool", "review", "verify", "session_end")
PRICES = {"acme/coder-1": {"input_per_mtok": 1.0, "output_per_mtok": 4.0}}


def wire_events(count: int, seed: int = 8) -> list[dict[str, Any]]:
    """``count`` events as a runner sends them: rounds of six phases over a few hundred tasks."""
    rng = random.Random(seed)
    events = []
    for i in range(count):
        phase = PHASES[i % len(PHASES)]
        task = f"t-{i // 600:08x}"
        event: dict[str, Any] = {
            "phase": phase,
            "at": (T0 + timedelta(seconds=i)).isoformat(),
            "job_id": f"j-{i // 600:08x}",
            "task_id": task,
            "org": f"org-{i % 7}",
            "round": (i // len(PHASES)) % 100,
            "outcome": "ok",
            "duration_s": rng.uniform(0.1, 60.0),
        }
        if phase in ("implementer", "review"):
            model, provider = CALLS[rng.randrange(len(CALLS))]
            total = rng.randint(1_000, 150_000)
            event.update(
                model=model,
                provider=provider,
                role="implementer" if phase == "implementer" else "architect",
                input_tokens=total,
                cache_read_tokens=total // 2,
                cache_write_tokens=total // 10,
                output_tokens=rng.randint(50, 4_000),
            )
        if phase == "review":
            event["rationale"] = "rejected: the new branch is not tested; token=abc123def456"
        if phase == "tool":
            event["name"] = "pytest -q tests/unit"
        if phase == "verify":
            event["fingerprint"] = f"{rng.getrandbits(64):016x}"
        events.append(event)
    return events


def new_events(wire: list[dict[str, Any]]) -> list[NewEvent]:
    """The events as the service takes them (what the API turns a body into)."""
    return [
        event.new()
        for chunk in _batches(wire, 5000)
        for event in Batch.model_validate({"events": chunk}).events
    ]


def _batches(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _fresh(url: str, folder: Path) -> tuple[Store, TimelineService]:
    store = Store(url)
    settings = common.settings_for(folder, url, prices=PRICES)
    return store, TimelineService(store, settings)


def _reset(store: Store) -> None:
    # Events are append-only (triggers refuse DELETE): the bench's scratch table is emptied
    # the way an administrator resets it on purpose.
    with store.engine.begin() as conn:
        if store.is_sqlite:
            conn.exec_driver_sql("DROP TRIGGER IF EXISTS timeline_events_no_delete")
            conn.execute(timeline_events.delete())
        else:
            conn.exec_driver_sql("TRUNCATE timeline_events")


def ingest_figures(url: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Events/s through the service, the API's validation, HTTP, and bare executemanys."""
    wire = wire_events(args.events)
    wire_batches = _batches(wire, args.batch)
    service_batches = [new_events(batch) for batch in wire_batches]
    store, service = _fresh(url, folder)
    figures: dict[str, Any] = {"events": args.events, "batch": args.batch, "rounds": args.rounds}
    try:
        service.ingest(service_batches[0], "warm-up")  # loads the price data: once per process
        now = service.clock()
        rows = [
            service.row(event, now, to_epoch(now) or 0.0, "bench")
            for batch in service_batches
            for event in batch
        ]
        bodies = [json.dumps({"events": batch}).encode() for batch in wire_batches]
        # Each round runs every path once, in turn, so a ratio compares runs made under the
        # same load: on a shared machine, one run of each minutes apart can differ twofold.
        rounds: dict[str, list[float]] = {"service": [], "api": [], "bare": [], "driver": []}
        for _ in range(args.rounds):
            rounds["service"].append(_service(store, service, service_batches, args.events))
            rounds["api"].append(_api(store, service, bodies, args.events))
            rounds["bare"].append(_bare(store, rows, args.batch))
            rounds["driver"].append(_driver(store, rows, args.batch))
        for name, key in (("service", "service"), ("api", "api_inprocess"), ("bare", "bare"),
                          ("driver", "driver")):  # fmt: skip
            figures[f"{key}_per_s"] = statistics.median(rounds[name])
        for other in ("bare", "driver"):
            ratios = [s / o for s, o in zip(rounds["service"], rounds[other], strict=True)]
            figures[f"ratio_service_to_{other}"] = statistics.median(ratios)
            figures[f"ratio_service_to_{other}_min_max"] = [min(ratios), max(ratios)]
        figures["unpriced_share"] = sum(1 for r in rows if r["unpriced"]) / len(rows)
    finally:
        store.close()
    figures["http_per_s"] = _http(url, folder, wire_batches, args.events)
    return figures


def _service(
    store: Store, service: TimelineService, batches: list[list[NewEvent]], count: int
) -> float:
    _reset(store)
    started = time.perf_counter()
    for batch in batches:
        service.ingest(batch, "bench")
    return count / (time.perf_counter() - started)


def _api(store: Store, service: TimelineService, bodies: list[bytes], count: int) -> float:
    _reset(store)
    started = time.perf_counter()
    for body in bodies:
        parsed = Batch.model_validate_json(body)
        service.ingest([event.new() for event in parsed.events], "bench")
    return count / (time.perf_counter() - started)


def _bare(store: Store, rows: list[dict[str, Any]], size: int) -> float:
    _reset(store)
    started = time.perf_counter()
    for batch in _batches(rows, size):
        with store.engine.begin() as conn:
            conn.execute(insert(timeline_events), batch)
    return len(rows) / (time.perf_counter() - started)


def _driver(store: Store, rows: list[dict[str, Any]], size: int) -> float:
    _reset(store)
    columns = list(rows[0])
    marker = "?" if store.is_sqlite else "%s"
    sql = (
        f"INSERT INTO timeline_events ({', '.join(columns)}) "  # noqa: S608 - schema names
        f"VALUES ({', '.join(marker for _ in columns)})"
    )
    tuples = [tuple(row[c] for c in columns) for row in rows]
    raw = store.engine.raw_connection()
    try:
        started = time.perf_counter()
        for batch in _batches(tuples, size):
            cursor = raw.cursor()
            if store.is_sqlite:
                cursor.execute("BEGIN")
            cursor.executemany(sql, batch)
            raw.commit()
            cursor.close()
        return len(rows) / (time.perf_counter() - started)
    finally:
        raw.close()


def _http(url: str, folder: Path, batches: list[list[dict[str, Any]]], count: int) -> float:
    from watchkeeper.client import Client

    http_folder = folder / "http"
    http_folder.mkdir()
    with common.serve(url, http_folder) as server, Client(server.base_url, server.token) as client:
        _reset_url(url)
        started = time.perf_counter()
        for batch in batches:
            client.timeline.emit_batch(batch)
        return count / (time.perf_counter() - started)


def _reset_url(url: str) -> None:
    store = Store(url)
    _reset(store)
    store.close()


def rollup_figures(url: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Load ``--rollup-events`` priced rows, then time the spend-by-model query."""
    store, service = _fresh(url, folder)
    try:
        _reset(store)
        template = new_events(wire_events(6000, seed=9))
        now = service.clock()
        priced = [service.row(e, now, to_epoch(now) or 0.0, "bench") for e in template]
        started = time.perf_counter()
        loaded = 0
        while loaded < args.rollup_events:
            chunk = priced[: min(len(priced), args.rollup_events - loaded)]
            service.store.append(chunk)
            loaded += len(chunk)
        load_s = time.perf_counter() - started
        with store.engine.begin() as conn:
            if not store.is_sqlite:
                conn.exec_driver_sql("ANALYZE timeline_events")
        timings = []
        for _ in range(5):
            started = time.perf_counter()
            report = spend.report(service.store, "model")
            timings.append(time.perf_counter() - started)
        return {
            "rollup_events": loaded,
            "rollup_load_s": load_s,
            "spend_by_model_best_s": min(timings),
            "spend_by_model_median_s": statistics.median(timings),
            "spend_groups": len(report.groups),
            "spend_calls": sum(g.calls for g in report.groups),
        }
    finally:
        store.close()


def measure(backend: str, args: argparse.Namespace) -> common.Figures:
    """Ingestion and rollup on one fresh database each."""
    figures: common.Figures = {}
    for step in (ingest_figures, rollup_figures):
        with (
            tempfile.TemporaryDirectory(prefix="wk-timeline-") as folder,
            common.database(backend, Path(folder)) as url,
        ):
            figures.update(step(url, Path(folder), args))
    return figures


def show(backend: str, f: common.Figures) -> None:
    """Print one database's figures."""
    common.print_table(
        f"{f['events']:,} events in batches of {f['batch']:,}, median of {f['rounds']} "
        f"interleaved round(s) ({backend})",
        [
            ("service events/s", f"{f['service_per_s']:,.0f}  (goal >= 20,000/s on SQLite)"),
            ("API in-process events/s (JSON + validation)", f"{f['api_inprocess_per_s']:,.0f}"),
            ("HTTP events/s (SDK, gzip, real server)", f"{f['http_per_s']:,.0f}"),
            ("bare executemany events/s (SQLAlchemy)", f"{f['bare_per_s']:,.0f}"),
            ("driver executemany events/s", f"{f['driver_per_s']:,.0f}"),
            ("service / bare (SQLAlchemy)", _ratio(f, "bare")),
            ("service / driver executemany", _ratio(f, "driver")),
        ],
    )
    common.print_table(
        f"spend rollup over {f['rollup_events']:,} events ({backend})",
        [
            ("load (store batch insert) s", f["rollup_load_s"]),
            ("GET /api/v1/spend?by=model query, best s", f["spend_by_model_best_s"]),
            ("median of 5, s", f["spend_by_model_median_s"]),
            ("groups / calls summed", f"{f['spend_groups']} / {f['spend_calls']:,}"),
        ],
    )


def _ratio(f: common.Figures, other: str) -> str:
    low, high = f[f"ratio_service_to_{other}_min_max"]
    return f"{f[f'ratio_service_to_{other}']:.2f}  (rounds: {low:.2f}-{high:.2f})"


def main() -> None:
    """Parse the options and run."""
    parser = common.parser(__doc__ or "")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--rollup-events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved ingest rounds")
    args = parser.parse_args()
    common.run_backends(args, "timeline", measure, show)


if __name__ == "__main__":
    main()
