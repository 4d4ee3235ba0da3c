"""Several real ``watchkeeper serve`` replicas on one PostgreSQL schema, for the cluster tests.

Each replica is its own process with its own data folder, port and log file;
all of them share one fresh schema, one fake Telegram (cards go to a chat per
run, so per-chat pacing never slows a test down) and one action service
(presses call it). The tests read the shared tables directly to know who leads
and what each replica wrote, and drive the work over the HTTP API.
"""

from __future__ import annotations

import signal
import subprocess
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, create_engine, text

from watchkeeper.store import Store
from watchkeeper.store.tokens import Role

from ..integration.fakes.telegram import TOKEN, WEBHOOK_SECRET, FakeTelegram
from . import patient_http
from .cli import WK, cli_env
from .live_server import free_port
from .serving import healthy
from .waiting import wait_for

#: Short, so the lease lasts 1.5 s and a dead leader is replaced within 2 s.
CHECK_INTERVAL_S = 1.0
#: A push kind whose runs stall one second after their last progress.
KIND = "relay"
BUDGET_S = 1.0
#: Replicas start in a few seconds; a loaded machine gets this long.
START_TIMEOUT_S = 60.0


@contextmanager
def fresh_schema(admin_url: str) -> Iterator[str]:
    """A migrated PostgreSQL schema of its own on the server of ``admin_url``; dropped at the end.

    Yields the URL whose connections use that schema (and carry its name as
    ``application_name``, to tell them apart on the server).
    """
    schema = f"wk_cluster_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_url)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = f"{admin_url}?options=-csearch_path%3D{schema}&application_name={schema}"
    try:
        Store(url).close()
        yield url
    finally:
        with admin.begin() as conn:
            # Connections of killed replicas may linger for a moment; they must not hold the drop.
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = :name AND pid <> pg_backend_pid()"
                ),
                {"name": schema},
            )
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def config_text(database_url: str, telegram_url: str, action_url: str) -> str:
    """One replica's ``watchkeeper.toml``: the shared database, chat and action service."""
    return (
        f'data_dir = "data"\n'
        f"check_interval_s = {CHECK_INTERVAL_S}\n"
        f'database_url = "{database_url}"\n'
        f"[telegram]\n"
        f'bot_token = "{TOKEN}"\n'
        f'base_url = "{telegram_url}"\n'
        f'webhook_secret = "{WEBHOOK_SECRET}"\n'
        f"timeout_s = 5\n"
        f"[kinds.{KIND}]\n"
        f"budget_s = {BUDGET_S}\n"
        f"[kinds.{KIND}.actions.cancel]\n"
        f'url = "{action_url}/cancel/{{run_id}}"\n'
    )


