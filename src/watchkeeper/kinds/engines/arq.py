"""The ``arq`` engine kind: arq jobs, read from the queue's keys in Redis.

Options (in ``[kinds.NAME]``)::

    engine = "arq"
    url = "redis://127.0.0.1:6379/0"
    queue = "arq:queue"          # the worker's queue_name (default arq's)

What is read: the queue (a sorted set of job ids by when they may run), each job's
``arq:in-progress:ID`` key and its time to live, ``arq:retry:ID`` (it started at least once),
``arq:job:ID`` (function and arguments), the results (``arq:result:*``, found with SCAN), and
the workers' health-check key. Pickled values are read without importing anything they name.

arq offers no progress signal: what is judged is how long a job has run since watchkeeper
first saw it running (arq does not record a running job's start). The in-progress key is the
worker's lease: while it lives a worker holds the job; once it lapsed on a job that started
and never ended, nothing runs it (its worker died): stuck, until a worker takes it again.

Cancel adds the job to ``arq:abort`` (arq's ``Job.abort``; workers need
``allow_abort_jobs = True``); Retry enqueues the same function with the same arguments again
(arq keeps a finished job's id, so the new run has its own), aborting a copy still held.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from watchkeeper.config import KindConfig
from watchkeeper.contract import Action, Failure, Owner, OwnerKind, RunStatus, RunView, fingerprint
from watchkeeper.kinds.actions import ActionFailed, ActionRequest
from watchkeeper.kinds.base import FINISHED_WINDOW, Adapter, AdapterContext
from watchkeeper.kinds.engines import _redis
from watchkeeper.kinds.engines._common import EngineOptions, Moves, digest, short
from watchkeeper.kinds.engines._pickles import Named, peek

_OWN_ACTIONS = frozenset({Action.CANCEL, Action.RETRY})


class ArqOptions(EngineOptions):
    """The ``arq`` kind's options."""

    queue: str = "arq:queue"


