"""How long the ``watchkeeper`` command takes to start, side by side with ``python -c pass``:
``--version``, ``runs``, ``status RUN``, ``report progress`` and ``report heartbeat`` against
a live local server, and ``run -- true`` on a local store beside a bare ``true`` (and
``run --budget 1h -- true``, which the fast path reads too, and
``run --origin telegram:1 -- true``, a form it leaves to the full command line).

    .venv/bin/python bench/cli_startup.py [-n 15]

It compiles the package's bytecode first, as installing it does, then starts
``watchkeeper serve`` on a fresh data folder and a free port, starts a process
run and reports a run there, then runs every command once per round, N rounds, each as a
user would (a new process of the installed ``watchkeeper`` script). A round runs all of
them back to back, so a busy spell slows every command alike. It prints each one's median,
spread and median over ``python -c pass`` in milliseconds, as text and as JSON (``--json``),
and what ``run -- true`` adds to a bare ``true``.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
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

import watchkeeper

PYTHON = sys.executable
WK = (PYTHON, "-m", "watchkeeper")
#: The console script users run, next to this interpreter (``-m`` when it is not installed).
SCRIPT = Path(PYTHON).with_name("watchkeeper")
COMMAND = (str(SCRIPT),) if SCRIPT.exists() else WK


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def once(argv: Sequence[str], env: dict[str, str]) -> float:
    """Wall time in ms of one run of ``argv``, which must exit 0."""
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    took = (time.perf_counter() - began) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()}")
    return took


def rounds(
    commands: dict[str, Sequence[str]],
    env: dict[str, str],
    n: int,
    envs: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    """``n`` rounds of every command once (in ``env``, or its own of ``envs``); per command
    the median, min and max in ms and the median over the first command's (the yardstick)."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(n):
        for name, argv in commands.items():
            samples[name].append(once(argv, (envs or {}).get(name, env)))
    base = statistics.median(samples[next(iter(commands))])
    return {
        name: {
            "median_ms": round(statistics.median(taken), 1),
            "min_ms": round(min(taken), 1),
            "max_ms": round(max(taken), 1),
            "over_python_ms": round(statistics.median(taken) - base, 1),
        }
        for name, taken in samples.items()
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


def prepare(folder: Path, env: dict[str, str]) -> tuple[str, str]:
    """A finished process run in the server's store and a run reported to it: their ids."""
    config = str(folder / "watchkeeper.toml")
    started = subprocess.run(
        [*COMMAND, "--config", config, "run", "--detach", "--", "true"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    subprocess.run(
        [*COMMAND, "report", "start", "crawl", "start-up", "--run-id", "r-start-up"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return started.stdout.strip(), "r-start-up"


def local_store(folder: Path, env: dict[str, str]) -> str:
    """A configuration whose store (apart from the server's) exists and is migrated: its path.

    The first ``run`` makes and migrates the store; every measured one finds it ready.
    """
    folder.mkdir()
    config = folder / "watchkeeper.toml"
    config.write_text('data_dir = "data"\n')
    subprocess.run(
        [*COMMAND, "--config", str(config), "run", "--", "true"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return str(config)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure and print; returns the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=15, help="rounds (default 15)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    # An installed package has its bytecode (pip compiles it); an editable checkout
    # under PYTHONDONTWRITEBYTECODE would compile every module on every run.
    compileall.compile_dir(str(Path(watchkeeper.__file__).parent), quiet=1)
    base = {k: v for k, v in os.environ.items() if not k.startswith("WATCHKEEPER_")}
    with tempfile.TemporaryDirectory(prefix="wk-cli-startup-") as tmp:
        process, url, token = serve(Path(tmp), base)
        try:
            env = {**base, "WATCHKEEPER_URL": url, "WATCHKEEPER_TOKEN": token, "COLUMNS": "120"}
            proc_run, run_id = prepare(Path(tmp), env)
            config = str(Path(tmp) / "watchkeeper.toml")
            # No server named: `run` records in the local store (a server named or answering at
            # the default URL would record it; the default URL answers nothing here).
            alone = {
                k: v for k, v in env.items() if k not in {"WATCHKEEPER_URL", "WATCHKEEPER_TOKEN"}
            }
            local = local_store(Path(tmp) / "local", alone)
            true = shutil.which("true") or "true"
            runs_alone = ("watchkeeper run -- true", "run --budget 1h -- true",
                          "run --origin telegram:1 -- true")  # fmt: skip
            figures = rounds(
                {
                    "python -c pass": (PYTHON, "-c", "pass"),
                    "true": (true,),
                    "watchkeeper --version": (*COMMAND, "--version"),
                    "watchkeeper runs": (*COMMAND, "runs"),
                    "watchkeeper status RUN": (*COMMAND, "--config", config, "status", proc_run),
                    "watchkeeper report progress": (
                        *COMMAND, "report", "progress", "crawl", run_id, "--step", "a step"
                    ),
                    "watchkeeper report heartbeat": (
                        *COMMAND, "report", "heartbeat", "crawl", run_id
                    ),
                    "watchkeeper run -- true": (*COMMAND, "--config", local, "run", "--", true),
                    "run --budget 1h -- true": (
                        *COMMAND, "--config", local, "run", "--budget", "1h", "--", true
                    ),
                    # An option only the full command reads: what every run cost before.
                    "run --origin telegram:1 -- true": (
                        *COMMAND, "--config", local, "run", "--origin", "telegram:1", "--", true
                    ),
                    # WATCHKEEPER_URL set: recorded on the server, run and reported here.
                    "run -- true, on the server": (*COMMAND, "run", "--", true),
                },
                env,
                args.n,
                dict.fromkeys(runs_alone, alone),
            )  # fmt: skip
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)
    result = {"n": args.n, "python": sys.version.split()[0], "figures": figures}
    print(f"{args.n} rounds; milliseconds")
    print(f"{'command':<33} {'median':>7} {'min':>7} {'max':>7} {'over python':>12}")
    for name, figure in figures.items():
        print(f"{name:<33} {figure['median_ms']:7.1f} {figure['min_ms']:7.1f}"
              f" {figure['max_ms']:7.1f} {figure['over_python_ms']:+12.1f}")  # fmt: skip
    over_true = figures["watchkeeper run -- true"]["median_ms"] - figures["true"]["median_ms"]
    result["run_over_true_ms"] = round(over_true, 1)
    print(f"{'run -- true over bare true':<33} {over_true:+7.1f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
