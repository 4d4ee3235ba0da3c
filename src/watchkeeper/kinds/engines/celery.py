"""The ``celery`` engine kind: a Celery app's tasks, read from its workers and result backend.

Options (in ``[kinds.NAME]``)::

    engine = "celery"
    url = "redis://127.0.0.1:6379/0"       # the broker
    backend = "redis://127.0.0.1:6379/1"   # the result backend, when not the broker

What is read, as Flower reads it but without a standing event consumer:

- the workers' ``inspect active`` replies (the pidbox broadcast, Celery's own control API):
  what each live worker runs, since when, with which arguments; a worker that replies lives;
- the Redis result backend (``celery-task-meta-*``, found with SCAN): each task's state, its
  ``update_state`` meta (the progress), how it failed, when it ended.

A task moves when its state or meta changes (the backend dates only a task's end, so the
adapter notes when it first saw each change). A task the backend shows started whose
worker no longer lists it in two reads in a row has lost its worker: stuck.

Cancel revokes with ``terminate`` (and, for a task no live worker holds, records it revoked
in the backend, as the worker would); Retry sends the same task with the same arguments
again, under the same id when nothing runs it, else under a new one after terminating the
running copy.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from watchkeeper.config import KindConfig
from watchkeeper.contract import (
    Action,
    Failure,
    Owner,
    OwnerKind,
    RunStatus,
    RunView,
    fingerprint,
)
from watchkeeper.errors import ConfigError, KindUnreadable
from watchkeeper.kinds.actions import ActionFailed, ActionRequest
from watchkeeper.kinds.base import FINISHED_WINDOW, Adapter, AdapterContext
from watchkeeper.kinds.engines import _redis
from watchkeeper.kinds.engines._common import (
    EngineOptions,
    Moves,
    Strikes,
    epoch,
    short,
    shown_url,
)

if TYPE_CHECKING:
    from celery import Celery

META_PREFIX = "celery-task-meta-"
_ENDED = {
    "SUCCESS": RunStatus.SUCCEEDED,
    "FAILURE": RunStatus.FAILED,
    "REVOKED": RunStatus.CANCELLED,
}
#: Waiting for its countdown to run again: queued, not judged.
_QUEUED = {"RETRY", "PENDING", "RECEIVED"}
_OWN_ACTIONS = frozenset({Action.CANCEL, Action.RETRY})
#: How long a listed task may show no state here before its results are proved elsewhere.
_UNSTATED_PROOF = timedelta(minutes=1)
#: Where a decoded meta keeps the digest of its stored bytes.
_LOOK = "__watchkeeper_look"


class CeleryOptions(EngineOptions):
    """The ``celery`` kind's options."""

    backend: str | None = None
    #: How long the workers are given to answer ``inspect active``.
    inspect_timeout_s: float = 1.0


@dataclass(frozen=True, slots=True)
class Reply:
    """What the live workers said: who answered, and what each runs."""

    workers: frozenset[str]
    active: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)


