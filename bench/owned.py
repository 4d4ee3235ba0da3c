"""Owned work runs once: a partitioned task's two runs never overlap, a killed runner's task ends.

What it measures, on real processes (``watchkeeper serve`` on a fresh database,
real ``watchkeeper runner`` processes, real shims and commands, real signals):

1. **Overlap of a partitioned task's two runs** (``--trials`` times). Runner A
   reaches the server through a loopback TCP proxy of the benchmark's own;
   one task (``--lease`` seconds) is submitted, and its command appends
   ``start <time>`` to a file of the trial's own, and ``end <time>`` when
   SIGTERM reaches it. Once A runs it, runner B starts (directly, no proxy),
   then A's proxy is cut: A can no longer renew, the lease lapses on the
   server, B leases the task and runs it again. Overlap is
   ``max(0, A_end - B_start)`` and must be 0: A stops its command a margin
   before the lease it could not renew lapses. Also printed: how long before
   the server's lease expiry A's command ended, and from A's end to B's start.
   A's command is also watched with psutil every 5 ms, in case SIGTERM never
   reached its trap.
2. **The same with a frozen runner** (``freeze``): instead of the cut, runner A
   is stopped with SIGSTOP (as a debugger or a stuck runtime would stop it), and SIGCONT once B ran
   the task. A can do nothing; its task's shim, told of every renewal, stops
   the command by itself before the lease lapses.
3. **SIGKILL of a runner to its task's processes gone** (``--trials`` times):
   a runner runs a task whose command (``sh``) has a child (``sleep``); the
   runner is killed with SIGKILL and psutil is polled every 5 ms until the
   command and its child are gone (a zombie counts as gone), then until the
   shim is gone too. The shim gets a parent-death signal and ends the
   command's group.

Against an export of another commit (``git archive``), point ``PYTHONPATH`` at its
``src``: the runners pass it on to their tasks, so the shims are that commit's too.

Run::

    .venv/bin/python bench/owned.py --trials 20 --db both --json owned.json
    .venv/bin/python bench/owned.py --trials 2                  # a quick try
"""

from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psutil

import _common as common

POLL_S = 0.005
WAIT_S = 60.0
ENV_DROPPED = ("WATCHKEEPER_DATABASE_URL", "WATCHKEEPER_CONFIG", "WATCHKEEPER_URL")
# Appends "start <time> <pid>", and "end <time> <pid>" when SIGTERM arrives, to argv[1].
TRAPPED = (
    "import os, signal, sys, time\n"
    "def note(word):\n"
    "    with open(sys.argv[1], 'a') as f:\n"
    "        f.write(f'{word} {time.time():.6f} {os.getpid()}\\n')\n"
    "def end(*_):\n"
    "    note('end'); os._exit(0)\n"
    "signal.signal(signal.SIGTERM, end)\n"
    "note('start')\n"
    "while True: time.sleep(3600)\n"
)


# -- a proxy that can be cut --------------------------------------------------------------------


class Proxy:
    """Forwards a loopback port to ``target``; :meth:`cut` closes every link, refuses new ones."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._cut = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        """Close every connection now and refuse new ones."""
        self._cut.set()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self._open.clear()

    def close(self) -> None:
        """Cut, and stop listening."""
        self.cut()
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, upstream))
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()

    def _pipe(self, client: socket.socket, upstream: socket.socket) -> None:
        peers = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            while not self._cut.is_set():
                for key, _ in selector.select(timeout=0.2):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    try:
                        data = source.recv(65536)
                        if data:
                            peers[source].sendall(data)
                    except OSError:
                        data = b""
                    if not data:
                        self._cut_pair(peers)
                        return
        self._cut_pair(peers)

    def _cut_pair(self, peers: dict[socket.socket, socket.socket]) -> None:
        with self._lock:
            for sock in peers:
                self._open.discard(sock)
                with contextlib.suppress(OSError):
                    sock.close()


# -- runners and tasks ------------------------------------------------------------------------


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ENV_DROPPED}


@contextlib.contextmanager
def runner(
    folder: Path, url: str, token: str, fleet: str, name: str
) -> Iterator[subprocess.Popen[bytes]]:
    """A ``watchkeeper runner`` process for the block; SIGTERM (then SIGKILL) at its end."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{name}.log"
    argv = [sys.executable, "-m", "watchkeeper", "--config", str(folder / "watchkeeper.toml"),
            "runner", "--fleet", fleet, "--name", name, "--server", url, "--token", token,
            "--data-dir", str(folder / name), "--poll-interval", "0.1",
            "--heartbeat-interval", "1"]  # fmt: skip
    if "PYTHONPATH" in os.environ:
        # A run against an export of another commit: its shims must be that commit's too.
        argv += ["--pass-env", "PYTHONPATH"]
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=_env())
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def submit(admin: httpx.Client, fleet: str, argv: list[str], lease_s: float) -> tuple[str, str]:
    """Queue one task; returns its job's and its own id."""
    response = admin.post(
        "/api/v1/jobs",
        json={"title": "owned", "org": "bench", "fleet": fleet, "payload": {"argv": argv},
              "lease_s": lease_s, "max_attempts": 3},
    )  # fmt: skip
    response.raise_for_status()
    job = response.json()
    return str(job["id"]), str(job["tasks"][0]["id"])


