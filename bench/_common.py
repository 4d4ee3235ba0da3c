"""Helpers shared by the core benchmarks: databases, a real server, figures and output.

Every benchmark takes ``--db sqlite|postgresql|both`` and ``--json PATH``. With
``both``, the script runs itself once per database in a child process (so
memory figures of one database never leak into the other's) and merges the
results. Databases are always fresh: a SQLite file in a temporary folder, or a
PostgreSQL schema of the benchmark's own, created and dropped by it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
from sqlalchemy import create_engine, text

PG_ADMIN_URL = os.environ.get(
    "WATCHKEEPER_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
BACKENDS = ("sqlite", "postgresql")
Figures = dict[str, Any]


# -- command line and output -------------------------------------------------------------


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark shares."""
    result = argparse.ArgumentParser(
        description=description.strip().splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    result.add_argument("--db", choices=(*BACKENDS, "both"), default="sqlite")
    result.add_argument("--json", metavar="PATH", help="also write the figures as JSON here")
    result.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return result


def command_line() -> str:
    """The command that ran this script, as one would type it from the project folder."""
    python = os.path.relpath(sys.executable) if sys.executable.startswith(os.getcwd()) else "python"
    return shlex.join([python, os.path.relpath(sys.argv[0]), *sys.argv[1:]])


def print_table(title: str, rows: Sequence[tuple[str, object]]) -> None:
    """Print ``rows`` (label, value) as a two-column table under ``title``."""
    width = max(len(label) for label, _ in rows)
    print(f"\n{title}")
    print("-" * len(title))
    for label, value in rows:
        print(f"  {label:<{width}}  {fmt(value)}")


def fmt(value: object) -> str:
    """A figure as text: floats with three significant decimals, the rest as is."""
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def write_json(path: str | None, payload: dict[str, Any]) -> None:
    """Write ``payload`` to ``path`` when one was given."""
    if path:
        Path(path).write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")


def run_backends(
    args: argparse.Namespace,
    benchmark: str,
    measure: Callable[[str, argparse.Namespace], Figures],
    show: Callable[[str, Figures], None],
) -> dict[str, Any]:
    """Measure on each chosen database, print the figures and write the JSON result.

    ``both`` runs this same script once per database in a child process.
    """
    results: dict[str, Figures] = {}
    if args.db == "both":
        for backend in BACKENDS:
            results[backend] = _run_child(backend)
    else:
        results[args.db] = measure(args.db, args)
        show(args.db, results[args.db])
    payload = {
        "benchmark": benchmark,
        "command": command_line(),
        "machine": machine(PG_ADMIN_URL if args.db != "sqlite" else None),
        "results": results,
    }
    write_json(args.json, payload)
    if not args.child:
        print(f"\ncommand: {payload['command']}")
    return payload


def _run_child(backend: str) -> Figures:
    argv = _replace_option(_replace_option(sys.argv[1:], "--db", backend), "--json", None)
    with tempfile.TemporaryDirectory(prefix="wk-bench-") as folder:
        out = Path(folder) / "result.json"
        subprocess.run(
            [sys.executable, sys.argv[0], *argv, "--child", "--json", str(out)],
            check=True,
        )
        figures: Figures = json.loads(out.read_text(encoding="utf-8"))["results"][backend]
        return figures


def _replace_option(argv: list[str], name: str, value: str | None) -> list[str]:
    result: list[str] = []
    skip = False
    for item in argv:
        if skip:
            skip = False
            continue
        if item == name:
            skip = True
            continue
        if item.startswith(name + "="):
            continue
        result.append(item)
    return result if value is None else [*result, name, value]


# -- the machine ---------------------------------------------------------------------------


def machine(pg_url: str | None) -> dict[str, Any]:
    """What the figures were measured on."""
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
    }
    if pg_url:
        info["postgresql"] = _pg_version(pg_url)
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _pg_version(url: str) -> str:
    try:
        engine = create_engine(url)
        with engine.connect() as conn:
            version = str(conn.execute(text("SHOW server_version")).scalar_one())
        engine.dispose()
    except Exception as exc:  # noqa: BLE001 - the version is informative only
        return f"unreachable ({type(exc).__name__})"
    return version


# -- memory and statistics ----------------------------------------------------------------


