"""Fuzz the API from its own OpenAPI schema: whatever arrives, never a 500.

Bounded: about 200 generated requests across the operations.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable

from watchkeeper.clock import utcnow
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.server.app import create_app
from watchkeeper.store import Store
from watchkeeper.store.runs import NewRun
from watchkeeper.store.tokens import Role

from ..conftest import make_settings

TOKEN: dict[str, str] = {}


@pytest.fixture(scope="module")
def fuzzed_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    data = tmp_path_factory.mktemp("fuzz")
    store = Store(f"sqlite:///{data / 'watchkeeper.db'}")
    settings_ = make_settings(data, store.url)
    runtime = Runtime.open(
        settings_, clock=utcnow, store=store, notifier=OpsNotifier(settings_.ops)
    )
    _, TOKEN["admin"] = store.tokens.create(Role.ADMIN, "fuzz", utcnow())
    store.runs.start(NewRun("crawl", "known", "t", None, "none", None, None, 90), utcnow())
    app = create_app(runtime, run_supervisor=False)
    yield schemathesis.openapi.from_asgi("/openapi.json", app)
    runtime.close()


def test_no_request_makes_the_server_fail(fuzzed_app: Any) -> None:
    operations = [result.ok() for result in fuzzed_app.get_all_operations()]
    assert len(operations) >= 9
    seen: list[int] = []
    modes = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
    for operation, mode in [(op, mode) for op in operations for mode in modes]:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=11,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case: Any) -> None:
            response = case.call(headers={"Authorization": f"Bearer {TOKEN['admin']}"})
            seen.append(response.status_code)
            assert response.status_code < 500, (case.method, case.path, response.text)
            if response.status_code >= 400:
                body = response.json()
                assert set(body) == {"error"}, body
                assert body["error"]["message"], body

        try:
            check()
        except Unsatisfiable:
            # Operations without parameters have no invalid form to generate.
            assert mode is schemathesis.GenerationMode.NEGATIVE
    assert len(seen) >= 100