def lines(path: Path) -> list[tuple[str, float, int]]:
    """The (word, time, pid) lines a trapped command wrote so far."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    found = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3:
            found.append((parts[0], float(parts[1]), int(parts[2])))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def until(what: str, check: Any, timeout: float = WAIT_S) -> Any:
    """Poll ``check`` every 5 ms until it returns something true; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(POLL_S)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def epoch(text: str | None) -> float | None:
    """An API time (RFC 3339) as seconds since the epoch."""
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# -- 1. overlap ------------------------------------------------------------------------------


def overlap_trial(
    server: common.Server,
    admin: httpx.Client,
    folder: Path,
    n: int,
    lease_s: float,
    freeze: bool = False,
) -> dict[str, Any]:
    """One partition: A runs the task behind a proxy that is cut (or A is frozen by SIGSTOP),
    B runs it again."""  # fmt: skip
    trial = folder / f"{'freeze' if freeze else 'overlap'}-{n}"
    trial.mkdir()
    notes = trial / "notes"
    fleet = trial.name
    target = ("127.0.0.1", int(server.base_url.rsplit(":", 1)[1]))
    proxy = Proxy(target)
    try:
        with runner(folder, f"http://127.0.0.1:{proxy.port}", server.token, fleet, f"a{n}") as a:
            _, task_id = submit(admin, fleet, [sys.executable, "-c", TRAPPED, str(notes)], lease_s)
            a_pid = until("A's command to start", lambda: [p for w, _, p in lines(notes)
                                                            if w == "start"])[0]  # fmt: skip
            with runner(folder, server.base_url, server.token, fleet, f"b{n}") as b:
                until("runner B to register", lambda: b"serves fleet" in
                      (folder / f"b{n}.log").read_bytes())  # fmt: skip
                if freeze:
                    a.send_signal(signal.SIGSTOP)
                else:
                    proxy.cut()
                cut_at = time.time()
                try:
                    figures = _watch_partition(admin, task_id, notes, a_pid, cut_at, lease_s)
                finally:
                    a.send_signal(signal.SIGCONT)
                figures["a_exit"], figures["b_exit"] = a.poll(), b.poll()
    finally:
        proxy.close()
    return figures


def _watch_partition(
    admin: httpx.Client, task_id: str, notes: Path, a_pid: int, cut_at: float, lease_s: float
) -> dict[str, Any]:
    a_gone: float | None = None
    expiry: float | None = None
    b_start: tuple[float, int] | None = None
    deadline = time.monotonic() + WAIT_S
    while b_start is None and time.monotonic() < deadline:
        if a_gone is None and not alive(a_pid):
            a_gone = time.time()
            task = admin.get(f"/api/v1/tasks/{task_id}").json()
            if task["status"] == "running" and task["attempt"] == 1:
                expiry = epoch(task["lease_expires_at"])
        b_start = next(((t, p) for w, t, p in lines(notes) if w == "start" and p != a_pid), None)
        time.sleep(POLL_S)
    if b_start is None:
        raise TimeoutError(f"no second run within {WAIT_S:.0f} s of the cut")
    outlived = False
    if a_gone is None:
        # A's command still runs beside B's: an overlap; see how long it lasts, within reason.
        try:
            until("A's command to go", lambda: not alive(a_pid), 2 * lease_s + 10)
        except TimeoutError:
            outlived = True
        a_gone = time.time()
    a_end = next((t for w, t, p in lines(notes) if w == "end" and p == a_pid), None)
    a_stop = a_end if a_end is not None else a_gone
    return {
        "overlap_s": max(0.0, a_stop - b_start[0]),
        "overlap_seen_s": max(0.0, a_gone - b_start[0]),
        "a_trapped_end": a_end is not None,
        "a_outlived_the_wait": outlived,
        "cut_to_a_stop_s": a_stop - cut_at,
        "a_stop_before_expiry_s": None if expiry is None else expiry - a_stop,
        "a_stop_to_b_start_s": b_start[0] - a_stop,
    }


