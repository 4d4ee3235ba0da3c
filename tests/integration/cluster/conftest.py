"""Three real replicas on one fresh PostgreSQL schema, a fake Telegram and an action service.

Every process is stopped at the end of each test, whether it passed or not.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ...conftest import PG_ADMIN_URL
from ...support.replicas import Cluster, fresh_schema
from ..fakes.platform import ActionService, action_service
from ..fakes.telegram import FakeTelegram, fake_telegram


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    """The chat platform every replica sends cards to."""
    with fake_telegram() as fake:
        yield fake


@pytest.fixture
def actions() -> Iterator[ActionService]:
    """The kind's own cancel endpoint, recording every press that reached it."""
    with action_service() as started:
        yield started


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    telegram: FakeTelegram,
    actions: ActionService,
) -> Iterator[Cluster]:
    """No replica yet: each test starts the ones it needs, and all of them stop at its end."""
    request.getfixturevalue("pg_schema_url")  # skips, or fails under CI, when PostgreSQL is away
    with fresh_schema(PG_ADMIN_URL) as url:
        replicas = Cluster(tmp_path, url, telegram, actions.url)
        try:
            yield replicas
        finally:
            replicas.close()
