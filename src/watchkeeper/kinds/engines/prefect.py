"""The ``prefect`` engine kind: Prefect flow runs, read over the Prefect server's REST API.

Options (in ``[kinds.NAME]``)::

    engine = "prefect"
    url = "http://127.0.0.1:4200/api"   # PREFECT_API_URL
    api_key_env = "PREFECT_API_KEY"     # for Prefect Cloud or a server behind a key
    heartbeat_grace_s = 90              # a run whose heartbeats stopped this long is ownerless

What is read (no Prefect package: plain HTTP with httpx): the flow runs that are pending,
running, paused or cancelling, and those that ended within a day (``/flow_runs/filter``);
the task runs of the active ones (``/task_runs/filter``), their latest logs
(``/logs/filter``) and their heartbeat events (``/events/filter``, present when the flows
run with ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` set).

A run moves when its state changes, a task run's state changes, or it logs. A ``Paused`` or
``Suspended`` run waits for a person: waiting, never stalled. A run that sent heartbeats and
stopped (by the server's own clock, its ``Date``) has lost its process: stuck. Without
heartbeats the owner cannot be told, and a dead run is stalled within its budget instead.
``Failed`` and ``Crashed`` are failed, with the state's message.

Cancel proposes ``Cancelling`` (the runner or worker holding the run stops it; a run with no
infrastructure goes straight to ``Cancelled``); Retry proposes ``AwaitingRetry`` on a run of a
deployment, which its runner or worker then runs again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from pydantic import Field

from watchkeeper.config import KindConfig
from watchkeeper.contract import Action, Failure, Owner, OwnerKind, RunStatus, RunView, fingerprint
from watchkeeper.errors import KindUnreadable
from watchkeeper.kinds.actions import ActionFailed, ActionRequest
from watchkeeper.kinds.base import FINISHED_WINDOW, Adapter, AdapterContext
from watchkeeper.kinds.engines._common import EngineOptions, epoch, short, shown_url

_ACTIVE = ["PENDING", "RUNNING", "PAUSED", "CANCELLING"]
_ENDED = ["COMPLETED", "FAILED", "CRASHED", "CANCELLED"]
_STATUS = {
    "SCHEDULED": RunStatus.QUEUED,
    "PENDING": RunStatus.QUEUED,
    "RUNNING": RunStatus.RUNNING,
    "CANCELLING": RunStatus.RUNNING,
    "PAUSED": RunStatus.WAITING,
    "COMPLETED": RunStatus.SUCCEEDED,
    "FAILED": RunStatus.FAILED,
    "CRASHED": RunStatus.FAILED,
    "CANCELLED": RunStatus.CANCELLED,
}
_PAGE = 200
_HEARTBEAT = "prefect.flow-run.heartbeat"
_OWN_ACTIONS = frozenset({Action.CANCEL, Action.RETRY})


class PrefectOptions(EngineOptions):
    """The ``prefect`` kind's options."""

    api_key_env: str | None = None
    heartbeat_grace_s: float = Field(default=90.0, gt=0)


