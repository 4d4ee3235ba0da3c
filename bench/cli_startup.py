"""How long the ``watchkeeper`` command takes to start: ``runs`` against a live local server,
``--help``, and a bare ``python -c pass`` measured in the same run for comparison.

    .venv/bin/python bench/cli_startup.py [-n 15]

It starts ``watchkeeper serve`` on a fresh data folder and a free port, then
runs each command N times as a user would (a new process each time) and prints
the median and the spread in milliseconds, as text and as JSON (``--json PATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

PYTHON = sys.executable
WK = (PYTHON, "-m", "watchkeeper")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def timed(argv: Sequence[str], env: dict[str, str], n: int) -> dict[str, float]:
    """Median, min and max wall time in ms of ``n`` runs of ``argv`` (each must exit 0)."""
    samples = []
    for _ in range(n):
        began = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        samples.append((time.perf_counter() - began) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()}")
    return {
        "median_ms": round(statistics.median(samples), 1),
        "min_ms": round(min(samples), 1),
        "max_ms": round(max(samples), 1),
    }


def serve(folder: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str, str]:
    """A real server on a fresh data folder: the process, its URL and its first admin token."""
    config = folder / "watchkeeper.toml"
    config.write_text('data_dir = "data"\n')
    port = free_port()
    process = subprocess.Popen(
        [*WK, "--config", str(config), "serve", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    assert process.stdout is not None
    token = ""
    for line in process.stdout:
        if line.strip().startswith("wk_"):
            token = line.strip()
        if "watchkeeper serving on" in line:
            break
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return process, url, token
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the server did not answer /healthz within 30 s")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure and print; returns the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=15, help="runs of each command (default 15)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    base = {k: v for k, v in os.environ.items() if not k.startswith("WATCHKEEPER_")}
    with tempfile.TemporaryDirectory(prefix="wk-cli-startup-") as tmp:
        process, url, token = serve(Path(tmp), base)
        try:
            env = {**base, "WATCHKEEPER_URL": url, "WATCHKEEPER_TOKEN": token, "COLUMNS": "120"}
            figures = {
                "python -c pass": timed((PYTHON, "-c", "pass"), env, args.n),
                "watchkeeper --help": timed((*WK, "--help"), env, args.n),
                "watchkeeper runs": timed((*WK, "runs"), env, args.n),
            }
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)
    result = {"n": args.n, "python": sys.version.split()[0], "figures": figures}
    for name, figure in figures.items():
        print(f"{name:<22} median {figure['median_ms']:7.1f} ms"
              f"  (min {figure['min_ms']:.1f}, max {figure['max_ms']:.1f})")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
