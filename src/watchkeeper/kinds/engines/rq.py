"""The ``rq`` engine kind: RQ jobs, read from their registries and their workers' records.

Options (in ``[kinds.NAME]``)::

    engine = "rq"
    url = "redis://127.0.0.1:6379/0"
    heartbeat_grace_s = 120     # a worker on another host is gone this long after its last beat

What is read, as rq-dashboard reads it: every queue (``rq:queues``), each queue's started,
failed, finished and canceled registries, the jobs they name (one pipelined ``HMGET`` each:
status, description, worker, times, ``meta``, the failure's traceback), and the workers
(``rq:worker:*``: host, pid, last heartbeat). Queued jobs are not read: they are not judged.

A job moves when its ``meta`` changes (``job.meta[...] = ...; job.save_meta()``): the adapter
notes when it first saw each new ``meta``, never unpickling it. Its owner is the worker named
on the job: on this host alive while its pid is; elsewhere while its heartbeat is younger than
``heartbeat_grace_s`` by Redis's own clock; a worker whose record is gone is gone.

Cancel sends RQ's ``stop-job`` command to the worker running it (or cancels a job no worker
runs); Retry requeues the same job (stopping a running copy first).
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from pydantic import Field

from watchkeeper.config import KindConfig
from watchkeeper.contract import Action, Failure, Owner, OwnerKind, RunStatus, RunView, fingerprint
from watchkeeper.kinds.actions import ActionFailed, ActionRequest
from watchkeeper.kinds.base import FINISHED_WINDOW, Adapter, AdapterContext
from watchkeeper.kinds.engines import _redis
from watchkeeper.kinds.engines._common import EngineOptions, Moves, epoch, short

if TYPE_CHECKING:
    import redis

_REGISTRIES = ("wip", "failed", "finished", "canceled")
_JOB_FIELDS = (
    "status",
    "description",
    "origin",
    "worker_name",
    "started_at",
    "ended_at",
    "enqueued_at",
    "last_heartbeat",
    "meta",
    "exc_info",
)
_WORKER_FIELDS = ("hostname", "pid", "birth", "last_heartbeat", "state", "current_job")
_STATUS = {
    "queued": RunStatus.QUEUED,
    "deferred": RunStatus.QUEUED,
    "scheduled": RunStatus.QUEUED,
    "created": RunStatus.QUEUED,
    "rate_limited": RunStatus.QUEUED,
    "ready_to_enqueue": RunStatus.QUEUED,
    "started": RunStatus.RUNNING,
    "finished": RunStatus.SUCCEEDED,
    "failed": RunStatus.FAILED,
    "stopped": RunStatus.CANCELLED,
    "canceled": RunStatus.CANCELLED,
}
_OWN_ACTIONS = frozenset({Action.CANCEL, Action.RETRY})
#: How long a Retry waits for a stopped job to leave ``started``.
_STOP_WAIT_S = 10.0


class RqOptions(EngineOptions):
    """The ``rq`` kind's options."""

    heartbeat_grace_s: float = Field(default=120.0, gt=0)


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """One RQ worker as its record in Redis says."""

    name: str
    hostname: str | None
    pid: int | None
    birth: datetime | None
    last_heartbeat: datetime | None