def rss_mb() -> float:
    """This process's resident set size now, in MB."""
    return psutil.Process().memory_info().rss / 1e6


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MB (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values`` by the nearest-rank method."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


# -- databases -------------------------------------------------------------------------------


@contextmanager
def database(backend: str, folder: Path) -> Iterator[str]:
    """A fresh, empty database URL: a SQLite file in ``folder`` or a PostgreSQL schema."""
    if backend == "sqlite":
        yield f"sqlite:///{folder / 'data' / 'watchkeeper.db'}"
        return
    schema = f"wk_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{PG_ADMIN_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def settings_for(folder: Path, db_url: str, **overrides: Any) -> Any:
    """Validated settings with the data folder in ``folder`` and the given database."""
    from watchkeeper import config

    raw: dict[str, Any] = {"data_dir": str(folder / "data"), "database_url": db_url}
    raw.update(overrides)
    return config.parse(raw, "benchmark settings")


# -- a real server ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """A ``watchkeeper serve`` process on loopback and a reporter token for it."""

    base_url: str
    token: str
    log: Path
    pid: int

    @property
    def headers(self) -> dict[str, str]:
        """The authorization header for the token."""
        return {"Authorization": f"Bearer {self.token}"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("WATCHKEEPER_DATABASE_URL", None)
    env.pop("WATCHKEEPER_CONFIG", None)
    return env


def write_config(folder: Path, db_url: str, port: int, check_interval_s: float) -> Path:
    """A ``watchkeeper.toml`` with its data folder in ``folder``."""
    path = folder / "watchkeeper.toml"
    path.write_text(
        f'data_dir = "{folder / "data"}"\n'
        f'database_url = "{db_url}"\n'
        f"check_interval_s = {check_interval_s}\n"
        f'[server]\nhost = "127.0.0.1"\nport = {port}\n',
        encoding="utf-8",
    )
    return path


def _cli(config_path: Path) -> list[str]:
    return [sys.executable, "-m", "watchkeeper", "--config", str(config_path)]


def create_token(config_path: Path, role: str = "reporter") -> str:
    """Create a token in the configuration's store (made first when new) and return its secret.

    ``token create`` asks a server unless it is given ``--store``; the benches create
    tokens before their server starts, so they name the store the server will use.
    """
    import tomllib

    configured = tomllib.loads(config_path.read_text(encoding="utf-8"))
    store = configured.get("database_url") or configured.get("data_dir") or str(config_path.parent)
    for argv in (
        ["db", "upgrade"],
        ["token", "create", "--role", role, "--name", "bench", "--store", store],
    ):
        done = subprocess.run(
            [*_cli(config_path), *argv],
            capture_output=True,
            text=True,
            check=True,
            env=_clean_env(),
        )
    for line in done.stdout.splitlines():
        if line.strip().startswith("wk_"):
            return line.strip()
    raise RuntimeError(f"no token in the output of token create: {done.stdout!r}")


@contextmanager
def serve(db_url: str, folder: Path, *, check_interval_s: float = 30.0) -> Iterator[Server]:
    """Run ``watchkeeper serve`` on a free loopback port until the block ends."""
    port = free_port()
    config_path = write_config(folder, db_url, port, check_interval_s)
    token = create_token(config_path)
    log = folder / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*_cli(config_path), "serve"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_clean_env(),
        )
        base_url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(base_url, process, log)
            yield Server(base_url, token, log, process.pid)
        finally:
            _stop(process)


def _wait_ready(base_url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited early:\n{log.read_text(errors='replace')}")
        try:
            httpx.get(f"{base_url}/healthz", timeout=1.0)
        except httpx.TransportError:
            time.sleep(0.1)
            continue
        return
    raise RuntimeError(f"the server did not answer within 30 s:\n{log.read_text()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def start_runs(
    client: httpx.Client, kind: str, run_ids: Sequence[str], **fields: Any
) -> list[dict[str, Any]]:
    """Start ``run_ids`` of ``kind`` over the API; returns the stored runs."""
    started = []
    for run_id in run_ids:
        response = client.post(
            "/api/v1/runs", json={"kind": kind, "run_id": run_id, "title": run_id, **fields}
        )
        response.raise_for_status()
        started.append(response.json())
    return started


def serve_json_answers(
    conn: Any, answer: Callable[[str, bytes], dict[str, Any]], finish: Callable[[], object]
) -> None:
    """A bare JSON HTTP server from raw asyncio streams, for a child process of a benchmark.

    It measures our side, not a fake's: each request is answered with
    ``answer(path, body)``. Its URL goes out on ``conn``; once ``conn`` says
    stop, ``finish()`` goes back on it.
    """
    import asyncio  # the child's own loop; the benchmarks themselves are synchronous

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                raw = await reader.readexactly(length)
                body = json.dumps(answer(head.split(b" ", 2)[1].decode(), raw)).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
        conn.send(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        await asyncio.to_thread(conn.recv)
        conn.send(finish())
        server.close()

    asyncio.run(main())
