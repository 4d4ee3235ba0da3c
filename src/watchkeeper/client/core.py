"""The Python SDK over watchkeeper's HTTP API.

::

    from watchkeeper import Client

    client = Client("http://127.0.0.1:8750", token="wk_...")
    with client.run("crawl", title="crawl example.org") as run:
        for page in pages:
            fetch(page)
            run.progress(f"page {page}")

The run finishes when the block ends, or fails with the exception's message.
``WATCHKEEPER_URL`` and ``WATCHKEEPER_TOKEN`` are used when arguments are omitted.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any, Literal

import httpx

from watchkeeper.client.busy import Busy, pause
from watchkeeper.client.part import ApiPart, present
from watchkeeper.client.procs import Procs
from watchkeeper.client.programs import Programs
from watchkeeper.client.queue import Jobs, Runners
from watchkeeper.client.silences import Silences
from watchkeeper.client.timeline import Timeline
from watchkeeper.client.wire import (
    DEFAULT_URL,
    RUNS_PATH,
    TIMEOUT_S,
    TOKEN_ENV,
    URL_ENV,
    answer_of,
    move_path,
    segment,
    unreachable,
)
from watchkeeper.errors import ClientError

#: Tells the server a press came from the command line (it can name nothing else).
CLIENT_HEADER = "X-Watchkeeper-Client"


class Client:
    """A connection to one watchkeeper server."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = (url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
        #: Seconds each call may take; calls that wait on the server add their wait to it.
        self.timeout = timeout
        token = token or os.environ.get(TOKEN_ENV)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=timeout,
            transport=transport,
            # Loading the system's certificates is a good part of a command's start-up; a
            # client of a plain http:// server never speaks TLS, so it needs none.
            verify=not self.url.startswith("http://"),
        )
        self.incidents = Incidents(self)
        self.runbooks = Runbooks(self)
        self.procs = Procs(self)
        self.jobs = Jobs(self)
        self.runners = Runners(self)
        self.timeline = Timeline(self)
        self.silences = Silences(self)
        self.programs = Programs(self)

    def request_object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """Call the API for a JSON object, the answer of most calls."""
        result: dict[str, Any] = self.request(method, path, **kwargs)
        return result

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Call the API; an error answer raises :class:`ClientError` with the server's message."""
        return _read(self._send(method, path, **kwargs))

    def request_text(self, method: str, path: str, **kwargs: Any) -> str:
        """Call the API for a text answer (an export); errors as :meth:`request` raises them."""
        response = self._send(method, path, **kwargs)
        if not response.is_success:
            _read(response)
        return response.text

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise unreachable(self.url, exc) from exc

    def request_when_free(
        self, method: str, path: str, *, deadline: float | None, **kwargs: Any
    ) -> Any:
        """:meth:`request`, asking again after each ``429`` as its ``Retry-After`` says.

        ``deadline`` (on :func:`time.monotonic`'s clock; ``None``: no end) is when
        to stop asking: the last :class:`~watchkeeper.client.busy.Busy` is raised.
        """
        while True:
            try:
                return self.request(method, path, **kwargs)
            except Busy as busy:
                pause(busy, deadline)

    # Reports -----------------------------------------------------------------

    def start(
        self,
        kind: str,
        title: str,
        *,
        run_id: str | None = None,
        origin: dict[str, str] | None = None,
        effects: str = "unknown",
        budget_s: float | None = None,
        expected_s: float | None = None,
        lease_s: float | None = None,
    ) -> dict[str, Any]:
        """Report that work started; returns the run (with its ``run_id``)."""
        body: dict[str, Any] = {"kind": kind, "title": title, "effects": effects}
        optional = {
            "run_id": run_id,
            "origin": origin,
            "budget_s": budget_s,
            "expected_s": expected_s,
            "lease_s": lease_s,
        }
        body.update(present(**optional))
        return self.request_object("POST", RUNS_PATH, json=body)

    def _move(self, kind: str, run_id: str, verb: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request_object("POST", move_path(kind, run_id, verb), json=present(**body))

    def progress(
        self,
        kind: str,
        run_id: str,
        step: str | None = None,
        *,
        done: int | None = None,
        total: int | None = None,
        budget_s: float | None = None,
        expected_s: float | None = None,
    ) -> dict[str, Any]:
        """Report where the work is: optionally its ``step``, counters (``done`` of
        ``total``), and the seconds the step may take without another report
        (``budget_s``) and is expected to take (``expected_s``), until the next report.

        The same step and counters as the report before is a repeat, not progress: the
        kind's ``loop_after`` repeats in a row (default 5) make the run looping.
        """
        said = {
            "step": step,
            "done": done,
            "total": total,
            "budget_s": budget_s,
            "expected_s": expected_s,
        }
        return self._move(kind, run_id, "progress", said)

    def heartbeat(self, kind: str, run_id: str) -> dict[str, Any]:
        """Report that the owner is alive (not progress)."""
        return self._move(kind, run_id, "heartbeat", {})

    def waiting(self, kind: str, run_id: str, reason: str | None = None) -> dict[str, Any]:
        """Report that the work waits for a person."""
        return self._move(kind, run_id, "waiting", {"reason": reason})

    def finish(self, kind: str, run_id: str, step: str | None = None) -> dict[str, Any]:
        """Report success."""
        return self._move(kind, run_id, "finish", {"step": step})

    def fail(
        self,
        kind: str,
        run_id: str,
        reason: str,
        *,
        fingerprint: str | None = None,
        detail: str | None = None,
    ) -> dict[str, Any]:
        """Report failure."""
        return self._move(
            kind, run_id, "fail", {"reason": reason, "fingerprint": fingerprint, "detail": detail}
        )

    def run(self, kind: str, title: str, **options: Any) -> RunContext:
        """A context manager that starts a run and finishes or fails it on exit."""
        return RunContext(self, kind, title, options)

    # Reading -----------------------------------------------------------------

    def runs(self, *, all: bool = False) -> dict[str, Any]:
        """What needs attention and what runs (and, with ``all``, what finished)."""
        return self.request_object("GET", RUNS_PATH, params={"all": all})

    def get_run(self, kind: str, run_id: str) -> dict[str, Any]:
        """One run as reported, with ``verdict`` (``None``: nothing wrong), ``incident_id``,
        ``decision`` and ``card`` (its chat card's sending state)."""
        return self.request_object("GET", f"/api/v1/runs/{segment(kind)}/{segment(run_id)}")

    def replicas(self) -> dict[str, Any]:
        """The replicas sharing the server's database: each one's heartbeat, and who leads."""
        return self.request_object("GET", "/api/v1/replicas")

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _read(response: httpx.Response) -> Any:
    """The answer's JSON, or the :class:`ClientError` it tells (see ``client/wire.py``)."""
    return answer_of(
        response.status_code,
        response.content,
        response.reason_phrase,
        response.headers.get("retry-after"),
    )


class Incidents(ApiPart):
    """``client.incidents``: read incidents."""

    def list(self, status: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """Incidents, newest first; ``status`` may be live, open, recovered or resolved."""
        params: dict[str, Any] = {"limit": limit}
        if status:
            params["status"] = status
        result = self._client.request("GET", "/api/v1/incidents", params=params)
        incidents: list[dict[str, Any]] = result["incidents"]
        return incidents

    def search(self, *, limit: int = 200, offset: int = 0, **filters: str) -> dict[str, Any]:
        """One page of the incidents the filters find, newest first, with ``total``.

        Filters: ``status``, ``kind``, ``condition``, ``decided_by`` (``@name``, or
        ``nobody``), ``since`` and ``until`` (RFC 3339, when it opened), ``q`` (text in the
        title, run id or reason).
        """
        params: dict[str, Any] = {"limit": limit, "offset": offset, **filters}
        return self._client.request_object("GET", "/api/v1/incidents", params=params)

    def export(self, format: Literal["csv", "json"] = "csv", **filters: str) -> Any:
        """Every incident the filters find (see :meth:`search`): CSV text, or the JSON object."""
        params = {"format": format, **filters}
        if format == "json":
            return self._client.request("GET", "/api/v1/incidents/export", params=params)
        return self._client.request_text("GET", "/api/v1/incidents/export", params=params)

    def get(self, incident_id: int) -> dict[str, Any]:
        """One incident with its history, buttons, decision, presses and action journal."""
        return self._client.request_object("GET", f"/api/v1/incidents/{segment(incident_id)}")

    def decide(
        self,
        incident_id: int,
        action: str,
        *,
        state_token: str | None = None,
        via: Literal["api", "cli"] = "api",
    ) -> dict[str, Any]:
        """Press a button. Without ``state_token`` the incident's current one is used.

        The server records the press as made on the API; ``via="cli"`` asks it to say
        "the command line" instead (the API can never record a press as another channel's).
        A press that loses raises :class:`ClientError` (409 already decided or
        stale, 403 refused, 422 not offered) whose message says who won.
        """
        if via not in ("api", "cli"):
            raise ValueError(
                f"via must be 'api' or 'cli', not {via!r}: "
                "the server names the dashboard's and the chat platforms' presses itself"
            )
        if state_token is None:
            state_token = str(self.get(incident_id)["state_token"])
        body = {"action": action, "state_token": state_token}
        return self._client.request_object(
            "POST",
            f"/api/v1/incidents/{segment(incident_id)}/decide",
            json=body,
            headers={CLIENT_HEADER: via},
        )

    def diagnose(self, incident_id: int) -> dict[str, Any]:
        """Ask to diagnose: read-only; returns the diagnosis under ``diagnosis``."""
        return self._client.request_object(
            "POST", f"/api/v1/incidents/{segment(incident_id)}/diagnose"
        )

    def ack(self, incident_id: int, *, via: Literal["api", "cli"] = "api") -> dict[str, Any]:
        """ "I am on it": mark yourself as looking at the incident, without deciding."""
        return self._client.request_object(
            "POST", f"/api/v1/incidents/{segment(incident_id)}/ack", headers={CLIENT_HEADER: via}
        )


class Runbooks(ApiPart):
    """``client.runbooks``: the automatic first steps."""

    def list(self) -> list[dict[str, Any]]:
        """Every runbook and whether it is on."""
        result = self._client.request("GET", "/api/v1/runbooks")
        runbooks: list[dict[str, Any]] = result["runbooks"]
        return runbooks

    def switch(self, name: str, enabled: bool) -> dict[str, Any]:
        """Switch one on or off (admins only)."""
        return self._client.request_object(
            "PUT", f"/api/v1/runbooks/{segment(name)}", json={"enabled": enabled}
        )


class RunContext:
    """A started run; ``progress``, ``heartbeat`` and ``waiting`` report on it."""

    def __init__(self, client: Client, kind: str, title: str, options: dict[str, Any]) -> None:
        self._client = client
        self.kind = kind
        self.title = title
        self._options = options
        self.run_id: str | None = options.get("run_id")

    def __enter__(self) -> RunContext:
        started = self._client.start(self.kind, self.title, **self._options)
        self.run_id = str(started["run_id"])
        return self

    def _id(self) -> str:
        if self.run_id is None:
            raise ClientError(0, "not_started", "the run has not started: use it in a with block")
        return self.run_id

    def progress(
        self,
        step: str | None = None,
        *,
        budget: float | None = None,
        expected: float | None = None,
        done: int | None = None,
        total: int | None = None,
    ) -> None:
        """Report where the work is: the step it starts, with the seconds that step may go
        without another report (``budget``) and is expected to take (``expected``), and
        counters (``done`` of ``total``). The run's own budget applies again at the next
        report. Saying the same thing again is not progress (see :meth:`Client.progress`).
        """
        self._client.progress(
            self.kind,
            self._id(),
            step,
            done=done,
            total=total,
            budget_s=budget,
            expected_s=expected,
        )

    def heartbeat(self) -> None:
        """Report liveness."""
        self._client.heartbeat(self.kind, self._id())

    def waiting(self, reason: str | None = None) -> None:
        """Report waiting for a person."""
        self._client.waiting(self.kind, self._id(), reason)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self._client.finish(self.kind, self._id())
            return
        message = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
        self._client.fail(self.kind, self._id(), message[:2000])