class RqAdapter(_redis.OnRedis, Adapter):
    """Reads RQ's registries and workers; stops and requeues through RQ's own API."""

    adapter_name = "rq"

    def __init__(self, name: str, config: KindConfig, context: AdapterContext) -> None:
        super().__init__(name, config, context)
        self.settings = self.options(RqOptions)
        self.redis_url = self.settings.url
        self._moves = Moves()
        self.host = socket.gethostname()

    def read(self, now: datetime) -> Sequence[RunView]:
        """Started jobs, and those that failed, finished or were cancelled within a day."""
        conn = self.conn
        with _redis.reading("RQ's Redis", self.settings.url):
            queues = sorted(_text(q) for q in cast(set[bytes], conn.smembers("rq:queues")))
            names = [q.removeprefix("rq:queue:") for q in queues]
            entries = [
                entry
                for queue in names
                for registry in _REGISTRIES
                for entry, _ in _redis.members(conn, f"rq:{registry}:{queue}")
            ]
            pipe = conn.pipeline(transaction=False)
            pipe.smembers("rq:workers")
            pipe.time()
            members, now_answer = pipe.execute()
            engine_now = _redis_time(now_answer)
            worker_keys = sorted(_text(w) for w in members)
            job_ids = sorted({_text(e).split(":", 1)[0] for e in entries})
            keys = [f"rq:job:{job_id}" for job_id in job_ids]
            jobs = _redis.hashes(conn, keys, _JOB_FIELDS)
            workers = self._workers(conn, worker_keys)
            rows = [dict(zip(_JOB_FIELDS, values, strict=True)) for values in jobs]
            failed = [j for j, f in zip(job_ids, rows, strict=True) if f["status"] == b"failed"]
            tracebacks = _last_tracebacks(conn, failed)
        views = []
        owners: dict[str | None, Owner] = {}  # one liveness check per worker, not per job
        for job_id, fields in zip(job_ids, rows, strict=True):
            if fields["status"] is None:
                continue  # expired between the registry and the job: gone
            if job_id in tracebacks:
                fields["exc_info"] = tracebacks[job_id]
            view = self._view(job_id, fields, workers, owners, engine_now, now)
            if view is not None:
                views.append(view)
        self._moves.keep_only(v.run_id for v in views if not v.status.ended)
        return views

    def _workers(self, conn: redis.Redis, keys: Sequence[str]) -> dict[str, WorkerRecord]:
        records = {}
        for key, values in zip(keys, _redis.hashes(conn, keys, _WORKER_FIELDS), strict=True):
            fields = dict(zip(_WORKER_FIELDS, values, strict=True))
            if fields["birth"] is None and fields["last_heartbeat"] is None:
                continue  # its record expired: the worker is gone
            name = key.removeprefix("rq:worker:")
            pid = _text(fields["pid"]) if fields["pid"] else ""
            records[name] = WorkerRecord(
                name,
                _text(fields["hostname"]) if fields["hostname"] else None,
                int(pid) if pid.isdigit() else None,
                _rq_time(fields["birth"]),
                _rq_time(fields["last_heartbeat"]),
            )
        return records

    def _view(
        self,
        job_id: str,
        fields: Mapping[str, Any],
        workers: Mapping[str, WorkerRecord],
        owners: dict[str | None, Owner],
        engine_now: datetime,
        now: datetime,
    ) -> RunView | None:
        state = _text(fields["status"])
        status = _STATUS.get(state, RunStatus.RUNNING)
        finished = _rq_time(fields["ended_at"]) if status.ended else None
        if finished is not None and finished < now - FINISHED_WINDOW:
            return None
        meta = fields["meta"] or b""
        look = f"{state}:{hashlib.blake2b(_bytes(meta), digest_size=8).hexdigest()}"
        owner = Owner()
        progressed = None
        if status is RunStatus.RUNNING:
            worker_name = _text(fields["worker_name"]) if fields["worker_name"] else None
            owner = owners.get(worker_name) or owners.setdefault(
                worker_name, self._owner(worker_name, workers.get(worker_name or ""), engine_now)
            )
            progressed = self._moves.seen(job_id, look, now, now if meta else None)
        failure = None
        if status is RunStatus.FAILED:
            reason = _failure_reason(fields["exc_info"])
            failure = Failure(reason, fingerprint(reason))
        description = _text(fields["description"]) if fields["description"] else job_id
        return RunView(
            kind=self.name,
            run_id=job_id,
            title=short(description, 200),
            status=status,
            state_token=f"{look}:{owner.alive}",
            owner=owner,
            progress_at=progressed,
            started_at=_rq_time(fields["started_at"]),
            finished_at=finished,
            effects=self.settings.effects_value,
            failure=failure,
            step=_meta_step(meta),
        )

    def _owner(self, name: str | None, worker: WorkerRecord | None, engine_now: datetime) -> Owner:
        if worker is None:
            return Owner(OwnerKind.RUNNER, name, False)
        if worker.hostname == self.host and worker.pid is not None:
            return Owner(OwnerKind.RUNNER, name, _pid_alive(worker.pid, worker.birth))
        beat = worker.last_heartbeat
        if beat is None:
            return Owner(OwnerKind.RUNNER, name, None)
        quiet = (engine_now - beat).total_seconds()
        return Owner(OwnerKind.RUNNER, name, quiet <= self.settings.heartbeat_grace_s)

    # -- acting ------------------------------------------------------------------------

    def capabilities(self) -> frozenset[Action]:
        """Cancel (stop-job) and Retry (requeue) are RQ's own."""
        return super().capabilities() | _OWN_ACTIONS

    def perform(self, request: ActionRequest) -> str:
        """Stop or requeue the job through RQ."""
        from rq.exceptions import InvalidJobOperation, NoSuchJobError

        try:
            if request.action is Action.CANCEL:
                return self._cancel(request.run_id)
            if request.action in (Action.RETRY, Action.RETRY_CHECKED):
                return self._retry(request.run_id)
        except NoSuchJobError:
            raise ActionFailed(f"RQ has no job {request.run_id} any more") from None
        except InvalidJobOperation as exc:
            raise ActionFailed(f"RQ refused: {exc}") from None
        except Exception as exc:  # a Redis failure: not done
            raise ActionFailed(
                f"RQ failed: {type(exc).__name__}: {exc}", "RQ could not do it"
            ) from exc
        return super().perform(request)

    def _running_alive(self, job_id: str) -> str | None:
        run = next((r for r in self.read(self.context.clock()) if r.run_id == job_id), None)
        if run is not None and run.status is RunStatus.RUNNING and run.owner.alive is not False:
            return run.owner.ident
        return None

    def _cancel(self, job_id: str) -> str:
        from rq.command import send_stop_job_command
        from rq.job import Job

        worker = self._running_alive(job_id)
        if worker is not None:
            send_stop_job_command(self.conn, job_id)
            return f"sent stop-job for {job_id} to {worker}"
        Job.fetch(job_id, connection=self.conn).cancel()
        return f"cancelled job {job_id} (no live worker ran it)"

    def _retry(self, job_id: str) -> str:
        from rq.command import send_stop_job_command
        from rq.job import Job, JobStatus
        from rq.queue import Queue
        from rq.registry import FailedJobRegistry, StartedJobRegistry

        conn = self.conn
        if self._running_alive(job_id) is not None:
            send_stop_job_command(conn, job_id)
            deadline = time.monotonic() + _STOP_WAIT_S
            while Job.fetch(job_id, connection=conn).get_status() is JobStatus.STARTED:
                if time.monotonic() > deadline:
                    raise ActionFailed(f"job {job_id} did not stop within {_STOP_WAIT_S:g} s")
                time.sleep(0.1)
        job = Job.fetch(job_id, connection=conn)
        failed = FailedJobRegistry(job.origin, connection=conn)
        if job_id in failed.get_job_ids():
            failed.requeue(job_id)
        else:
            StartedJobRegistry(job.origin, connection=conn).remove_executions(job)
            Queue(job.origin, connection=conn).enqueue_job(job)
        return f"requeued job {job_id} on {job.origin}"

    def evidence(self, run_id: str) -> dict[str, str]:
        """The job's queue, worker and the last line of its traceback."""
        values = cast(list[Any], self.conn.hmget(f"rq:job:{run_id}", list(_JOB_FIELDS)))
        fields = dict(zip(_JOB_FIELDS, values, strict=True))
        facts = {
            name: _text(fields[name])
            for name in ("status", "origin", "worker_name", "description")
            if fields[name]
        }
        if fields["exc_info"]:
            facts["traceback"] = short(_traceback(fields["exc_info"])[-1500:], 1500)
        return facts


