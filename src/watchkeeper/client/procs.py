"""``client.procs``: start, watch, wait on and abort processes on the server's host.

::

    run = client.procs.start(["pytest", "-x"], detach=True, timeout_s=3600)
    done = client.procs.wait(run["id"])
    print(done["status"], done["exit_code"])
"""

from __future__ import annotations

import base64
import builtins
import time
from typing import TYPE_CHECKING, Any

from watchkeeper.client.busy import Busy, pause
from watchkeeper.client.part import ApiPart, present
from watchkeeper.client.wire import segment

if TYPE_CHECKING:
    pass

#: The statuses a process run ends in: a wait returns once the run has one.
ENDED = frozenset({"succeeded", "failed", "cancelled"})
#: Longest the server holds one ``wait`` request.
MAX_ASK_S = 30.0
#: The server's grace period when an abort names none.
SERVER_GRACE_S = 5.0
#: What an abort takes past its grace periods: the SIGKILL's wait and the witness's.
ABORT_SETTLE_S = 11.0


class Procs(ApiPart):
    """Process runs over the HTTP API."""

    def start(
        self,
        argv: list[str],
        *,
        detach: bool = True,
        cwd: str | None = None,
        name: str | None = None,
        budget_s: float | None = None,
        timeout_s: float | None = None,
        origin: dict[str, str] | None = None,
        session: str | None = None,
        on_done_cmd: str | None = None,
        on_done_url: str | None = None,
    ) -> dict[str, Any]:
        """Start ``argv`` on the server's host (admin token); returns the run with its ``id``."""
        body: dict[str, Any] = {"argv": list(argv), "detach": detach}
        optional = {
            "cwd": cwd,
            "name": name,
            "budget_s": budget_s,
            "timeout_s": timeout_s,
            "origin": origin,
            "session": session,
            "on_done_cmd": on_done_cmd,
            "on_done_url": on_done_url,
        }
        body.update(present(**optional))
        return self._client.request_object("POST", "/api/v1/procs", json=body)

    def list(self, *, all: bool = False) -> list[dict[str, Any]]:
        """Active runs (and, with ``all``, those that ended in the last day)."""
        result = self._client.request("GET", "/api/v1/procs", params={"all": all})
        runs: list[dict[str, Any]] = result["runs"]
        return runs

    def get(self, run_id: str) -> dict[str, Any]:
        """One run, with ``effective_status`` (``stale`` when its process is gone)."""
        return self._client.request_object("GET", f"/api/v1/procs/{segment(run_id)}")

    def log(self, run_id: str, tail_bytes: int = 65536) -> str:
        """The end of the run's output, secrets redacted."""
        result = self._client.request(
            "GET", f"/api/v1/procs/{segment(run_id)}/log", params={"tail_bytes": tail_bytes}
        )
        return str(result["text"])

    def log_from(self, run_id: str, offset: int = 0, *, whole_lines: bool = True) -> dict[str, Any]:
        """The run's output from byte ``offset`` on, secrets redacted, for following it.

        Returns ``text``, ``next_offset`` (where to ask next), ``size`` and
        ``ended``. While the run goes on, ``text`` stops after the last complete
        line (a secret is never split between two pieces); ``whole_lines=False``
        adds the unfinished last line, for a reader that asks no more. Follow a
        run by asking again from ``next_offset`` until ``ended`` and
        ``next_offset`` has reached ``size``::

            offset = 0
            while True:
                piece = client.procs.log_from(run_id, offset)
                print(piece["text"], end="")
                offset = piece["next_offset"]
                if piece["ended"] and offset >= piece["size"]:
                    break
                time.sleep(0.5)
        """
        return self._client.request_object(
            "GET",
            f"/api/v1/procs/{segment(run_id)}/log",
            params={"offset": offset, "whole_lines": whole_lines},
        )

    def wait(self, run_id: str, *, timeout_s: float | None = None) -> dict[str, Any]:
        """Block until the run ends (or ``timeout_s`` passes); returns the run.

        The server holds each ask up to 30 s. When it holds too many already it
        answers ``429``: the wait pauses as its ``Retry-After`` says and asks
        again, until ``timeout_s``; a refusal at the end raises
        :class:`~watchkeeper.client.busy.Busy` (a :class:`ClientError`).
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left = MAX_ASK_S if deadline is None else deadline - time.monotonic()
            left = max(0.0, min(MAX_ASK_S, left))
            try:
                run: dict[str, Any] = self._client.request(
                    "GET",
                    f"/api/v1/procs/{segment(run_id)}/wait",
                    params={"timeout_s": left},
                    timeout=self._client.timeout + left,
                )
            except Busy as busy:
                pause(busy, deadline)
                continue
            if run["status"] in ENDED or (deadline is not None and time.monotonic() >= deadline):
                return run

    def abort(
        self, run_id: str, *, grace_s: float | None = None, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Abort the run; ``outcome`` is ``signaled``, ``already_exited`` or ``not_ours``.

        The answer comes once the group has exited, so the call lasts up to
        about twice ``grace_s``. When the server holds too many requests already
        (``429``) the abort pauses as told and asks again, until ``timeout_s``
        (``None``: until it is taken).
        """
        body = {} if grace_s is None else {"grace_s": grace_s}
        grace = SERVER_GRACE_S if grace_s is None else grace_s
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        result: dict[str, Any] = self._client.request_when_free(
            "POST",
            f"/api/v1/procs/{segment(run_id)}/abort",
            deadline=deadline,
            json=body,
            timeout=self._client.timeout + 2 * grace + ABORT_SETTLE_S,
        )
        return result

    def progress(self, run_id: str, step: str | None = None) -> dict[str, Any]:
        """Report progress on a process run."""
        body = {} if step is None else {"step": step}
        return self._client.request_object(
            "POST", f"/api/v1/procs/{segment(run_id)}/progress", json=body
        )

    def reclaim(self) -> dict[str, Any]:
        """Settle the server host's runs now."""
        return self._client.request_object("POST", "/api/v1/procs/reclaim")

    def park(
        self,
        session: str,
        until: str,
        reason: str,
        *,
        wake_cmd: str | None = None,
        progress: str | None = None,
    ) -> dict[str, Any]:
        """Record that ``session`` hands back, waiting on run ``until``."""
        body = {"session": session, "until": until, "reason": reason}
        body |= present(wake_cmd=wake_cmd, progress=progress)
        return self._client.request_object("POST", "/api/v1/procs/parks", json=body)

    def parked(self) -> builtins.list[dict[str, Any]]:
        """Parked sessions and what each waits on."""
        result = self._client.request("GET", "/api/v1/procs/parks")
        parks: list[dict[str, Any]] = result["parks"]
        return parks

    def record_reported(self, run: dict[str, Any]) -> dict[str, Any]:
        """Record a run this host's engine starts and then reports with :meth:`report`.

        ``run`` holds ``id``, ``name``, ``argv``, ``cwd``, ``host``, ``user``,
        ``engine_key`` (the reporting engine's) and, if known, ``boot_id``,
        ``detach``, ``budget_s``, ``timeout_s``, ``origin`` and ``session``. The same
        run sent again is answered as it is.
        """
        body = {name: value for name, value in run.items() if value is not None}
        return self._client.request_object("POST", "/api/v1/procs/reported", json=body)

    def report(
        self,
        run_id: str,
        engine_key: str,
        *,
        started: dict[str, Any] | None = None,
        output: tuple[int, bytes] | None = None,
        ended: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Say what a run recorded with :meth:`record_reported` did: its owner, output from
        an offset, its end. The answer's ``next_offset`` is where the next output goes;
        ``abort_requested`` asks for the run to be ended."""
        body: dict[str, Any] = {"engine_key": engine_key} | present(started=started, ended=ended)
        if output is not None:
            offset, data = output
            body["output"] = {"offset": offset, "data": base64.b64encode(data).decode("ascii")}
        return self._client.request_object(
            "POST", f"/api/v1/procs/{segment(run_id)}/report", json=body
        )

    def session_progress(self, session: str, note: str | None = None) -> dict[str, Any]:
        """Record the session's own progress note (resets no wake breaker: ``released`` is 0)."""
        body = {} if note is None else {"note": note}
        return self._client.request_object(
            "POST", f"/api/v1/procs/sessions/{segment(session)}/progress", json=body
        )