def overlap(server: common.Server, admin: httpx.Client, folder: Path,
            args: argparse.Namespace, freeze: bool = False) -> common.Figures:  # fmt: skip
    """``args.trials`` partitions (or freezes); the overlap of each task's two runs."""
    try:
        trials = [overlap_trial(server, admin, folder, n, args.lease, freeze)
                  for n in range(args.trials)]  # fmt: skip
    except TimeoutError as exc:
        raise RuntimeError(f"{exc}\n{_log_tails(folder)}") from None
    figures: common.Figures = {"trials": len(trials), "lease_s": args.lease}
    for key in ("overlap_s", "overlap_seen_s", "cut_to_a_stop_s", "a_stop_before_expiry_s",
                "a_stop_to_b_start_s"):  # fmt: skip
        values = [t[key] for t in trials if t[key] is not None]
        figures[key] = _spread(values)
    figures["overlapping_trials"] = sum(1 for t in trials if t["overlap_s"] > 0)
    figures["trapped_ends"] = sum(1 for t in trials if t["a_trapped_end"])
    figures["a_outlived"] = sum(1 for t in trials if t["a_outlived_the_wait"])
    figures["each"] = trials
    return figures


# -- 2. kill -----------------------------------------------------------------------------------


def kill_trial(server: common.Server, admin: httpx.Client, folder: Path, n: int) -> dict[str, Any]:
    """SIGKILL a runner mid-task; time until its command and the command's child are gone."""
    pids = folder / f"kill-{n}.pids"
    fleet = f"kill-{n}"
    command = ["sh", "-c", f'sleep 600 & echo "$$ $!" > {pids}.tmp; mv {pids}.tmp {pids}; wait']
    with runner(folder, server.base_url, server.token, fleet, f"k{n}") as process:
        job_id, _ = submit(admin, fleet, command, 60.0)
        until("the task's command and its child", pids.exists)
        owned = [int(p) for p in pids.read_text(encoding="utf-8").split()]
        shims = [c.pid for c in psutil.Process(process.pid).children()]
        process.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        seconds = _gone_after(owned, killed)
        shim_seconds = _gone_after(shims, killed) if seconds is not None else None
        left = [pid for pid in owned + shims if alive(pid)]
        for pid in left:  # ours to clean up: started by this trial's runner
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()
    admin.post(f"/api/v1/jobs/{job_id}/cancel").raise_for_status()
    return {"seconds": seconds, "shim_seconds": shim_seconds, "left_after_30_s": len(left)}


def _gone_after(pids: list[int], since: float) -> float | None:
    """Seconds from ``since`` until none of ``pids`` is alive; None if some outlive 30 s."""
    try:
        until("processes to go", lambda: not any(map(alive, pids)), 30)
    except TimeoutError:
        return None
    return time.monotonic() - since


def kills(server: common.Server, admin: httpx.Client, folder: Path,
          args: argparse.Namespace) -> common.Figures:  # fmt: skip
    """``args.trials`` runner kills; the time until each task's processes are gone."""
    try:
        trials = [kill_trial(server, admin, folder, n) for n in range(args.trials)]
    except TimeoutError as exc:
        raise RuntimeError(f"{exc}\n{_log_tails(folder)}") from None
    seconds = [t["seconds"] for t in trials if t["seconds"] is not None]
    shims = [t["shim_seconds"] for t in trials if t["shim_seconds"] is not None]
    return {
        "trials": len(trials),
        "gone_s": _spread(seconds),
        "shim_gone_s": _spread(shims),
        "left_behind": sum(1 for t in trials if t["seconds"] is None),
        "each": trials,
    }


# -- the benchmark -----------------------------------------------------------------------------


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "min": min(values),
        "p50": common.percentile(values, 50),
        "p99": common.percentile(values, 99),
        "max": max(values),
    }


def measure(backend: str, args: argparse.Namespace) -> common.Figures:
    """Both measurements on one server with a fresh database."""
    with (
        tempfile.TemporaryDirectory(prefix="wk-owned-") as tmp,
        common.database(backend, Path(tmp)) as url,
        common.serve(url, Path(tmp)) as server,
    ):
        folder = Path(tmp)
        admin_token = common.create_token(folder / "watchkeeper.toml", "admin")
        headers = {"Authorization": f"Bearer {admin_token}"}
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as admin:
            figures: common.Figures = {"load_at_start": os.getloadavg()}
            if "overlap" in args.parts:
                figures["overlap"] = overlap(server, admin, folder, args)
            if "freeze" in args.parts:
                figures["freeze"] = overlap(server, admin, folder, args, freeze=True)
            if "kill" in args.parts:
                figures["kill"] = kills(server, admin, folder, args)
            figures["load_at_end"] = os.getloadavg()
            figures["runner_problems"] = _problems(folder)
    return figures