def _last_tracebacks(conn: redis.Redis, job_ids: Sequence[str]) -> dict[str, bytes]:
    """Each failed job's last traceback, from its results stream (``rq:results:ID``)."""
    pipe = conn.pipeline(transaction=False)
    for job_id in job_ids:
        pipe.xrevrange(f"rq:results:{job_id}", count=1)
    found = {}
    for job_id, entries in zip(job_ids, pipe.execute(), strict=True):
        payload = entries[0][1] if entries else {}
        encoded = payload.get(b"exc_string")
        if encoded:
            found[job_id] = base64.b64decode(encoded)
    return found


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _rq_time(value: Any) -> datetime | None:
    if not value:
        return None
    return epoch(_text(value))


def _redis_time(answer: Sequence[int]) -> datetime:
    seconds, micros = answer
    return datetime.fromtimestamp(seconds + micros / 1e6, UTC)


def _pid_alive(pid: int, birth: datetime | None) -> bool:
    import psutil

    try:
        created = psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    # A pid taken again by a newer process is not the worker's.
    return birth is None or created <= birth.timestamp() + 5


def _traceback(value: Any) -> str:
    raw = value if isinstance(value, bytes) else str(value).encode()
    try:
        return zlib.decompress(raw).decode("utf-8", "replace")
    except zlib.error:
        return raw.decode("utf-8", "replace")


def _failure_reason(value: Any) -> str:
    if not value:
        return "failed"
    lines = [line for line in _traceback(value).strip().splitlines() if line.strip()]
    return short(lines[-1]) if lines else "failed"


def _meta_step(meta: Any) -> str | None:
    """``job.meta`` shown, when the app stores it as JSON; pickled meta is never loaded."""
    if not meta:
        return None
    try:
        decoded = json.loads(meta)
    except (ValueError, UnicodeDecodeError):
        return None
    return short(decoded) if decoded else None
