"""Several ``watchkeeper serve`` replicas on one PostgreSQL: stalls to cards per second, and
the time a new leader takes over after the old one is killed.

What it measures, with real ``watchkeeper serve`` processes (each its own data
folder and port; one PostgreSQL schema of the benchmark's own, created and
dropped by it; ``check_interval_s`` from ``--check-interval``) on this machine:

1. **Stalls to cards**, with 1, 2 and 3 replicas (``--replicas``): ``--stalls``
   push runs, started over the API across the replicas, each from its own
   Telegram chat, all with one ``started_at`` and ``--budget``, stall at one
   instant. The leader sweeps and routes; every replica delivers, to a bare
   Telegram-shaped platform in a process of its own that notes when each card
   arrived and in which chat. Figures: cards/s, stall-to-card latency, cards
   per stall (must be exactly 1), which replica sent how many.
2. **Failover**, 3 replicas: ``--kills`` times, SIGKILL the lease holder (its
   pid is in its name ``host:pid:hex`` in ``cluster_lease``), poll the table
   every 20 ms until another replica holds it with a higher epoch, start the
   killed one again. Figures: p50/p99/max against the bound 2 x
   ``check_interval_s``.

Run::

    .venv/bin/python bench/scaleout.py --kills 20 --json scaleout.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, create_engine, text

import _common as common

BOT_TOKEN = "123456:bench-token"
POLL_S = 0.02
KIND = "crawl"
WK = (sys.executable, "-m", "watchkeeper")
ENV_OVERRIDES = ("WATCHKEEPER_DATABASE_URL", "WATCHKEEPER_CONFIG")


# -- the platform -----------------------------------------------------------------------------


def serve_telegram(conn: Any) -> None:
    """A bare Telegram Bot API answer from raw asyncio streams; notes each ``sendMessage``.

    It runs in a process of its own so that its work does not share an interpreter with
    the benchmark's polling. Wall-clock times are noted so they compare with ``started_at``.
    """
    counter = itertools.count(1)
    sent: list[tuple[float, str]] = []

    def answer(path: str, raw: bytes) -> dict[str, Any]:
        result: dict[str, Any] = {}
        if path.endswith("/sendMessage"):
            chat = str(json.loads(raw)["chat_id"])
            sent.append((time.time(), chat))
            result = {"message_id": next(counter), "chat": {"id": int(chat)}}
        elif path.endswith("/getMe"):
            result = {"id": 1, "is_bot": True, "username": "bench_bot"}
        return {"ok": True, "result": result}

    common.serve_json_answers(conn, answer, lambda: sent)


# -- replicas ---------------------------------------------------------------------------------


class Replica:
    """One ``watchkeeper serve`` process with its own data folder; started again on demand."""

    def __init__(self, folder: Path, db_url: str, check_interval_s: float, platform: str) -> None:
        folder.mkdir()
        self.folder = folder
        self.config = folder / "watchkeeper.toml"
        telegram = f'[telegram]\nbot_token = "{BOT_TOKEN}"\nbase_url = "{platform}"\n'
        self.config.write_text(
            f'data_dir = "{folder / "data"}"\n'
            f'database_url = "{db_url}"\n'
            f"check_interval_s = {check_interval_s}\n" + (telegram if platform else ""),
            encoding="utf-8",
        )
        self.starts = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.pid = 0

    def start(self) -> None:
        """Start ``watchkeeper serve`` on a free port, logging to a file of this start's own."""
        port = common.free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.starts += 1
        self.log = self.folder / f"serve-{self.starts}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [*WK, "--config", str(self.config), "serve", "--port", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                # a database or configuration from the environment would override the file's
                env={k: v for k, v in os.environ.items() if k not in ENV_OVERRIDES},
            )
        self.pid = self.process.pid

    def healthy(self) -> bool:
        """Whether ``/healthz`` answers 200; a replica that exited is an error."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"a replica exited early:\n{self.log.read_text(errors='replace')}")
        try:
            return httpx.get(self.url + "/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        """SIGKILL: no goodbye, the lease is left to lapse."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        """SIGINT, then SIGKILL if it does not end within 20 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()


