"""The names users program against: renaming one must be a decision, not an accident.

``watchkeeper`` exports the SDK; each part of the client (``client.procs``,
``client.jobs``...) has the methods listed here. Adding a name fails too, so the
list stays the truth: update it on purpose, with the changelog.
"""

from __future__ import annotations

import inspect

import watchkeeper
from watchkeeper import Client

PACKAGE = ["Client", "__version__"]

CLIENT = [
    "close",
    "fail",
    "finish",
    "get_run",
    "heartbeat",
    "progress",
    "replicas",
    "request",
    "request_object",
    "request_text",
    "request_when_free",
    "run",
    "runs",
    "start",
    "waiting",
]
CLIENT_ATTRIBUTES = [
    "incidents",
    "jobs",
    "procs",
    "programs",
    "runbooks",
    "runners",
    "silences",
    "timeline",
    "timeout",
    "url",
]

PARTS = {
    "incidents": ["ack", "decide", "diagnose", "export", "get", "list", "search"],
    "runbooks": ["list", "switch"],
    "procs": [
        "abort",
        "get",
        "list",
        "log",
        "log_from",
        "park",
        "parked",
        "progress",
        "reclaim",
        "record_reported",
        "report",
        "session_progress",
        "start",
        "wait",
    ],
    "jobs": ["cancel", "delete", "get", "list", "output", "resume", "retry", "submit", "task"],
    "runners": [
        "complete",
        "fail",
        "heartbeat",
        "lease",
        "lease_answer",
        "list",
        "output",
        "register",
        "renew",
        "report",
        "report_and_lease",
        "ship_output",
        "stop",
        "topology",
    ],
    "timeline": ["emit", "emit_batch", "events", "last_progress_at", "record", "spend"],
    "silences": ["add", "expire", "get", "list"],
    "programs": ["follow", "get", "list", "log", "restart", "start", "stop"],
}

RUN_CONTEXT = ["heartbeat", "progress", "waiting"]


def _public(kind: type) -> list[str]:
    return sorted(name for name, _ in inspect.getmembers(kind) if not name.startswith("_"))


def test_the_package_exports_the_sdk() -> None:
    assert sorted(watchkeeper.__all__) == PACKAGE
    for name in PACKAGE:
        assert getattr(watchkeeper, name) is not None
    assert watchkeeper.Client is Client


def test_the_client_methods() -> None:
    assert _public(Client) == CLIENT


def test_the_client_parts_and_their_methods() -> None:
    with Client("http://127.0.0.1:9", "wk_x") as client:
        attributes = sorted(name for name in vars(client) if not name.startswith("_"))
        parts = {name: type(getattr(client, name)) for name in PARTS}
    assert attributes == CLIENT_ATTRIBUTES
    assert {name: _public(kind) for name, kind in parts.items()} == PARTS


def test_the_client_and_a_run_are_context_managers() -> None:
    from watchkeeper.client import RunContext

    for kind in (Client, RunContext):
        assert callable(kind.__enter__) and callable(kind.__exit__)


def test_a_run_context_methods() -> None:
    from watchkeeper.client import RunContext

    assert _public(RunContext) == RUN_CONTEXT