def _problems(folder: Path) -> list[str]:
    """Error lines of every log, each traceback with the exception it ended in, once each."""
    seen: dict[str, None] = {}
    for log in sorted(folder.glob("*.log")):
        lines = log.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if "ERROR" in line or "CRITICAL" in line:
                seen.setdefault(f"{log.name}: {line.strip()[:200]}", None)
            elif line.startswith("Traceback"):
                # The exception is the first unindented line after the frames.
                end = next((j for j in range(i + 1, len(lines)) if not lines[j][:1].isspace()), i)
                where = [x.strip() for x in lines[i + 1 : end] if x.strip().startswith("File")]
                raised = lines[end].strip()[:200]
                seen.setdefault(f"{log.name}: {raised} (at {' < '.join(where[-3:])})", None)
    return list(seen)


def _log_tails(folder: Path) -> str:
    """The last lines of every log, to say why a trial stalled."""
    tails = []
    for log in sorted(folder.glob("*.log")):
        text = log.read_text(errors="replace").splitlines()[-15:]
        tails.append(f"--- {log.name}\n" + "\n".join(text))
    return "\n".join(tails)


def _ms(spread: dict[str, float], *keys: str) -> str:
    return " / ".join(f"{spread[k] * 1000:.1f}" for k in keys) if spread else "-"


def show(backend: str, figures: common.Figures) -> None:
    """Print the figures of one database."""
    for part, title in (("overlap", "partitioned"), ("freeze", "frozen runner's (SIGSTOP)")):
        if figures.get(part):
            _show_overlap(backend, title, figures[part])
    _show_kills(backend, figures)


def _show_overlap(backend: str, title: str, o: common.Figures) -> None:
    common.print_table(
        f"{title} task, {o['trials']} trials, lease {o['lease_s']} s ({backend})",
        [
            ("overlap A_end - B_start max / p50 (ms, must be 0)",
             _ms(o["overlap_s"], "max", "p50")),
            ("trials with any overlap", o["overlapping_trials"]),
            ("overlap by psutil (A's command gone) max (ms)", _ms(o["overlap_seen_s"], "max")),
            ("A's trap wrote its end (trials)", o["trapped_ends"]),
            (f"A's command still ran {2 * o['lease_s'] + 10:.0f} s after B's started (trials)",
             o["a_outlived"]),
            ("cut -> A stops min / p50 / max (ms)",
             _ms(o["cut_to_a_stop_s"], "min", "p50", "max")),
            ("A stops before the server's lease expiry min / p50 / max (ms)",
             _ms(o["a_stop_before_expiry_s"], "min", "p50", "max")),
            ("A stops -> B starts min / p50 / max (ms)",
             _ms(o["a_stop_to_b_start_s"], "min", "p50", "max")),
        ],
    )  # fmt: skip


def _show_kills(backend: str, figures: common.Figures) -> None:
    k = figures.get("kill")
    if k:
        common.print_table(
            f"runner SIGKILL -> task's command and child gone, {k['trials']} trials ({backend})",
            [
                ("min / p50 / p99 / max (ms)", _ms(k["gone_s"], "min", "p50", "p99", "max")),
                (
                    "the shim gone too, min / p50 / p99 / max (ms)",
                    _ms(k["shim_gone_s"], "min", "p50", "p99", "max"),
                ),
                ("trials with processes left after 30 s", k["left_behind"]),
            ],
        )
    load = " ".join(f"{x:.2f}" for x in figures["load_at_start"])
    print(f"  load average at start: {load}; at end: "
          f"{' '.join(f'{x:.2f}' for x in figures['load_at_end'])}")  # fmt: skip
    print(f"  error lines in the server's and runners' logs: {len(figures['runner_problems'])}")
    for line in figures["runner_problems"][:8]:
        print(f"    {line}")


def main() -> None:
    """Parse the options and run."""
    parser = common.parser(__doc__ or "")
    parser.add_argument("--trials", type=int, default=20, help="trials of each measurement")
    parser.add_argument("--lease", type=float, default=4.0, help="the task's lease_s (seconds)")
    parser.add_argument(
        "--parts",
        default="overlap,freeze,kill",
        help="which measurements, comma-separated: overlap, freeze, kill",
    )
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    common.run_backends(args, "owned", measure, show)


if __name__ == "__main__":
    main()
