"""The role table of ``docs/security.md`` says what the server does.

Each claim in a role's row ("may ...") names routes here; over real HTTP, a
token of that role is let through on each of them (any answer but 401 or 403),
and a token of the role below is refused with 403 saying which role is needed
(no token at all, below a viewer: 401). A claim the page makes that is not
mapped here fails the test, so the page cannot grow a promise nobody checked.
Task tokens (the last row) are held to their own task by
``tests/integration/queue/test_task_environment.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live_server import LiveServer, live_server
from watchkeeper.runtime import Runtime

PAGE = Path(__file__).parents[2] / "docs" / "security.md"
BELOW = {"admin": "reporter", "reporter": "viewer", "viewer": None}
Route = tuple[str, str]
_JOBS = [
    ("POST", "/api/v1/jobs"),
    ("POST", "/api/v1/jobs/j-1/cancel"),
    ("POST", "/api/v1/jobs/j-1/retry"),
    ("POST", "/api/v1/jobs/j-1/resume"),
    ("DELETE", "/api/v1/jobs/j-1"),
]
_REPORTS = [
    ("POST", "/api/v1/runs"),
    ("POST", "/api/v1/runs/process/p-1/progress"),
    ("POST", "/api/v1/events/batch"),
]
_RUNNER = [
    ("POST", "/api/v1/runners"),
    ("POST", "/api/v1/runners/r-1/heartbeat"),
    ("POST", "/api/v1/runners/r-1/lease"),
]
_READS = [
    ("GET", "/api/v1/jobs"),
    ("GET", "/api/v1/incidents"),
    ("GET", "/api/v1/runs"),
    ("GET", "/api/v1/procs"),
    ("GET", "/api/v1/timeline"),
]
#: What each claim the page may make means, as routes. ``None``: judged per press, not per
#: route (a viewer's press is refused by the decider: tests/integration/decide/).
CLAIMS: dict[str, list[Route] | None] = {
    "decide incidents": None,
    "runbooks": [("PUT", "/api/v1/runbooks/restart-stuck")],
    "tokens": [("GET", "/api/v1/tokens"), ("POST", "/api/v1/tokens")],
    "job control": _JOBS,
    "job control (submit, cancel, retry, resume, delete jobs)": _JOBS,
    "submit jobs": _JOBS[:1],
    "abort processes": [("POST", "/api/v1/procs/p-1/abort")],
    "start and abort processes": [("POST", "/api/v1/procs"), ("POST", "/api/v1/procs/p-1/abort")],
    "report work (runs, progress, timeline events)": _REPORTS,
    "run as a runner": _RUNNER,
    "read": _READS,
}


def page_roles() -> dict[str, list[str]]:
    """The claims of each operator role's row in the page's table, in order."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## Tokens, roles and scopes", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        found = re.match(r"^\| `(\w+)` \| (.+?) \| .+ \|$", line)
        if found and found.group(1) in BELOW:
            rows[found.group(1)] = _claims(found.group(2))
    return rows


def _claims(cell: str) -> list[str]:
    """The comma-separated claims of a cell, commas inside parentheses kept."""
    cell = cell.removeprefix("everything: ")
    parts, depth, current = [], 0, ""
    for char in cell:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return [*parts, current.strip()]


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


def _call(server: LiveServer, role: str | None, route: Route) -> httpx.Response:
    method, path = route
    with server.client(role) as http:
        return http.request(method, path, json={} if method in ("POST", "PUT") else None)


def test_the_page_names_every_operator_role() -> None:
    assert set(page_roles()) == set(BELOW)


def test_each_role_may_do_what_its_row_says_and_the_role_below_may_not(
    server: LiveServer,
) -> None:
    wrong: list[str] = []
    for role, claims in page_roles().items():
        for claim in claims:
            if claim not in CLAIMS:
                wrong.append(f"{role}: {claim!r} is claimed by the page but mapped to no route")
                continue
            for route in CLAIMS[claim] or []:
                wrong.extend(_check(server, role, claim, route))
    assert wrong == [], "\n".join(wrong)


def _check(server: LiveServer, role: str, claim: str, route: Route) -> list[str]:
    said: list[str] = []
    allowed = _call(server, role, route)
    if allowed.status_code in (401, 403):
        said.append(
            f"{role} may {claim!r} says the page, but {' '.join(route)} answered "
            f"{allowed.status_code}: {allowed.text}"
        )
    below = BELOW[role]
    refused = _call(server, below, route)
    expected = 401 if below is None else 403
    if refused.status_code != expected or (
        below is not None and f"this needs the {role} role" not in refused.text
    ):
        said.append(
            f"{below or 'no token'} may not {claim!r} (only {role}), but {' '.join(route)} "
            f"answered {refused.status_code}: {refused.text}"
        )
    return said
