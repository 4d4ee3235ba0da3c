"""Fixtures the Discord, Slack and shared chat platform tests have in common.

Each of those modules provides ``fake`` (its platform's fake, or both in turn);
``acting`` builds a runtime that talks to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..fakes.platform import ActionService, FakePlatform, action_service
from .chat import chat_runtime


@pytest.fixture
def actions() -> Iterator[ActionService]:
    """The kind's own action endpoint, recording what a press set off."""
    with action_service() as started:
        yield started


@pytest.fixture
def acting(
    tmp_path: Path, store: Store, clock: ManualClock, actions: ActionService, fake: FakePlatform
) -> Iterator[Runtime]:
    """A runtime with actions wired to ``actions`` and its chat table pointing at ``fake``."""
    runtime = chat_runtime(tmp_path, store, clock, actions.url, fake)
    yield runtime
    runtime.sweeper.close()