class CeleryAdapter(Adapter):
    """Reads a Celery app's tasks; cancels and retries through Celery's own API."""

    adapter_name = "celery"

    def __init__(self, name: str, config: KindConfig, context: AdapterContext) -> None:
        super().__init__(name, config, context)
        self.settings = self.options(CeleryOptions)
        self.backend_url = self.settings.backend or self.settings.url
        if not self.backend_url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigError(
                f"kinds.{name}.backend = {shown_url(self.backend_url)!r}: watchkeeper reads "
                "Celery's Redis result backend; set backend to the redis:// URL the app stores "
                "results at"
            )
        self._app: Celery | None = None
        self._app_lock = threading.Lock()
        self._moves = Moves()
        self._strikes = Strikes()
        #: Each running task's name, arguments and queue, as its worker last listed them.
        self._calls: dict[str, dict[str, Any]] = {}
        #: Workers that answered before: an inspect returns once each of them has.
        self._known_workers: set[str] = set()
        self._backend_checked = False
        self._conf: dict[str, Mapping[str, Any]] = {}
        #: Tasks the workers list with no state in the backend read, and since when.
        self._unstated: dict[str, datetime] = {}

    @property
    def app(self) -> Celery:
        """A Celery app of watchkeeper's own on the user's broker and backend; no tasks."""
        with self._app_lock:
            if self._app is None:
                from celery import Celery

                app = Celery("watchkeeper", broker=self.settings.url, backend=self.backend_url)
                app.conf.update(
                    broker_connection_retry=False,
                    broker_connection_retry_on_startup=False,
                    broker_connection_max_retries=1,
                    broker_connection_timeout=_redis.SOCKET_TIMEOUT_S,
                    redis_socket_timeout=_redis.SOCKET_TIMEOUT_S,
                    redis_socket_connect_timeout=_redis.SOCKET_TIMEOUT_S,
                    redis_retry_on_timeout=False,
                    result_backend_always_retry=False,
                    broker_transport_options={
                        "socket_timeout": _redis.SOCKET_TIMEOUT_S,
                        "socket_connect_timeout": _redis.SOCKET_TIMEOUT_S,
                        "max_retries": 1,
                    },
                )
                self._app = app
            return self._app

    def close(self) -> None:
        """Release the broker's and the backend's connections."""
        if self._app is not None:
            self._app.close()

    # -- reading -----------------------------------------------------------------------

    def read(self, now: datetime) -> Sequence[RunView]:
        """Every task the backend or a live worker shows, active or ended within a day."""
        metas = self._backend_metas()
        reply = self._inspect()
        if not self._backend_checked:
            self._check_backend(reply, metas, now)
        views: list[RunView] = []
        listed: dict[str, tuple[str, Mapping[str, Any]]] = {
            info["id"]: (worker, info) for worker, infos in reply.active.items() for info in infos
        }
        # A task that ended between the backend's read and the workers' answer looks held by
        # nobody for one read; the next read finds it ended, so it never gets a second strike.
        for task_id, (worker, info) in listed.items():
            self._calls[task_id] = _call_of(info)
            views.append(self._running_view(task_id, metas.get(task_id), worker, info, now))
        for task_id, meta in metas.items():
            if task_id in listed:
                continue
            view = self._backend_view(task_id, meta, reply, now)
            if view is not None:
                views.append(view)
        running = [v.run_id for v in views if not v.status.ended]
        self._moves.keep_only(running)
        self._strikes.keep_only(running)
        for task_id in [t for t in self._calls if t not in metas and t not in listed]:
            del self._calls[task_id]
        return views

    def _backend_metas(self, only: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        conn = self.app.backend.client
        with _redis.reading("Celery's result backend", self.backend_url):
            if only is None:
                keys = _redis.scan(conn, f"{META_PREFIX}*")
            else:
                keys = [f"{META_PREFIX}{task_id}".encode() for task_id in only]
            values = _redis.get_many(conn, keys)
        metas: dict[str, dict[str, Any]] = {}
        for key, raw in zip(keys, values, strict=True):
            if raw is None:
                continue
            meta = self._decode(raw)
            if meta is not None:
                # What the task looks like: its state and meta, as stored (progress changes it).
                meta[_LOOK] = hashlib.blake2b(raw, digest_size=8).hexdigest()
                task_id = key.decode() if isinstance(key, bytes) else key
                metas[meta.get("task_id") or task_id.removeprefix(META_PREFIX)] = meta
        return metas

    def _decode(self, raw: bytes) -> dict[str, Any] | None:
        try:
            decoded = json.loads(raw)
        except ValueError:
            try:
                decoded = self.app.backend.decode_result(raw)
            except Exception:  # noqa: BLE001 - a value of another serializer is skipped, not fatal
                return None
        return decoded if isinstance(decoded, dict) else None

    def _inspect(self) -> Reply:
        app = self.app
        try:
            with app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=_redis.SOCKET_TIMEOUT_S)
                limit = len(self._known_workers) or None
                inspect = app.control.inspect(
                    timeout=self.settings.inspect_timeout_s, connection=conn, limit=limit
                )
                active = inspect.active() or {}
        except Exception as exc:  # noqa: BLE001 - kombu raises many kinds; each means "away"
            raise KindUnreadable(
                f"cannot reach Celery's broker at {shown_url(self.settings.url)}: {exc}"
            ) from None
        self._known_workers = set(active)
        return Reply(frozenset(active), active)

    def _check_backend(self, reply: Reply, metas: Mapping[str, Any], now: datetime) -> None:
        """Say plainly when the app stores no results where watchkeeper reads them.

        Only on proof: the workers name no result backend, or they name another one *and*
        a task they have listed for a minute has no state here though they track started
        tasks. A URL that differs only by name (a proxy, a container's host name) reaches
        the same server, so a different spelling alone proves nothing.
        """
        if self.settings.backend is not None or metas:
            self._backend_checked = True
            return
        if not reply.workers:
            return
        conf = self._workers_conf()
        stored = {str(c.get("result_backend") or "") for c in conf.values()}
        if conf and stored <= {"", "disabled"}:
            raise KindUnreadable(
                "the Celery app has no result backend, where watchkeeper reads task states, "
                "progress and failures: set result_backend (and task_track_started = True) "
                f"in the app, e.g. result_backend = {self.backend_url!r}"
            )
        elsewhere = sorted(s for s in stored if s and s != "disabled")
        ours = _redis_location(self.backend_url)
        if not elsewhere or any(_redis_location(s) == ours for s in elsewhere):
            self._backend_checked = bool(conf)
            return
        tracked = any(c.get("task_track_started") for c in conf.values())
        listed = {info["id"] for infos in reply.active.values() for info in infos}
        self._unstated = {t: self._unstated.get(t, now) for t in listed}
        if tracked and any(now - since >= _UNSTATED_PROOF for since in self._unstated.values()):
            self._backend_checked = True
            raise KindUnreadable(
                f"the Celery workers store results at {elsewhere[0]}, not at "
                f"{shown_url(self.backend_url)}: set kinds.{self.name}.backend to it"
            )

    def _workers_conf(self) -> dict[str, Mapping[str, Any]]:
        """The live workers' configuration, asked again when other workers answer."""
        if set(self._conf) != set(self._known_workers):
            try:
                replies = self.app.control.inspect(timeout=self.settings.inspect_timeout_s).conf()
            except Exception:  # noqa: BLE001 - this check is advice; the read itself stands
                replies = None
            self._conf = {w: c for w, c in (replies or {}).items() if isinstance(c, dict)}
        return self._conf

    def _running_view(
        self,
        task_id: str,
        meta: Mapping[str, Any] | None,
        worker: str,
        info: Mapping[str, Any],
        now: datetime,
    ) -> RunView:
        self._strikes.orphaned(task_id, False)
        started = epoch(info.get("time_start"))
        state = str(meta.get("status")) if meta else "STARTED"
        look = _look(state, meta)
        progressed = self._moves.seen(task_id, look, now, _first_move(state, now))
        owner = Owner(OwnerKind.RUNNER, worker, True)
        return RunView(
            kind=self.name,
            run_id=task_id,
            title=str(info.get("name") or (meta or {}).get("name") or task_id),
            status=RunStatus.RUNNING,
            state_token=f"{look}:{worker}",
            owner=owner,
            progress_at=progressed,
            started_at=started,
            effects=self.settings.effects_value,
            step=_step(state, meta),
        )

    def _backend_view(
        self, task_id: str, meta: Mapping[str, Any], reply: Reply, now: datetime
    ) -> RunView | None:
        state = str(meta.get("status") or "PENDING")
        status = _status_of(state)
        finished = epoch(meta.get("date_done")) if status.ended else None
        if finished is not None and finished < now - FINISHED_WINDOW:
            return None
        result = meta.get("result")
        owner = Owner()
        progressed = None
        look = _look(state, meta)
        if status is RunStatus.RUNNING:
            holder = _holder(meta)
            orphan = self._strikes.orphaned(task_id, True)
            owner = Owner(OwnerKind.RUNNER, holder, False if orphan else None)
            progressed = self._moves.seen(task_id, look, now, _first_move(state, now))
        failure = None
        if status is RunStatus.FAILED:
            reason = _failure_reason(result, meta.get("traceback"))
            failure = Failure(reason, fingerprint(reason))
        return RunView(
            kind=self.name,
            run_id=task_id,
            title=str(meta.get("name") or self._calls.get(task_id, {}).get("name") or task_id),
            status=status,
            state_token=f"{look}:{owner.alive}",
            owner=owner,
            progress_at=progressed,
            finished_at=finished,
            effects=self.settings.effects_value,
            failure=failure,
            step=_step(state, meta),
        )

    # -- acting ------------------------------------------------------------------------

    def capabilities(self) -> frozenset[Action]:
        """Cancel and Retry are Celery's own (revoke, send again)."""
        return super().capabilities() | _OWN_ACTIONS

    def perform(self, request: ActionRequest) -> str:
        """Revoke, or send the same task again, through the app's broker."""
        if request.action is Action.CANCEL:
            return self._cancel(request.run_id)
        if request.action in (Action.RETRY, Action.RETRY_CHECKED):
            return self._retry(request.run_id)
        return super().perform(request)

    def _running_on(self, task_id: str) -> str | None:
        for worker, infos in self._inspect().active.items():
            if any(info.get("id") == task_id for info in infos):
                return worker
        return None

    def _cancel(self, task_id: str) -> str:
        app = self.app
        worker = self._running_on(task_id)
        try:
            app.control.revoke(task_id, terminate=True, signal="SIGTERM")
            if worker is None:
                # No live worker holds it to record the revoke: record it as the worker would.
                app.backend.mark_as_revoked(task_id, "cancelled from watchkeeper")
        except Exception as exc:
            raise ActionFailed(
                f"revoking Celery task {task_id} failed: {exc}", "Celery could not be reached"
            ) from exc
        if worker is None:
            return f"revoked task {task_id} (no live worker held it)"
        return f"revoked task {task_id} and terminated it on {worker}"

    def _retry(self, task_id: str) -> str:
        call = self._call(task_id)
        worker = self._running_on(task_id)
        new_id = task_id
        try:
            if worker is not None:
                # Still held: stop that copy first; a revoked id is never run again.
                self.app.control.revoke(task_id, terminate=True, signal="SIGTERM")
                new_id = str(uuid.uuid4())
            self.app.send_task(
                call["name"],
                args=call.get("args") or [],
                kwargs=call.get("kwargs") or {},
                task_id=new_id,
                queue=call.get("queue"),
            )
        except Exception as exc:
            raise ActionFailed(
                f"sending Celery task {task_id} again failed: {exc}", "Celery could not be reached"
            ) from exc
        if new_id == task_id:
            return f"sent {call['name']} again as {task_id}"
        return f"terminated {task_id} on {worker} and sent {call['name']} again as {new_id}"

    def _call(self, task_id: str) -> dict[str, Any]:
        known = self._calls.get(task_id)
        if known is None:
            metas = self._backend_metas([task_id])
            meta = metas.get(task_id, {})
            if meta.get("name"):
                known = {
                    "name": meta["name"],
                    "args": meta.get("args"),
                    "kwargs": meta.get("kwargs"),
                    "queue": meta.get("queue"),
                }
        if known is None:
            raise ActionFailed(
                f"cannot send Celery task {task_id} again: its name and arguments are not known "
                "(set result_extended = True in the app, so the result backend keeps them)",
                "its name and arguments are not known: set result_extended = True in the "
                "Celery app",
            )
        return known

    def evidence(self, run_id: str) -> dict[str, str]:
        """The task's name, arguments and state as Celery holds them."""
        facts: dict[str, str] = {}
        call = self._calls.get(run_id)
        if call:
            facts["task"] = str(call.get("name"))
            facts["arguments"] = short([call.get("args"), call.get("kwargs")])
        meta = self._backend_metas([run_id]).get(run_id)
        if meta:
            facts["state"] = str(meta.get("status"))
            if meta.get("traceback"):
                facts["traceback"] = short(str(meta["traceback"])[-1500:], 1500)
        return facts