def log_problems(replicas: list[Replica]) -> list[str]:
    """Warnings, errors and tracebacks the replicas logged, in every start, once each."""
    seen: dict[str, None] = {}
    for replica in replicas:
        for log in sorted(replica.folder.glob("serve-*.log")):
            for line in log.read_text(errors="replace").splitlines():
                if any(word in line for word in ("WARNING", "ERROR", "Traceback", "CRITICAL")):
                    seen.setdefault(line.strip()[:240], None)
    return list(seen)


def until(what: str, check: Any, timeout: float, every: float = POLL_S) -> Any:
    """Poll ``check`` every ``every`` s until it returns something true; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def lease(engine: Engine) -> tuple[str | None, int]:
    """The leader lease: holder and epoch (no holder before the first replica takes it)."""
    with engine.connect() as conn:
        row = conn.execute(
            text("SELECT holder, epoch FROM cluster_lease WHERE name = 'leader'")
        ).first()
    return (None, 0) if row is None else (row.holder, int(row.epoch))


def pid_of(holder: str) -> int:
    """The process id in a replica's name ``host:pid:hex``."""
    return int(holder.rsplit(":", 2)[1])


def start_all(replicas: list[Replica], engine: Engine) -> None:
    """Start the replicas and wait until all answer and one of them leads."""
    for replica in replicas:
        replica.start()
    for replica in replicas:
        until("a replica to answer /healthz", replica.healthy, 60)
    pids = {replica.pid for replica in replicas}
    until(
        "a replica of this run to hold the lease",
        lambda: (holder := lease(engine)[0]) is not None and pid_of(holder) in pids,
        60,
    )


# -- 1. stalls to cards -----------------------------------------------------------------------


def throughput(count: int, args: argparse.Namespace) -> common.Figures:
    """``args.stalls`` runs stall at one instant with ``count`` replicas; their cards arrive."""
    ours, theirs = multiprocessing.get_context("fork").Pipe()
    receiver = multiprocessing.get_context("fork").Process(target=serve_telegram, args=(theirs,))
    receiver.start()
    platform = ours.recv()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="wk-scaleout-") as folder,
            common.database("postgresql", Path(folder)) as url,
        ):
            replicas = [
                Replica(Path(folder) / f"r{i}", url, args.check_interval, platform)
                for i in range(count)
            ]
            token = common.create_token(replicas[0].config)
            engine = create_engine(url)
            try:
                start_all(replicas, engine)
                figures = _stall_and_deliver(replicas, engine, token, args)
            finally:
                for replica in replicas:
                    replica.stop()
                engine.dispose()
            figures["log_problems"] = log_problems(replicas)
    finally:
        ours.send("stop")
        sent: list[tuple[float, str]] = ours.recv()
        receiver.join(timeout=30)
    return _card_figures(figures, sent, args.stalls)


def _stall_and_deliver(
    replicas: list[Replica], engine: Engine, token: str, args: argparse.Namespace
) -> common.Figures:
    started_at = datetime.now(UTC)
    headers = {"Authorization": f"Bearer {token}"}
    clients = [httpx.Client(base_url=r.url, headers=headers, timeout=30) for r in replicas]
    try:
        for i in range(args.stalls):
            response = clients[i % len(clients)].post(
                "/api/v1/runs",
                json={
                    "kind": KIND,
                    "run_id": f"stall-{i}",
                    "title": f"stall {i}",
                    "origin": {"platform": "telegram", "chat_id": str(100_000 + i)},
                    "effects": "none",
                    "budget_s": args.budget,
                    # the owner stays alive all along: the verdict is stalled, never lost
                    "lease_s": 3600,
                    "started_at": started_at.isoformat(),
                },
            )
            response.raise_for_status()
    finally:
        for client in clients:
            client.close()
    posted_s = (datetime.now(UTC) - started_at).total_seconds()
    stall_at = started_at.timestamp() + args.budget

    def settled(final: bool = False) -> list[Any] | None:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT status, claimed_by FROM deliveries WHERE purpose = 'card'")
            ).all()
        busy = any(row.status in ("pending", "sending") for row in rows)
        return rows if final or (len(rows) >= args.stalls and not busy) else None

    try:
        rows = until("every card settled", settled, args.budget + 60 + args.stalls / 20, 0.2)
    except TimeoutError:
        # Rows left pending or sending are a finding to print, not a reason to stop.
        rows = settled(final=True) or []
    return {
        "replicas": len(replicas),
        "posting_s": posted_s,
        "stalled_while_posting": posted_s > args.budget,
        "stall_at": stall_at,
        "delivery_rows": dict(Counter(row.status for row in rows)),
        "sent_by_replica": sorted(
            Counter(row.claimed_by for row in rows if row.status == "sent").values(),
            reverse=True,
        ),
    }


