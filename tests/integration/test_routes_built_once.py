"""Each route's models are built once, where the route is declared.

FastAPI (0.138 and later) builds every route of an included router again, for each app,
the first time a request walks past the router: 0.9 s of the server's start-up, and again
for every app a process builds. The app serves the routes as they were declared instead.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import fastapi.routing
import pytest
from fastapi.testclient import TestClient

from watchkeeper.runtime import Runtime
from watchkeeper.server.app import ROUTERS, create_app

#: One path of each part of the server, and one that none of them answers (every router is
#: walked past for it).
WALKED = ["/healthz", "/api/v1/incidents", "/api/v1/programs", "/web/login", "/web/nowhere"]


def test_an_app_builds_no_route_its_routers_declared(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: Counter[str] = Counter()
    populate = fastapi.routing._populate_api_route_state

    def counted(route: Any, path: str, *args: Any, **kwargs: Any) -> None:
        built[path] += 1
        populate(route, path, *args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "_populate_api_route_state", counted)
    app = create_app(runtime, run_sweeper=False)
    with TestClient(app) as client:
        answers = {path: client.get(path, follow_redirects=False).status_code for path in WALKED}
    assert answers["/healthz"] == 200 and all(code < 500 for code in answers.values()), answers
    declared = {route.path for router in ROUTERS for route in router.routes}  # type: ignore[attr-defined]
    assert not declared & set(built), sorted(declared & set(built))
    assert all(count == 1 for count in built.values()), built
