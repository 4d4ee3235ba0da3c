"""Fuzz the API from its own OpenAPI schema, on SQLite and PostgreSQL: never a 5xx.

Every operation gets valid (positive) and invalid (negative) requests. Half of
the cases aim at things that exist (a push run, a job, its leased task, a
runner) so that bodies reach the store instead of stopping at a 404. Failures
are collected rather than shrunk, so one run names every operation that broke.

The quick test runs with the fast tests alone (``-m "not slow"``) with a few examples per
operation; the slow one (``-m slow``) sends thousands of requests per store, and ``make
test``, which runs it, leaves the quick one out (``slow_has_it``).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from watchkeeper.clock import utcnow
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.procs import engine as procs_engine
from watchkeeper.runtime import Runtime
from watchkeeper.server.app import create_app
from watchkeeper.store import Store
from watchkeeper.store.runs import NewRun
from watchkeeper.store.tokens import Role

from ..conftest import make_settings

QUICK_EXAMPLES = 10
#: The thorough run's budget is a hundred random cases per operation and phase, shared by the
#: two stores: the routes, models and error handling they reach are the same code, and each
#: store still takes fifty cases of every operation (new ones every run).
SLOW_EXAMPLES = 50
#: A server-sent event stream stays open for minutes and takes no input worth fuzzing.
SKIPPED = {("GET", "/api/v1/events")}
#: The longest a fuzzed long-poll holds its request: they are allowed up to 30 s, past the
#: test client's 10 s, and a held request tells nothing about server errors.
HELD_S = 0.2
MODES = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)


@dataclass
class Tally:
    """What a fuzz run sent and which answers were server errors."""

    sent: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def summary(self, store: str, seconds: float) -> str:
        phases = ", ".join(f"{mode}: {count}" for mode, count in sorted(self.sent.items()))
        return (
            f"{store}: {sum(self.sent.values())} requests ({phases}), "
            f"{len(self.failures)} server errors, {seconds:.0f} s"
        )


@dataclass
class Target:
    """The app under fuzz, its admin token and ids of things that exist."""

    schema: Any
    token: str
    known: dict[str, str]
    lease_token: str


def _seed(runtime: Runtime, app: Any) -> tuple[str, dict[str, str], str]:
    store = runtime.store
    _, token = store.tokens.create(Role.ADMIN, "fuzz", utcnow())
    store.runs.start(NewRun("crawl", "known", "t", None, "none", None, None, 90), utcnow())
    http = TestClient(app, headers={"Authorization": f"Bearer {token}"})
    job = http.post(
        "/api/v1/jobs",
        json={"title": "fuzz", "org": "fuzz", "fleet": "cpu", "payload": {"argv": ["true"]}},
    ).json()
    runner = http.post("/api/v1/runners", json={"fleet": "cpu", "host": "fuzz", "pid": 1}).json()
    leased = http.post(f"/api/v1/runners/{runner['id']}/lease", json={"max": 1}).json()
    known = {
        "kind": "crawl",
        "run_id": "known",
        "job_id": job["id"],
        "task_id": job["tasks"][0]["id"],
        "runner_id": runner["id"],
        "name": "retry_failed_without_effects",
        "session": "fuzz",
    }
    return token, known, leased["tasks"][0]["lease_token"]


@pytest.fixture
def target(tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The app on the test store (SQLite file or PostgreSQL schema), seeded."""
    # Aborting a run another engine reports waits for that engine to end it; the runs the
    # fuzzer records have no engine behind them, so the wait would only outlast the client.
    monkeypatch.setattr(procs_engine, "_reporter_abort_s", lambda grace_s: HELD_S)
    settings_ = make_settings(tmp_path, store.url)
    runtime = Runtime.open(
        settings_, clock=utcnow, store=store, notifier=OpsNotifier(settings_.ops)
    )
    app = create_app(runtime, run_sweeper=False)
    token, known, lease_token = _seed(runtime, app)
    yield Target(schemathesis.openapi.from_asgi("/openapi.json", app), token, known, lease_token)
    runtime.close()