class Replica:
    """One ``watchkeeper serve`` process; it can be started again after it stopped or died."""

    def __init__(self, index: int, folder: Path, config: str) -> None:
        self.index = index
        self.folder = folder
        folder.mkdir()
        self.config = folder / "watchkeeper.toml"
        self.config.write_text(config)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "serve.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def __repr__(self) -> str:
        return f"replica {self.index} (pid {self.pid})"

    @property
    def pid(self) -> int | None:
        """The current process's id, or ``None`` before the first start."""
        return None if self.process is None else self.process.pid

    @property
    def running(self) -> bool:
        """Whether the process exists and has not exited (a paused one is running)."""
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the process (the previous one must have ended); its output goes to the log."""
        assert not self.running, f"{self} is still running"
        self.starts += 1
        with self.log.open("ab") as sink:
            sink.write(f"--- start {self.starts}\n".encode())
            sink.flush()
            self.process = subprocess.Popen(
                [*WK, "--config", str(self.config), "serve", "--port", str(self.port)],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=cli_env({"PYTHONUNBUFFERED": "1"}),
            )

    def wait_healthy(self) -> None:
        """Block until the process answers ``/healthz``; fails with its log if it exits first."""

        def answering() -> bool:
            if not self.running:
                raise AssertionError(f"{self} exited early:\n{self.log_tail()}")
            return healthy(self.url)

        wait_for(answering, what=f"{self} answering /healthz", timeout=START_TIMEOUT_S)

    def stop(self) -> None:
        """A clean stop (SIGTERM), resumed first if paused; killed if it does not end."""
        if not self.running:
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.sigkill()

    def sigkill(self) -> None:
        """Kill the process outright, as a crash or an OOM kill would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def sigstop(self) -> None:
        """Pause the process (a long GC pause, a frozen VM): it keeps its sockets, does nothing."""
        assert self.process is not None and self.running
        self.process.send_signal(signal.SIGSTOP)

    def sigcont(self) -> None:
        """Resume a paused process."""
        assert self.process is not None and self.running
        self.process.send_signal(signal.SIGCONT)

    def log_tail(self, lines: int = 40) -> str:
        """The end of the process's output, for failure messages."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


@dataclass(frozen=True)
class Lease:
    """The leader lease row as stored."""

    holder: str | None
    epoch: int
    expires_at: float


class Cluster:
    """N replicas on one schema, the tables they share, and the API they serve."""

    def __init__(
        self, root: Path, database_url: str, telegram: FakeTelegram, action_url: str
    ) -> None:
        self.root = root
        self.database_url = database_url
        self.telegram = telegram
        self.action_url = action_url
        self.engine: Engine = create_engine(database_url, pool_size=2)
        store = Store(database_url, migrate=False)
        try:
            self.token = store.tokens.create(Role.ADMIN, "cluster tests", datetime.now(UTC))[1]
        finally:
            store.close()
        self.replicas: list[Replica] = []

    # -- processes --------------------------------------------------------------------------

    def start(self, count: int) -> list[Replica]:
        """Start ``count`` more replicas and wait until each answers and beats its heartbeat."""
        config = config_text(self.database_url, self.telegram.url, self.action_url)
        added = []
        for _ in range(count):
            index = len(self.replicas)
            replica = Replica(index, self.root / f"replica{index}", config)
            self.replicas.append(replica)
            replica.start()
            added.append(replica)
        for replica in added:
            self.wait_member(replica)
        return added

    def restart(self, replica: Replica) -> None:
        """Start a stopped or killed replica again and wait until it is a member."""
        replica.start()
        self.wait_member(replica)

    def wait_member(self, replica: Replica) -> str:
        """Block until ``replica`` answers and its current process beat; its replica name."""
        replica.wait_healthy()
        name = wait_for(
            lambda: self.name_of(replica), what=f"{replica} in cluster_members", timeout=30
        )
        assert name is not None
        return name

    def close(self) -> None:
        """Stop every replica (killing what will not stop) and let the schema go."""
        for replica in self.replicas:
            if replica.running and replica.process is not None:
                replica.process.send_signal(signal.SIGCONT)
                replica.process.send_signal(signal.SIGTERM)
        for replica in self.replicas:
            if replica.process is None:
                continue
            try:
                replica.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                replica.sigkill()
        self.engine.dispose()

    def alive(self) -> list[Replica]:
        """Replicas whose process runs."""
        return [r for r in self.replicas if r.running]

    # -- the shared tables -------------------------------------------------------------------

    def rows(self, sql: str, **params: Any) -> Sequence[Any]:
        """Every row of one query on the shared schema."""
        with self.engine.connect() as conn:
            return conn.execute(text(sql), params).all()

    def scalar(self, sql: str, **params: Any) -> Any:
        """The one value of one query on the shared schema."""
        with self.engine.connect() as conn:
            return conn.execute(text(sql), params).scalar()

    def execute(self, sql: str, **params: Any) -> None:
        """One write on the shared schema, committed."""
        with self.engine.begin() as conn:
            conn.execute(text(sql), params)

    def lease(self) -> Lease | None:
        """The leader lease, or ``None`` before any replica took it."""
        found = self.rows("SELECT holder, epoch, expires_at FROM cluster_lease")
        return None if not found else Lease(found[0][0], int(found[0][1]), float(found[0][2]))

    def name_of(self, replica: Replica) -> str | None:
        """The replica name the current process beats under, once it has beaten."""
        if replica.pid is None:
            return None
        found = self.scalar(
            "SELECT replica FROM cluster_members WHERE pid = :pid ORDER BY started_at DESC",
            pid=replica.pid,
        )
        return None if found is None else str(found)

    def by_name(self, name: str | None) -> Replica | None:
        """The running replica whose current process beats under ``name``."""
        return next((r for r in self.alive() if name and self.name_of(r) == name), None)

    def leader(self, *, timeout: float = 30) -> tuple[Replica, Lease]:
        """Wait until a running replica holds an unexpired lease; that replica and the lease."""

        def held() -> tuple[Replica, Lease] | None:
            lease = self.lease()
            if lease is None or lease.holder is None:
                return None
            replica = self.by_name(lease.holder)
            return None if replica is None else (replica, lease)

        found = wait_for(held, what="a running replica holding the lease", timeout=timeout)
        assert found is not None
        return found

    def beat_at(self, name: str) -> float | None:
        """When the replica named ``name`` last beat its lease tick."""
        value = self.scalar("SELECT beat_at FROM cluster_members WHERE replica = :n", n=name)
        return None if value is None else float(value)

    def last_sweep_at(self, name: str) -> float | None:
        """When the replica named ``name`` last recorded a sweep."""
        value = self.scalar("SELECT last_sweep_at FROM watch_heartbeats WHERE replica = :n", n=name)
        return None if value is None else float(value)

    def wait_sweeps(self, name: str, count: int) -> None:
        """Block until the replica named ``name`` recorded ``count`` more sweeps."""
        _wait_moves(lambda: self.last_sweep_at(name), count, f"sweep by {name}")

    def wait_ticks(self, name: str, count: int) -> None:
        """Block until the replica named ``name`` beat ``count`` more lease ticks."""
        _wait_moves(lambda: self.beat_at(name), count, f"lease tick by {name}")

    def opened_events(self) -> Counter[str]:
        """How many ``opened`` events each run's incidents have."""
        found = self.rows(
            "SELECT i.run_id, count(*) FROM incident_events e JOIN incidents i "
            "ON i.id = e.incident_id WHERE e.type = 'opened' GROUP BY i.run_id"
        )
        return Counter({str(run): int(n) for run, n in found})

    def card_deliveries(self) -> Counter[str]:
        """How many card deliveries each run's incidents have."""
        found = self.rows(
            "SELECT i.run_id, count(*) FROM deliveries d JOIN incidents i "
            "ON i.id = d.incident_id WHERE d.purpose = 'card' GROUP BY i.run_id"
        )
        return Counter({str(run): int(n) for run, n in found})

    # -- the API ------------------------------------------------------------------------------

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, via: Replica | None
    ) -> httpx.Response:
        """One API call to ``via``, or to the first running replica that answers."""
        headers = {"Authorization": f"Bearer {self.token}"}
        candidates = [via] if via is not None else self.alive()
        problem: Exception | None = None
        for replica in candidates:
            try:
                return patient_http.request(
                    method, replica.url + path, json=body, headers=headers, timeout=10
                )
            except httpx.HTTPError as exc:  # that replica died or is paused: try the next
                problem = exc
        raise AssertionError(f"no replica answered {method} {path}: {problem}")

    def stall(self, run_id: str, chat_id: int, *, via: Replica | None = None) -> None:
        """Start a run from Telegram chat ``chat_id`` and report progress once; it then stalls."""
        started = self.call(
            "POST",
            "/api/v1/runs",
            {
                "kind": KIND,
                "run_id": run_id,
                "title": f"relay {run_id}",
                "effects": "none",
                "origin": {"platform": "telegram", "chat_id": str(chat_id)},
                # Its owner stays alive however long a loaded machine takes: the run stays
                # stalled and never turns stuck, which would be a new condition and card.
                "lease_s": 86400,
            },
            via=via,
        )
        assert started.status_code in (200, 201), started.text
        moved = self.call(
            "POST", f"/api/v1/runs/{KIND}/{run_id}/progress", {"step": "one step"}, via=via
        )
        assert moved.status_code == 200, moved.text

    def incident_of(self, run_id: str) -> dict[str, Any] | None:
        """The live incident of ``run_id`` as the API shows it, or ``None``."""
        answer = self.call("GET", "/api/v1/incidents?status=live", via=None)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        items = body["incidents"] if isinstance(body, dict) else body
        return next((i for i in items if i["run_id"] == run_id), None)

    def press(self, run_id: str, action: str, *, via: Replica | None = None) -> httpx.Response:
        """Press ``action`` on the live incident of ``run_id`` with the state token it shows."""
        incident = self.incident_of(run_id)
        assert incident is not None, f"no live incident for {run_id}"
        return self.call(
            "POST",
            f"/api/v1/incidents/{incident['id']}/decide",
            {"action": action, "state_token": incident["state_token"]},
            via=via,
        )

    # -- the chat -----------------------------------------------------------------------------

    def cards(self) -> Counter[str]:
        """How many cards (messages that answer none) the fake Telegram holds in each chat."""
        with self.telegram.lock:
            return Counter(
                {
                    str(chat): count
                    for chat, items in self.telegram.chats.items()
                    if (count := sum(1 for item in items if item.reply_to is None))
                }
            )

    def sends(self, *, cards_only: bool = True) -> Counter[str]:
        """How many ``sendMessage`` calls, accepted or not, reached each chat.

        Only cards unless told otherwise: notes threaded under a card (a move, an
        action's outcome) are part of its life, not a second card.
        """
        with self.telegram.lock:
            return Counter(
                str(call.body.get("chat_id"))
                for call in self.telegram.calls
                if call.method == "sendMessage" and not (cards_only and _replies(call.body))
            )

    def sent_to(self, chats: list[str]) -> list[tuple[str, object, str]]:
        """Every ``sendMessage`` to ``chats``: chat, the message it answers, its first words."""
        with self.telegram.lock:
            return [
                (
                    str(call.body.get("chat_id")),
                    _replies(call.body),
                    str(call.body.get("text"))[:80],
                )
                for call in self.telegram.calls
                if call.method == "sendMessage" and str(call.body.get("chat_id")) in chats
            ]

    def notes_sent_twice(self) -> list[tuple[str, object, str]]:
        """Threaded notes whose chat, card and words reached the fake more than once."""
        with self.telegram.lock:
            notes = Counter(
                (str(call.body.get("chat_id")), _replies(call.body), str(call.body.get("text")))
                for call in self.telegram.calls
                if call.method == "sendMessage" and _replies(call.body)
            )
        return [note for note, count in notes.items() if count > 1]

    def logs(self) -> str:
        """Every replica's log tail, for a failure message."""
        return "\n".join(f"== {r}\n{r.log_tail()}" for r in self.replicas)


def _replies(body: dict[str, Any]) -> object:
    """The message a ``sendMessage`` answers, if it is a threaded note."""
    return (body.get("reply_parameters") or {}).get("message_id") or body.get("reply_to_message_id")


def _wait_moves(read: Callable[[], float | None], count: int, what: str) -> None:
    """Block until the time ``read`` gives has moved forward ``count`` times."""
    for step in range(count):
        before = read() or 0.0
        wait_for(
            lambda b=before: (read() or 0.0) > b,  # type: ignore[misc]
            what=f"{what} ({step + 1} of {count})",
            timeout=30,
        )


def chat_for(number: int) -> int:
    """A distinct Telegram group id for the ``number``-th stall."""
    return -1_001_000_000_000 - number
