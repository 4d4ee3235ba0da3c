"""``client.jobs`` and ``client.runners``: the job queue over the HTTP API.

::

    job = client.jobs.submit("nightly build", org="acme", fleet="cpu",
                             argv=["make", "all"])
    print(job["status"], job["tasks"][0]["blocked"])   # why it has not started
    client.jobs.cancel(job["id"])                       # {"affected": 1, ...}

Runners use ``client.runners``: register, heartbeat, lease, then renew,
complete or fail each task with the lease token it came with (shipping its
output while it runs, and the tail of it first). A move on a
lease that is gone raises :class:`~watchkeeper.errors.ClientError` with the
code ``lease_lost``.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from watchkeeper.client.part import ApiPart, present
from watchkeeper.client.wire import segment

if TYPE_CHECKING:
    pass


class Jobs(ApiPart):
    """Submit, read and control jobs."""

    def submit(
        self,
        title: str,
        *,
        org: str,
        fleet: str,
        argv: builtins.list[str] | None = None,
        payload: dict[str, Any] | None = None,
        rerunnable: bool = True,
        max_attempts: int | None = None,
        lease_s: float | None = None,
        origin: str | None = None,
    ) -> dict[str, Any]:
        """Queue a job running ``argv`` (or a full ``payload``); admin token.

        ``origin`` (``github:OWNER/REPO#N``) is the pull request or issue it came from:
        the server labels it and, when the job ends, says there how it ended.
        """
        body: dict[str, Any] = {
            "title": title,
            "org": org,
            "fleet": fleet,
            "payload": dict(payload or {}) | ({"argv": list(argv)} if argv else {}),
            "rerunnable": rerunnable,
        } | present(max_attempts=max_attempts, lease_s=lease_s, origin=origin)
        return self._post("/api/v1/jobs", body)

    def list(
        self,
        *,
        status: str | None = None,
        fleet: str | None = None,
        org: str | None = None,
        limit: int = 200,
    ) -> builtins.list[dict[str, Any]]:
        """Jobs newest first, filtered by rolled-up status, fleet or org."""
        params: dict[str, Any] = {"limit": limit}
        params.update(
            {k: v for k, v in {"status": status, "fleet": fleet, "org": org}.items() if v}
        )
        result = self._client.request("GET", "/api/v1/jobs", params=params)
        jobs: builtins.list[dict[str, Any]] = result["jobs"]
        return jobs

    def get(self, job_id: str) -> dict[str, Any]:
        """One job: status, tasks (queued ones with ``blocked``), timeline."""
        return self._client.request_object("GET", f"/api/v1/jobs/{segment(job_id)}")

    def cancel(self, job_id: str) -> dict[str, Any]:
        """Cancel the job's unfinished tasks; ``affected`` says how many."""
        return self._post(f"/api/v1/jobs/{segment(job_id)}/cancel", None)

    def retry(self, job_id: str) -> dict[str, Any]:
        """Queue the job's failed, cancelled and stuck tasks again; ``affected`` says how many."""
        return self._post(f"/api/v1/jobs/{segment(job_id)}/retry", None)

    def resume(self, job_id: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        """Add a continuation task to a finished job; returns the task.

        ``job_id`` may name a task (``t-...``) instead: the continuation joins
        that task's job, with that task's payload unless ``payload`` is given.
        """
        kind = "tasks" if job_id.startswith("t-") else "jobs"
        return self._post(f"/api/v1/{segment(kind)}/{segment(job_id)}/resume", {"payload": payload})

    def delete(self, job_id: str) -> dict[str, Any]:
        """Delete the job and its tasks; ``affected`` says how many tasks went."""
        return self._client.request_object("DELETE", f"/api/v1/jobs/{segment(job_id)}")

    def task(self, task_id: str) -> dict[str, Any]:
        """One task (with ``blocked`` while queued)."""
        return self._client.request_object("GET", f"/api/v1/tasks/{segment(task_id)}")

    def output(self, task_id: str, *, all: bool = False) -> dict[str, Any]:
        """The redacted tail of what the task printed (``output``, ``None`` until it ended).

        ``all=True``: all that its last run shipped so far, with ``running``,
        ``complete`` and ``cut`` (and a ``note`` saying where the whole is when cut).
        """
        path = f"/api/v1/tasks/{segment(task_id)}/output"
        if all:
            return self._client.request_object("GET", path, params={"all": "true"})
        return self._client.request_object("GET", path)


class Runners(ApiPart):
    """What a runner daemon says to the server, and the topology."""

    def register(
        self,
        fleet: str,
        *,
        capacity: int,
        host: str,
        pid: int,
        org: str | None = None,
        name: str | None = None,
    ) -> dict[str, Any]:
        """Register a runner; returns it with its ``id``."""
        body = {"fleet": fleet, "capacity": capacity, "host": host, "pid": pid}
        body |= present(org=org, name=name)
        return self._post("/api/v1/runners", body)

    def list(self) -> builtins.list[dict[str, Any]]:
        """Registered runners, alive or not."""
        result = self._client.request("GET", "/api/v1/runners")
        runners: builtins.list[dict[str, Any]] = result["runners"]
        return runners

    def heartbeat(self, runner_id: str) -> dict[str, Any]:
        """Say the runner is alive."""
        return self._post(f"/api/v1/runners/{segment(runner_id)}/heartbeat", None)

    def lease(self, runner_id: str, max: int = 1) -> builtins.list[dict[str, Any]]:
        """Lease up to ``max`` tasks; each comes with its ``lease_token``."""
        tasks: builtins.list[dict[str, Any]] = self.lease_answer(runner_id, max)["tasks"]
        return tasks

    def lease_answer(self, runner_id: str, max: int = 1) -> dict[str, Any]:
        """Lease as :meth:`lease` does; the whole answer: ``tasks``, and ``reason``
        (``{"code", "message"}``: why none was leased, or that the runner is back
        online; ``None`` otherwise, and from a server that predates it)."""
        return self._post(f"/api/v1/runners/{segment(runner_id)}/lease", {"max": max})

    def renew(
        self, task_id: str, lease_token: str, *, progressed: bool = False, step: str | None = None
    ) -> dict[str, Any]:
        """Renew a lease; ``ClientError`` with code ``lease_lost`` means stop the task."""
        body = {"lease_token": lease_token, "progressed": progressed} | present(step=step)
        return self._post(f"/api/v1/tasks/{segment(task_id)}/renew", body)

    def complete(self, task_id: str, lease_token: str, exit_code: int | None = 0) -> dict[str, Any]:
        """Record success under the lease."""
        body = {"lease_token": lease_token, "exit_code": exit_code}
        return self._post(f"/api/v1/tasks/{segment(task_id)}/complete", body)

    def report(self, outcomes: builtins.list[dict[str, Any]]) -> builtins.list[dict[str, Any]]:
        """Record several tasks' outcomes in one request (and one transaction).

        Each outcome: ``task_id``, ``lease_token``, ``exit_code``, and for a
        failure its ``reason`` (and ``fingerprint``). The answer has one entry
        per outcome, in order: the task, or ``{"id", "code": "lease_lost"}``
        for one whose lease is gone (that one alone was not recorded).
        """
        answer = self._post("/api/v1/tasks/outcomes", {"outcomes": outcomes})
        return list(answer["outcomes"])

    def report_and_lease(
        self, runner_id: str, outcomes: builtins.list[dict[str, Any]], max: int = 1
    ) -> dict[str, Any]:
        """Report outcomes (as :meth:`report`) and lease up to ``max`` tasks into the slots
        they free, in one request and one transaction.

        The answer has ``outcomes`` (as :meth:`report` returns), ``tasks`` (as
        :meth:`lease` returns) and ``reason`` (as :meth:`lease_answer`). A request
        refused as a whole (say, an unknown runner) recorded no outcome.
        """
        path = f"/api/v1/runners/{segment(runner_id)}/lease"
        answer = self._post(path, {"max": max, "outcomes": outcomes})
        return {
            "outcomes": list(answer["outcomes"]),
            "tasks": list(answer["tasks"]),
            "reason": answer.get("reason"),
        }

    def fail(
        self,
        task_id: str,
        lease_token: str,
        reason: str,
        *,
        fingerprint: str | None = None,
        exit_code: int | None = None,
    ) -> dict[str, Any]:
        """Record failure under the lease."""
        body: dict[str, Any] = {"lease_token": lease_token, "reason": reason}
        body |= present(fingerprint=fingerprint, exit_code=exit_code)
        return self._post(f"/api/v1/tasks/{segment(task_id)}/fail", body)

    def output(self, task_id: str, lease_token: str, output: str) -> dict[str, Any]:
        """Send the redacted tail of the task's output under the lease, before its outcome."""
        body = {"lease_token": lease_token, "output": output}
        return self._post(f"/api/v1/tasks/{segment(task_id)}/output", body)

    def ship_output(
        self,
        task_id: str,
        lease_token: str,
        *,
        offset: int,
        end: int,
        output: str,
        final: bool = False,
        run_id: str | None = None,
        host: str | None = None,
    ) -> dict[str, Any]:
        """Ship what the task's log gained (bytes ``offset`` to ``end``, redacted) under the
        lease; the answer's ``next_offset`` says where the next piece starts."""
        body = {"lease_token": lease_token, "offset": offset, "end": end, "output": output}
        body |= {"final": final} | present(run_id=run_id, host=host)
        return self._post(f"/api/v1/tasks/{segment(task_id)}/output/chunks", body)

    def stop(self, runner_id: str) -> dict[str, Any]:
        """The runner leaves; its leases are taken back."""
        return self._post(f"/api/v1/runners/{segment(runner_id)}/stop", None)

    def topology(self) -> dict[str, Any]:
        """Fleets, runners and the tasks each runs now."""
        return self._client.request_object("GET", "/api/v1/topology")