def fuzz(target: Target, examples: int, derandomize: bool) -> Tally:
    """Send ``examples`` cases per operation and phase; collect every 5xx."""
    tally = Tally()
    operations = [result.ok() for result in target.schema.get_all_operations()]
    operations = [op for op in operations if (op.method.upper(), op.path) not in SKIPPED]
    assert len(operations) >= 30
    for mode in MODES:
        # Revoking can hit the fuzzer's own token: every later request would be a 401.
        for operation in sorted(operations, key=lambda op: op.path.endswith("/revoke")):
            try:
                _checker(target, operation, mode, examples, derandomize, tally)()
            except Unsatisfiable:
                # Operations without parameters have no invalid form to generate.
                assert mode is schemathesis.GenerationMode.NEGATIVE
    return tally


def _checker(
    target: Target, operation: Any, mode: Any, examples: int, derandomize: bool, tally: Tally
) -> Any:
    """A Hypothesis test sending ``operation``'s cases of ``mode``, counting into ``tally``."""
    headers = {"Authorization": f"Bearer {target.token}"}

    @given(case=operation.as_strategy(generation_mode=mode), aim=st.booleans())
    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=derandomize,
        database=None,
    )
    def check(case: Any, aim: bool) -> None:
        _hold_briefly(case)
        if aim:
            _aim(case, target)
        tally.sent[mode.value] += 1
        where = (
            f"{mode.value} {case.method} {case.formatted_path} "
            f"query={case.query!r} body={str(case.body)[:200]!r}"
        )
        try:
            response = case.call(headers=headers)
        except Exception as exc:  # noqa: BLE001 - an escaped exception is a 500 on the wire
            tally.failures.append(f"{where} -> raised {exc!r:.200}")
            return
        if response.status_code >= 500:
            tally.failures.append(f"{where} -> {response.status_code} {response.text:.200}")
            return
        if response.status_code >= 400:
            body = response.json()
            assert set(body) == {"error"}, body
            assert body["error"]["message"], body

    return check


def _aim(case: Any, target: Target) -> None:
    """Point the case at things that exist, so its body reaches the store."""
    for name in case.path_parameters or {}:
        if name in target.known:
            case.path_parameters[name] = target.known[name]
    if isinstance(case.body, dict):
        if "lease_token" in case.body:
            case.body["lease_token"] = target.lease_token
        if "kind" in case.body:
            case.body["kind"] = target.known["kind"]


def _hold_briefly(case: Any) -> None:
    """Shorten a long-poll's hold; a generated value that is no number stays, to be refused."""
    if case.path.endswith("/wait"):
        query = case.query if isinstance(case.query, dict) else {}
        held = query.get("timeout_s", HELD_S)
        if isinstance(held, (int, float)) and not isinstance(held, bool):
            query["timeout_s"] = min(held, HELD_S)
            case.query = query


def _run(target: Target, store: Store, examples: int, derandomize: bool) -> tuple[Tally, str]:
    """Fuzz the API; the tally and a printed summary of what was sent."""
    started = time.monotonic()
    tally = fuzz(target, examples, derandomize)
    backend = store.url.split(":", 1)[0].split("+", 1)[0]
    summary = tally.summary(backend, time.monotonic() - started)
    print(summary)
    return tally, summary + "\n" + "\n".join(tally.failures)


@pytest.mark.slow_has_it
def test_no_request_makes_the_server_fail(target: Target, store: Store) -> None:
    tally, report = _run(target, store, QUICK_EXAMPLES, derandomize=True)
    assert not tally.failures, report
    assert sum(tally.sent.values()) >= 200


@pytest.mark.slow(seconds=180)
def test_no_request_makes_the_server_fail_thoroughly(target: Target, store: Store) -> None:
    tally, report = _run(target, store, SLOW_EXAMPLES, derandomize=False)
    assert not tally.failures, report
    assert sum(tally.sent.values()) >= 200
