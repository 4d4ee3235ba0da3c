"""How long ``watchkeeper mcp`` takes to answer an agent's ``initialize``, side by side with
``python -c pass``.

    .venv/bin/python bench/mcp_startup.py [-n 15] [--json PATH]

Agents start the stdio server once per session, so its start-up is paid again and
again. Each sample spawns a new process, writes the ``initialize`` request an agent
client sends first to its standard input and stops the clock when the answer's line
arrives on its standard output (then closes its input, and the server exits). The
package's bytecode is compiled first, as installing it does. Besides
``watchkeeper mcp`` (the installed script, as an agent client's configuration
starts it), it times the MCP SDK alone answering ``initialize`` (a bare low-level
server on stdio, no tools): the part of the start-up that is the SDK's own, which no
server built on it can go below. No server needs to answer for ``initialize``:
``WATCHKEEPER_URL`` names a port nobody listens on.

A round runs every variant once, back to back, so a busy spell slows each alike;
each prints its median, spread and median over ``python -c pass`` in milliseconds.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import watchkeeper

PYTHON = sys.executable
#: The console script users run, next to this interpreter (``-m`` when it is not installed).
SCRIPT = Path(PYTHON).with_name("watchkeeper")
COMMAND = (str(SCRIPT),) if SCRIPT.exists() else (PYTHON, "-m", "watchkeeper")
#: The MCP SDK's own floor: its low-level server on stdio, answering nothing but the handshake.
SDK_ALONE = """
import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

server = Server("floor")

async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def answered(argv: Sequence[str], env: dict[str, str]) -> float:
    """Milliseconds from spawning ``argv`` to its answer to ``initialize``."""
    request = (json.dumps(INITIALIZE) + "\n").encode()
    began = time.perf_counter()
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(request)
    process.stdin.flush()
    line = process.stdout.readline()
    took = (time.perf_counter() - began) * 1000
    process.stdin.close()
    process.wait(timeout=30)
    if json.loads(line or b"{}").get("id") != 1:
        raise SystemExit(f"{' '.join(argv)} did not answer initialize: {line!r}")
    return took


def bare(env: dict[str, str]) -> float:
    """Milliseconds of one ``python -c pass``."""
    began = time.perf_counter()
    subprocess.run([PYTHON, "-c", "pass"], env=env, check=True)
    return (time.perf_counter() - began) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=15, help="rounds (default 15)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    compileall.compile_dir(Path(watchkeeper.__file__).parent, quiet=1)
    env = {**os.environ, "WATCHKEEPER_URL": f"http://127.0.0.1:{free_port()}"}
    env.pop("WATCHKEEPER_TOKEN", None)
    variants = {
        "python -c pass": lambda: bare(env),
        "watchkeeper mcp": lambda: answered([*COMMAND, "mcp"], env),
        "the MCP SDK alone": lambda: answered([PYTHON, "-c", SDK_ALONE], env),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.n):
        for name, measure in variants.items():
            samples[name].append(measure())
    base = statistics.median(samples["python -c pass"])
    figures = {
        name: {
            "median_ms": round(statistics.median(taken), 1),
            "min_ms": round(min(taken), 1),
            "max_ms": round(max(taken), 1),
            "over_python_ms": round(statistics.median(taken) - base, 1),
        }
        for name, taken in samples.items()
    }
    print(
        f"{'':<20} {'median':>8} {'min':>8} {'max':>8} {'over python':>12}  (ms, {args.n} rounds)"
    )
    for name, row in figures.items():
        print(
            f"{name:<20} {row['median_ms']:>8} {row['min_ms']:>8} {row['max_ms']:>8}"
            f" {row['over_python_ms']:>12}"
        )
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps({"rounds": args.n, "figures": figures}, indent=2))


if __name__ == "__main__":
    main()