def _status_of(state: object) -> RunStatus:
    text = str(state or "PENDING")
    if text in _ENDED:
        return _ENDED[text]
    if text in _QUEUED:
        return RunStatus.QUEUED
    return RunStatus.RUNNING  # STARTED, PROGRESS and every custom update_state state


def _first_move(state: str, now: datetime) -> datetime | None:
    # A task already reporting progress when first read gets the benefit of the doubt; one
    # that only started is judged from its start.
    return None if state == "STARTED" else now


def _look(state: str, meta: Mapping[str, Any] | None) -> str:
    # The STARTED record only restates the start (its worker's pid and host), and a worker
    # may list the task before it is stored: both look alike, or storing it would be a move.
    return "STARTED" if meta is None or state == "STARTED" else str(meta[_LOOK])


def _holder(meta: Mapping[str, Any]) -> str | None:
    result = meta.get("result")
    if isinstance(result, dict) and result.get("hostname"):
        return str(result["hostname"])
    worker = meta.get("worker")
    return None if worker is None else str(worker)


def _call_of(info: Mapping[str, Any]) -> dict[str, Any]:
    delivery = info.get("delivery_info") or {}
    return {
        "name": info.get("name"),
        "args": info.get("args"),
        "kwargs": info.get("kwargs"),
        "queue": delivery.get("routing_key") if isinstance(delivery, dict) else None,
    }


def _step(state: str, meta: Mapping[str, Any] | None) -> str | None:
    if meta is None or state in _ENDED or state == "STARTED":
        return None
    result = meta.get("result")
    return short(f"{state} {short(result, 250)}" if result not in (None, {}) else state)


def _failure_reason(result: Any, traceback: Any) -> str:
    if isinstance(result, dict) and result.get("exc_type"):
        message = result.get("exc_message")
        if isinstance(message, list | tuple):
            message = " ".join(str(part) for part in message)
        return short(f"{result['exc_type']}: {message}" if message else str(result["exc_type"]))
    if traceback:
        return short(str(traceback).strip().splitlines()[-1])
    return "failed"


def _redis_location(url: str) -> str:
    """Host, port and database of a Redis URL, passwords and options aside."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 6379}{parts.path or '/0'}"