class PrefectAdapter(Adapter):
    """Reads Prefect flow runs over the REST API; cancels and retries by proposing states."""

    adapter_name = "prefect"

    def __init__(self, name: str, config: KindConfig, context: AdapterContext) -> None:
        super().__init__(name, config, context)
        self.settings = self.options(PrefectOptions)
        self.api = self.settings.url.rstrip("/")
        self._client: httpx.Client | None = None

    @property
    def client(self) -> httpx.Client:
        """The HTTP client on the Prefect API, made on first use."""
        if self._client is None:
            headers = {}
            if self.settings.api_key_env:
                key = os.environ.get(self.settings.api_key_env)
                if not key:
                    raise KindUnreadable(
                        f"the environment variable {self.settings.api_key_env} "
                        f"(kinds.{self.name}.api_key_env) is not set"
                    )
                headers["Authorization"] = f"Bearer {key}"
            self._client = httpx.Client(base_url=self.api, headers=headers, timeout=10)
        return self._client

    def close(self) -> None:
        """Release the HTTP connections."""
        if self._client is not None:
            self._client.close()

    def _post(self, path: str, body: Mapping[str, Any]) -> tuple[Any, datetime | None]:
        try:
            response = self.client.post(path, json=body)
        except httpx.HTTPError as exc:
            raise KindUnreadable(
                f"cannot reach the Prefect API at {shown_url(self.api)}: {exc}"
            ) from None
        if response.status_code != 200:
            raise KindUnreadable(
                f"the Prefect API at {shown_url(self.api)} answered {path} with HTTP "
                f"{response.status_code}: {short(response.text, 200)}"
            )
        date = response.headers.get("date")
        return response.json(), (parsedate_to_datetime(date) if date else None)

    # -- reading -----------------------------------------------------------------------

    def read(self, now: datetime) -> Sequence[RunView]:
        """Active flow runs and those that ended within a day."""
        active, server_now = self._flow_runs({"state": {"type": {"any_": _ACTIVE}}})
        since = (now - FINISHED_WINDOW).isoformat()
        ended, _ = self._flow_runs(
            {"state": {"type": {"any_": _ENDED}}, "end_time": {"after_": since}}
        )
        ids = [run["id"] for run in active]
        moved = self._latest_moves(ids)
        beats = self._heartbeats(ids, server_now or now)
        clock = server_now or now
        return [
            self._view(run, moved.get(run["id"]), beats.get(run["id"]), clock) for run in active
        ] + [self._view(run, None, None, clock) for run in ended]

    def _flow_runs(
        self, flow_runs: Mapping[str, Any]
    ) -> tuple[list[dict[str, Any]], datetime | None]:
        found: list[dict[str, Any]] = []
        server_now = None
        while True:
            body = {"flow_runs": flow_runs, "limit": _PAGE, "offset": len(found), "sort": "ID_DESC"}
            page, server_now = self._post("/flow_runs/filter", body)
            found.extend(page)
            if len(page) < _PAGE:
                return found, server_now

    def _latest_moves(self, ids: Sequence[str]) -> dict[str, datetime]:
        """Each active run's latest task-run state change or log line."""
        moved: dict[str, datetime] = {}
        for start in range(0, len(ids), _PAGE):
            chunk = list(ids[start : start + _PAGE])
            tasks, _ = self._post(
                "/task_runs/filter",
                {
                    "flow_runs": {"id": {"any_": chunk}},
                    "limit": _PAGE,
                    "sort": "EXPECTED_START_TIME_DESC",
                },
            )
            for task in tasks:
                _later(
                    moved,
                    task.get("flow_run_id"),
                    epoch((task.get("state") or {}).get("timestamp")),
                )
            logs, _ = self._post(
                "/logs/filter",
                {
                    "logs": {"flow_run_id": {"any_": chunk}},
                    "limit": _PAGE,
                    "sort": "TIMESTAMP_DESC",
                },
            )
            for line in logs:
                _later(moved, line.get("flow_run_id"), epoch(line.get("timestamp")))
        return moved

    def _heartbeats(self, ids: Sequence[str], now: datetime) -> dict[str, datetime]:
        """Each run's latest heartbeat event, asked for 25 runs at a time (the API gives at most
        50 events a page, newest first: two beats of each)."""
        beats: dict[str, datetime] = {}
        window = timedelta(seconds=self.settings.heartbeat_grace_s * 10)
        for start in range(0, len(ids), 25):
            body = {
                "filter": {
                    "event": {"name": [_HEARTBEAT]},
                    "resource": {
                        "id": [f"prefect.flow-run.{run_id}" for run_id in ids[start : start + 25]]
                    },
                    "occurred": {
                        "since": (now - window).isoformat(),
                        "until": (now + timedelta(minutes=5)).isoformat(),
                    },
                    "order": "DESC",
                },
                "limit": 50,
            }
            try:
                answer, _ = self._post("/events/filter", body)
            except KindUnreadable:
                return {}  # a server without events: owners cannot be told, the rest is read
            events = answer.get("events", []) if isinstance(answer, dict) else []
            for event in events:
                resource = str((event.get("resource") or {}).get("prefect.resource.id", ""))
                moment = epoch(event.get("occurred"))
                _later(beats, resource.removeprefix("prefect.flow-run."), moment)
        return beats

    def _view(
        self,
        run: Mapping[str, Any],
        moved: datetime | None,
        beat: datetime | None,
        server_now: datetime,
    ) -> RunView:
        state = run.get("state") or {}
        kind = str(state.get("type") or run.get("state_type") or "PENDING")
        status = _STATUS.get(kind, RunStatus.RUNNING)
        changed = epoch(state.get("timestamp"))
        progressed = max(filter(None, (changed, moved)), default=None)
        owner = Owner()
        if status is RunStatus.RUNNING and beat is not None:
            grace = timedelta(seconds=self.settings.heartbeat_grace_s)
            owner = Owner(OwnerKind.LEASE, "flow-run heartbeat", server_now - beat <= grace)
        failure = None
        if status is RunStatus.FAILED:
            reason = short(state.get("message") or state.get("name") or "failed")
            failure = Failure(reason, fingerprint(reason))
        name = run.get("name") or run["id"]
        return RunView(
            kind=self.name,
            run_id=str(run["id"]),
            title=str(name),
            status=status,
            state_token=f"{state.get('id')}:{progressed}:{owner.alive}",
            owner=owner,
            progress_at=progressed,
            started_at=epoch(run.get("start_time")),
            finished_at=epoch(run.get("end_time")) if status.ended else None,
            effects=self.settings.effects_value,
            failure=failure,
            step=short(f"{state.get('name')}: {state.get('message')}")
            if state.get("message") and not status.ended
            else state.get("name"),
        )

    # -- acting ------------------------------------------------------------------------

    def capabilities(self) -> frozenset[Action]:
        """Cancel (Cancelling) and Retry (AwaitingRetry) are Prefect's own."""
        return super().capabilities() | _OWN_ACTIONS

    def perform(self, request: ActionRequest) -> str:
        """Propose the state through the API; the server's orchestration decides."""
        if request.action is Action.CANCEL:
            return self._propose(request.run_id, "CANCELLING", "Cancelling", request)
        if request.action in (Action.RETRY, Action.RETRY_CHECKED):
            run = self._get(f"/flow_runs/{request.run_id}")
            if not run.get("deployment_id"):
                raise ActionFailed(
                    f"flow run {request.run_id} has no deployment, so Prefect cannot run it "
                    "again: start the flow again in its own app",
                    "this flow run has no deployment, so Prefect cannot run it again",
                )
            return self._propose(request.run_id, "SCHEDULED", "AwaitingRetry", request)
        return super().perform(request)

    def _get(self, path: str) -> dict[str, Any]:
        try:
            response = self.client.get(path)
        except httpx.HTTPError as exc:
            raise ActionFailed(f"cannot reach the Prefect API: {exc}") from exc
        if response.status_code != 200:
            raise ActionFailed(f"the Prefect API answered HTTP {response.status_code}")
        found: dict[str, Any] = response.json()
        return found

    def _propose(self, run_id: str, kind: str, name: str, request: ActionRequest) -> str:
        body = {
            "state": {
                "type": kind,
                "name": name,
                "message": f"{name} from watchkeeper by {request.actor} ({request.via})",
            },
            "force": kind == "SCHEDULED",
        }
        try:
            response = self.client.post(f"/flow_runs/{run_id}/set_state", json=body)
        except httpx.HTTPError as exc:
            raise ActionFailed(f"cannot reach the Prefect API: {exc}") from exc
        answer = (
            response.json()
            if response.headers.get("content-type", "").startswith("application/json")
            else {}
        )
        status = str(answer.get("status", "")) if isinstance(answer, dict) else ""
        if response.status_code not in (200, 201) or status not in ("ACCEPT", ""):
            details = answer.get("details", {}) if isinstance(answer, dict) else {}
            why = details.get("reason") if isinstance(details, dict) else None
            refused = status or str(response.status_code)
            raise ActionFailed(
                f"Prefect did not take {name} for flow run {run_id}: {refused}"
                + (f": {why}" if why else ""),
                f"Prefect refused it: {why or status}",
            )
        return f"Prefect accepted {name} for flow run {run_id}"

    def evidence(self, run_id: str) -> dict[str, str]:
        """The run's state, its deployment and its last log lines."""
        run = self._get(f"/flow_runs/{run_id}")
        state = run.get("state") or {}
        logs, _ = self._post(
            "/logs/filter",
            {"logs": {"flow_run_id": {"any_": [run_id]}}, "limit": 5, "sort": "TIMESTAMP_DESC"},
        )
        return {
            "state": f"{state.get('name')} ({state.get('type')})",
            "deployment": str(run.get("deployment_id") or "none"),
            "last_logs": short(
                " | ".join(str(line.get("message")) for line in reversed(logs)), 1500
            ),
        }


def _later(found: dict[str, datetime], key: object, moment: datetime | None) -> None:
    if key is None or moment is None:
        return
    known = found.get(str(key))
    if known is None or moment > known:
        found[str(key)] = moment