def _card_figures(
    figures: common.Figures, sent: list[tuple[float, str]], stalls: int
) -> common.Figures:
    stall_at = figures.pop("stall_at")
    per_chat = Counter(chat for _, chat in sent)
    expected = {str(100_000 + i) for i in range(stalls)}
    times = sorted(at for at, _ in sent)
    figures.update(
        {
            "stalls": stalls,
            "cards_received": len(sent),
            "stalls_with_a_card": len(expected & set(per_chat)),
            "missing": len(expected - set(per_chat)),
            "duplicates": sum(n - 1 for n in per_chat.values() if n > 1),
            "strangers": len(set(per_chat) - expected),
            "cards_per_stall_max": max(per_chat.values(), default=0),
        }
    )
    if times:
        figures["cards_per_s_from_stall"] = len(times) / (times[-1] - stall_at)
        figures["cards_per_s_first_to_last"] = (
            (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else float("nan")
        )
        latencies = [at - stall_at for at in times]
        figures["stall_to_first_card_s"] = latencies[0]
        figures["stall_to_card_p50_s"] = common.percentile(latencies, 50)
        figures["stall_to_card_p99_s"] = common.percentile(latencies, 99)
        figures["stall_to_last_card_s"] = latencies[-1]
    return figures


# -- 2. failover ------------------------------------------------------------------------------


def failover(args: argparse.Namespace) -> common.Figures:
    """Kill the lease holder ``args.kills`` times among 3 replicas; time each takeover."""
    with (
        tempfile.TemporaryDirectory(prefix="wk-failover-") as folder,
        common.database("postgresql", Path(folder)) as url,
    ):
        replicas = [Replica(Path(folder) / f"r{i}", url, args.check_interval, "") for i in range(3)]
        engine = create_engine(url)
        try:
            start_all(replicas, engine)
            takeovers = [_one_kill(replicas, engine) for _ in range(args.kills)]
        finally:
            for replica in replicas:
                replica.stop()
            engine.dispose()
        problems = log_problems(replicas)
    seconds = [t["seconds"] for t in takeovers]
    bound = 2 * args.check_interval
    return {
        "kills": len(takeovers),
        "check_interval_s": args.check_interval,
        "lease_ttl_s": 1.5 * args.check_interval,
        "bound_s": bound,
        "p50_s": common.percentile(seconds, 50),
        "p99_s": common.percentile(seconds, 99),
        "max_s": max(seconds),
        "min_s": min(seconds),
        "over_bound": sum(1 for s in seconds if s > bound),
        "epoch_steps": sorted(Counter(t["epoch_step"] for t in takeovers).items()),
        "takeovers": takeovers,
        "log_problems": problems,
    }


def _one_kill(replicas: list[Replica], engine: Engine) -> dict[str, Any]:
    holder, epoch = until("a leader", lambda: (held := lease(engine))[0] and held, 30)
    by_pid = {replica.pid: replica for replica in replicas}
    victim = by_pid.get(pid_of(holder))
    if victim is None:
        raise RuntimeError(f"the lease holder {holder} is none of this run's replicas")
    victim.kill()
    killed = time.monotonic()

    def moved() -> tuple[str, int] | None:
        now_holder, now_epoch = lease(engine)
        return (now_holder, now_epoch) if now_holder != holder and now_epoch > epoch else None

    new_holder, new_epoch = until("another replica to take the lease", moved, 60)
    seconds = time.monotonic() - killed
    victim.start()
    until("the restarted replica to answer /healthz", victim.healthy, 60)
    return {"seconds": seconds, "epoch_step": new_epoch - epoch, "new_holder": new_holder}


# -- the benchmark ----------------------------------------------------------------------------


LATENCIES = tuple(f"stall_to_{x}_s" for x in ("first_card", "card_p50", "card_p99", "last_card"))


def show(figures: common.Figures) -> None:
    """Print the figures."""
    for f in figures.get("throughput", []):
        common.print_table(
            f"{f['stalls']} stalls -> cards, {f['replicas']} replica(s) (PostgreSQL)",
            [
                ("cards/s, stall instant -> last card", f.get("cards_per_s_from_stall", "-")),
                ("cards/s, first card -> last card", f.get("cards_per_s_first_to_last", "-")),
                ("stall -> card first / p50 / p99 / last (s)", slash(f, *LATENCIES)),
                ("received / stalls with a card", slash(f, "cards_received", "stalls_with_a_card")),
                ("cards per stall, max (must be 1)", f["cards_per_stall_max"]),
                (
                    "duplicates / missing / strangers",
                    slash(f, "duplicates", "missing", "strangers"),
                ),
                ("delivery rows by status", f["delivery_rows"]),
                ("cards sent by each replica", f["sent_by_replica"]),
                ("posting the runs took (s)", f["posting_s"]),
            ],
        )
        unsettled = sum(n for k, n in f["delivery_rows"].items() if k in ("pending", "sending"))
        if unsettled or sum(f["delivery_rows"].values()) < f["stalls"]:
            print(f"  warning: {unsettled} rows unsettled, or cards never queued, at the timeout")
        if f["stalled_while_posting"]:
            print("  warning: posting outlasted the budget; raise --budget")
        _print_problems(f["log_problems"])
    f = figures.get("failover")
    if f:
        common.print_table(
            f"failover over {f['kills']} SIGKILLs of the leader, 3 replicas (PostgreSQL)",
            [
                ("check_interval_s / lease TTL (s)", slash(f, "check_interval_s", "lease_ttl_s")),
                (
                    "kill -> new holder min / p50 / p99 / max (s)",
                    slash(f, "min_s", "p50_s", "p99_s", "max_s", digits=3),
                ),
                ("bound: 2 x check_interval_s (s)", f["bound_s"]),
                ("takeovers over the bound", f["over_bound"]),
                ("epoch step: count", f["epoch_steps"]),
            ],
        )
        _print_problems(f["log_problems"])


def slash(f: common.Figures, *keys: str, digits: int = 2) -> str:
    """Several figures as ``a / b / c``, floats to ``digits`` decimals."""
    return " / ".join(
        f"{f[k]:.{digits}f}" if isinstance(f.get(k), float) else str(f.get(k, "-")) for k in keys
    )


def _print_problems(lines: list[str]) -> None:
    print(f"  distinct warning/error lines in the replicas' logs: {len(lines)}")
    for line in lines[:8]:
        print(f"    {line}")


def main() -> None:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").strip().splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON here")
    parser.add_argument("--replicas", default="1,2,3", help="replica counts for the cards part")
    parser.add_argument("--stalls", type=int, default=1000, help="runs that stall at one instant")
    parser.add_argument("--budget", type=float, default=30.0, help="their budget_s")
    parser.add_argument("--check-interval", type=float, default=1.0, help="check_interval_s")
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs of the leader; 0 skips")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    figures: common.Figures = {"throughput": []}
    for count in args.replicas.split(","):
        figures["throughput"].append(throughput(int(count), args))
        show({"throughput": figures["throughput"][-1:]})
    if args.kills:
        figures["failover"] = failover(args)
        show({"failover": figures["failover"]})
    payload = {
        "benchmark": "scaleout",
        "command": common.command_line(),
        "machine": common.machine(common.PG_ADMIN_URL),
        "load_average": os.getloadavg(),
        "results": figures,
    }
    common.write_json(args.json, payload)
    print(f"\ncommand: {payload['command']}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
