"""Fixtures shared by the decision surface tests: a recording action service and a live API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import utcnow
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...conftest import make_settings
from ...support.live_server import LiveServer, live_server
from ..recorder import Recorder, recording_server
from .fixtures import acting_kinds


@pytest.fixture
def service() -> Iterator[Recorder]:
    with recording_server() as recorder:
        yield recorder


@pytest.fixture
def api(tmp_path: Path, store: Store, service: Recorder) -> Iterator[LiveServer]:
    settings = make_settings(tmp_path, store.url, kinds=acting_kinds(service.url))
    runtime = Runtime.open(settings, clock=utcnow, store=store, notifier=OpsNotifier(settings.ops))
    with live_server(runtime) as server:
        yield server
    runtime.sweeper.close()
