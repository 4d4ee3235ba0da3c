"""Where a circuit breaker keeps its state, so several processes can share one.

A store offers two primitives, ``load`` and ``compare_and_set``; the breaker
builds every transition from them and never holds a lock across the protected
call. ``InMemoryStateStore`` serves one process; ``FileStateStore`` shares state
between processes on one host through an fcntl-locked JSON file. A database
store only has to implement the same two methods.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import json
import logging
import os
import socket
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Protocol, runtime_checkable

import psutil

logger = logging.getLogger(__name__)


class CircuitState(enum.StrEnum):
    """The three states of a circuit breaker."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class Prober:
    """The process that holds a half-open probe: its host, pid and start time."""

    host: str
    pid: int
    started: float

    @classmethod
    def this_process(cls) -> Prober:
        """This process (read once per pid, so a forked child names itself)."""
        pid = os.getpid()
        me = _ME.get(pid)
        if me is None:
            me = _ME[pid] = cls(socket.gethostname(), pid, psutil.Process(pid).create_time())
        return me

    def gone(self) -> bool:
        """Whether this prober is certainly dead: on this host, and its pid is free,
        a zombie, or now another process (a different start time).

        A prober on another host, or one we may not look at, is never taken
        for dead: a live probe must not be counted as failed.
        """
        me = Prober.this_process()
        if self.host != me.host:
            return False
        if self.pid == me.pid:
            return not _same_start(self.started, me.started)
        try:
            process = psutil.Process(self.pid)
            with process.oneshot():  # every refused caller asks: one read of /proc
                if process.status() == psutil.STATUS_ZOMBIE:
                    return True
                return not _same_start(self.started, process.create_time())
        except psutil.NoSuchProcess:
            return True
        except psutil.Error:
            return False

    @classmethod
    def from_json(cls, data: object) -> Prober | None:
        """The prober in a stored state, or ``None`` if none (or unreadable) is named."""
        if not isinstance(data, dict):
            return None
        host, pid, started = data.get("host"), data.get("pid"), data.get("started")
        if isinstance(host, str) and isinstance(pid, int) and isinstance(started, int | float):
            return cls(host, pid, float(started))
        return None


_ME: dict[int, Prober] = {}


def _same_start(a: float, b: float) -> bool:
    # Start times are clock ticks (1/100 s) after boot; allow for float rounding only.
    return abs(a - b) < 0.005


@dataclass(frozen=True)
class BreakerState:
    """One breaker's shared state.

    ``opened_at`` is when the circuit opened (OPEN; for a probe that ran past its
    probe timeout, that deadline) or when the single probe was let through
    (HALF_OPEN), on the breaker's clock. ``version`` grows by one on
    every successful compare-and-set. ``prober`` names the process holding
    the probe (HALF_OPEN), so that others can tell when it died mid-probe.
    """

    state: CircuitState = CircuitState.CLOSED
    failure_count: int = 0
    opened_at: float | None = None
    version: int = 0
    prober: Prober | None = None

    def as_dict(self) -> dict[str, object]:
        """The state as a JSON object (what a file store keeps)."""
        return {**asdict(self), "state": self.state.value}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> BreakerState:
        opened = data.get("opened_at")
        count = data.get("failure_count", 0)
        version = data.get("version", 0)
        return cls(
            state=CircuitState(str(data.get("state", "closed"))),
            failure_count=int(count) if isinstance(count, int | float) else 0,
            opened_at=float(opened) if isinstance(opened, int | float) else None,
            version=int(version) if isinstance(version, int | float) else 0,
            prober=Prober.from_json(data.get("prober")),
        )


_INITIAL = BreakerState()


@runtime_checkable
class BreakerStateStore(Protocol):
    """Persistence of breaker state: one load, one atomic compare-and-set."""

    def load(self, name: str) -> BreakerState:
        """The current state of breaker ``name`` (CLOSED and version 0 if unknown)."""

    def compare_and_set(
        self, name: str, expected: BreakerState, new: BreakerState
    ) -> BreakerState | None:
        """Store ``new`` if the stored version still equals ``expected.version``.

        Returns the stored state (with its new version) or ``None`` if another
        caller changed it first.
        """


class InMemoryStateStore:
    """State shared by the breakers of one process."""

    def __init__(self) -> None:
        self._states: dict[str, BreakerState] = {}
        self._lock = threading.Lock()

    def load(self, name: str) -> BreakerState:
        return self._states.get(name, _INITIAL)

    def compare_and_set(
        self, name: str, expected: BreakerState, new: BreakerState
    ) -> BreakerState | None:
        with self._lock:
            current = self._states.get(name, _INITIAL)
            if current.version != expected.version:
                return None
            stored = replace(new, version=current.version + 1)
            self._states[name] = stored
            return stored


class FileStateStore:
    """State shared by processes on one host: a JSON file, written under ``flock``.

    Readers never lock: writers replace the file atomically by rename, so a
    reader sees either the old or the new content. Writers serialise on an
    exclusive ``flock`` of a sibling ``.lock`` file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def load(self, name: str) -> BreakerState:
        data = self._read_all().get(name)
        return BreakerState.from_json(data) if isinstance(data, dict) else BreakerState()

    def compare_and_set(
        self, name: str, expected: BreakerState, new: BreakerState
    ) -> BreakerState | None:
        with self._locked():
            everything = self._read_all()
            raw = everything.get(name)
            current = BreakerState.from_json(raw) if isinstance(raw, dict) else BreakerState()
            if current.version != expected.version:
                return None
            stored = replace(new, version=current.version + 1)
            everything[name] = stored.as_dict()
            self._write_all(everything)
            return stored

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    def _read_all(self) -> dict[str, object]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            logger.warning(
                "breaker state file %s is not valid JSON; treating every breaker as closed",
                self.path,
                exc_info=True,
                extra={"action": "load_breaker_state"},
            )
            return {}
        return data if isinstance(data, dict) else {}

    def _write_all(self, everything: dict[str, object]) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(everything, fh)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