class ArqAdapter(_redis.OnRedis, Adapter):
    """Reads an arq queue; aborts and enqueues again through arq's own client."""

    adapter_name = "arq"

    def __init__(self, name: str, config: KindConfig, context: AdapterContext) -> None:
        super().__init__(name, config, context)
        self.settings = self.options(ArqOptions)
        self.redis_url = self.settings.url
        self._first_seen = Moves()

    def read(self, now: datetime) -> Sequence[RunView]:
        """Jobs that run or ran and lost their worker, and results of the last day."""
        conn = self.conn
        queue = self.settings.queue
        with _redis.reading("arq's Redis", self.settings.url):
            queued = _redis.members(conn, queue)
            seconds, micros = cast(tuple[int, int], conn.time())
            engine_ms = seconds * 1000 + micros // 1000
            ids = [_text(job_id) for job_id, _ in queued]
            pipe = conn.pipeline(transaction=False)
            for job_id in ids:
                pipe.pttl(f"arq:in-progress:{job_id}")
                pipe.exists(f"arq:retry:{job_id}")
                pipe.get(f"arq:job:{job_id}")
            answers = pipe.execute()
            result_keys = _redis.scan(conn, "arq:result:*")
            results = _redis.get_many(conn, result_keys)
        views: list[RunView] = []
        for index, (member, score) in enumerate(queued):
            ttl, started, raw = answers[index * 3 : index * 3 + 3]
            job_id_text = _text(member)
            view = self._queued_view(
                job_id_text, int(score), ttl, bool(started), raw, engine_ms, now
            )
            if view is not None:
                views.append(view)
        held = {v.run_id for v in views}
        for key, raw in zip(result_keys, results, strict=True):
            job_id = _text(key).removeprefix("arq:result:")
            if raw is None or job_id in held:
                continue  # a job run again holds its old result until it ends again
            view = self._result_view(job_id, raw, now)
            if view is not None:
                views.append(view)
        self._first_seen.keep_only(v.run_id for v in views if not v.status.ended)
        return views

    def _queued_view(
        self,
        job_id: str,
        score: int,
        in_progress_ttl_ms: int,
        started: bool,
        raw: bytes | None,
        engine_ms: int,
        now: datetime,
    ) -> RunView | None:
        job = peek(raw) if raw else None
        function = job.get("f") if isinstance(job, dict) else None
        title = str(function or job_id)
        holding = in_progress_ttl_ms > 0 or in_progress_ttl_ms == -1
        if holding:
            # The lease lives: a worker holds the job. Its start is when watchkeeper first saw it.
            since = self._first_seen.seen(job_id, "running", now, now)
            expires = (
                now + timedelta(milliseconds=in_progress_ttl_ms) if in_progress_ttl_ms > 0 else None
            )
            owner = Owner(OwnerKind.LEASE, f"{self.settings.queue} worker", True, expires)
            return self._view(job_id, title, RunStatus.RUNNING, owner, since, job)
        if started and score <= engine_ms:
            # Started, never ended, and no worker holds it: its worker died with it.
            since = self._first_seen.seen(job_id, "running", now, now)
            owner = Owner(OwnerKind.LEASE, f"{self.settings.queue} worker", False, None)
            return self._view(job_id, title, RunStatus.RUNNING, owner, since, job)
        return None  # waiting to run: queued work is not judged

    def _view(
        self,
        job_id: str,
        title: str,
        status: RunStatus,
        owner: Owner,
        since: datetime | None,
        job: Any,
    ) -> RunView:
        return RunView(
            kind=self.name,
            run_id=job_id,
            title=title,
            status=status,
            state_token=digest([status.value, owner.alive]),
            owner=owner,
            started_at=since,
            effects=self.settings.effects_value,
            step=_call_text(job) if isinstance(job, dict) else None,
        )

    def _result_view(self, job_id: str, raw: bytes, now: datetime) -> RunView | None:
        result = peek(raw)
        if not isinstance(result, dict):
            return None
        finished = _ms(result.get("ft"))
        if finished is not None and finished < now - FINISHED_WINDOW:
            return None
        outcome = result.get("r")
        failure = None
        if result.get("s"):
            status = RunStatus.SUCCEEDED
        elif isinstance(outcome, Named) and outcome.name == "CancelledError":
            status = RunStatus.CANCELLED
        else:
            status = RunStatus.FAILED
            reason = short(str(outcome)) if outcome is not None else "failed"
            failure = Failure(reason, fingerprint(reason))
        return RunView(
            kind=self.name,
            run_id=job_id,
            title=str(result.get("f") or job_id),
            status=status,
            state_token=digest([status.value, result.get("ft")]),
            started_at=_ms(result.get("st")),
            finished_at=finished,
            effects=self.settings.effects_value,
            failure=failure,
        )

    # -- acting ------------------------------------------------------------------------

    def capabilities(self) -> frozenset[Action]:
        """Cancel (abort) and Retry (enqueue again) are arq's own."""
        return super().capabilities() | _OWN_ACTIONS

    def perform(self, request: ActionRequest) -> str:
        """Abort or enqueue again through arq's client."""
        if request.action is Action.CANCEL:
            return self._run(self._abort(request.run_id))
        if request.action in (Action.RETRY, Action.RETRY_CHECKED):
            return self._run(self._enqueue_again(request.run_id))
        return super().perform(request)

    def _run(self, work: Any) -> str:
        try:
            return cast(str, asyncio.run(work))
        except ActionFailed:
            raise
        except Exception as exc:  # a Redis failure: not done
            raise ActionFailed(
                f"arq failed: {type(exc).__name__}: {exc}", "arq could not do it"
            ) from exc

    async def _pool(self) -> Any:
        from arq import create_pool
        from arq.connections import RedisSettings

        return await create_pool(
            RedisSettings.from_dsn(self.settings.url), default_queue_name=self.settings.queue
        )

    async def _abort(self, job_id: str) -> str:
        from arq.jobs import Job

        pool = await self._pool()
        try:
            await Job(job_id, pool, _queue_name=self.settings.queue).abort(timeout=0)
        except TimeoutError:
            pass  # asked: the worker aborts it on its next poll
        finally:
            await pool.aclose()
        return f"asked arq to abort job {job_id}"

    async def _enqueue_again(self, job_id: str) -> str:
        from arq.jobs import Job, deserialize_job_raw, deserialize_result

        pool = await self._pool()
        try:
            raw = await pool.get(f"arq:job:{job_id}")
            if raw is not None:
                function, args, kwargs, _, _ = deserialize_job_raw(raw)
                # Still held by a worker (or to be taken again): stop that copy first.
                await Job(job_id, pool, _queue_name=self.settings.queue).abort(timeout=0.001)
            else:
                stored = await pool.get(f"arq:result:{job_id}")
                if stored is None:
                    raise ActionFailed(f"arq no longer has job {job_id} nor its result")
                done = deserialize_result(stored)
                function, args, kwargs = done.function, done.args, done.kwargs
            again = await pool.enqueue_job(function, *args, **kwargs)
        except TimeoutError:
            again = None
        finally:
            await pool.aclose()
        if again is None:
            raise ActionFailed(f"arq did not enqueue {job_id} again")
        return f"enqueued {function} again as {again.job_id}"

    def evidence(self, run_id: str) -> dict[str, str]:
        """The job's call, and its result when it ended."""
        raw = self.conn.get(f"arq:job:{run_id}") or self.conn.get(f"arq:result:{run_id}")
        found = peek(cast(bytes, raw)) if raw else None
        if not isinstance(found, dict):
            return {}
        facts = {"call": _call_text(found) or ""}
        if self.conn.exists(f"{self.settings.queue}:health-check"):
            facts["workers"] = _text(self.conn.get(f"{self.settings.queue}:health-check") or b"")
        if "r" in found:
            facts["result"] = short(str(found["r"]))
        return facts


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _ms(value: Any) -> datetime | None:
    if not isinstance(value, int | float):
        return None
    return datetime.fromtimestamp(value / 1000, UTC)


def _call_text(job: Mapping[str, Any]) -> str | None:
    function = job.get("f")
    if not function:
        return None
    args = ", ".join([short(str(a), 60) for a in job.get("a") or ()])
    return short(f"{function}({args})")
