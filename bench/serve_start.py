"""What ``watchkeeper serve`` costs from its start to its first answers, side by side with the
code of another commit.

    .venv/bin/python bench/serve_start.py [--rounds 5] [--before-src /tmp/wk-before/src]

Each round starts ``serve`` on a fresh SQLite data folder and a free port (each side in turn,
the order alternating), waits for ``/healthz``, then asks one path of each part of the server
(the API, the dashboard, a path nothing answers) as a newcomer's browser and CLI would. It
prints, per side, min / median / max of the wall time to ``/healthz``, of the server's CPU
until then, and of its CPU once the paths are answered (what a test that starts a server pays,
and what a restart after a crash costs before it serves). ``--before-src`` is the ``src``
folder of the other commit (``git archive COMMIT src | tar -x -C /tmp/wk-before``).
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from _common import command_line, free_port, parser, print_table

FIRST_PATHS = ["/api/v1/incidents", "/api/v1/programs", "/web/login", "/web/nowhere", "/metrics"]


def one_start(src: Path | None) -> tuple[float, float, float]:
    """Wall seconds to /healthz, CPU seconds then, CPU seconds after the first paths."""
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        config = Path(folder) / "watchkeeper.toml"
        config.write_text(f'data_dir = "{folder}/data"\n', encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("WATCHKEEPER_")}
        env["PYTHONDONTWRITEBYTECODE"] = ""
        if src is not None:
            env["PYTHONPATH"] = str(src)
        argv = [sys.executable, "-m", "watchkeeper", "--config", str(config), "serve"]
        started = time.perf_counter()
        process = subprocess.Popen(
            [*argv, "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            watched = psutil.Process(process.pid)
            url = f"http://127.0.0.1:{port}"
            deadline = started + 60
            while True:
                if process.poll() is not None:
                    raise SystemExit(f"serve exited with {process.returncode}")
                if time.perf_counter() > deadline:
                    raise SystemExit("serve did not answer /healthz within 60 s")
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.02)
            healthy = time.perf_counter() - started
            cpu = watched.cpu_times()
            at_health = cpu.user + cpu.system
            for path in FIRST_PATHS:
                httpx.get(url + path, timeout=10)
            cpu = watched.cpu_times()
            return healthy, at_health, cpu.user + cpu.system
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--rounds", type=int, default=5)
    args.add_argument("--before-src", type=Path, help="the src folder of the code to compare")
    options = args.parse_args()
    sides: dict[str, Path | None] = {"watchkeeper": None}
    if options.before_src:
        sides["watchkeeper-before"] = options.before_src.resolve()
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sides}
    for round_ in range(options.rounds):
        order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
        for name in order:
            figures[name].append(one_start(sides[name]))
    print(command_line())
    for name, rows in figures.items():
        columns = list(zip(*rows, strict=True))
        print_table(
            f"{name}, {options.rounds} starts (min / median / max)",
            [
                (label, " / ".join(f"{v:.2f}" for v in spread(values)))
                for label, values in zip(
                    ("to /healthz (s)", "CPU until /healthz (s)", "CPU after the first paths (s)"),
                    columns,
                    strict=True,
                )
            ],
        )


def spread(values: tuple[float, ...]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


if __name__ == "__main__":
    main()
