"""Fixtures for timelines: a timeline service and a queue service on the test store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import make_settings
from tests.integration.queue.conftest import make_service
from watchkeeper.clock import ManualClock
from watchkeeper.queue.service import QueueService
from watchkeeper.store import Store
from watchkeeper.timeline.service import TimelineService


@pytest.fixture
def timeline(tmp_path: Path, store: Store, clock: ManualClock) -> TimelineService:
    """A timeline service with one private model priced by an override."""
    settings = make_settings(
        tmp_path, store.url, prices={"acme/coder-1": {"input_per_mtok": 1, "output_per_mtok": 4}}
    )
    return TimelineService(store, settings, clock=clock)


@pytest.fixture
def queue(tmp_path: Path, store: Store, clock: ManualClock) -> QueueService:
    """A queue service on the same store."""
    return make_service(tmp_path, store, clock)
