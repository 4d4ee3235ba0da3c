"""An engine kind's table: ``engine`` sets the adapter, and a bad key or value is named."""

from __future__ import annotations

from typing import Any

import pytest

from watchkeeper import config
from watchkeeper.errors import ConfigError
from watchkeeper.kinds import registry
from watchkeeper.kinds.base import AdapterContext


def build(table: dict[str, Any]) -> None:
    settings = config.parse({"kinds": {"jobs": table}}, "watchkeeper.toml")
    registry.build(settings, AdapterContext(settings, None))


def test_engine_names_the_adapter() -> None:
    settings = config.parse({"kinds": {"jobs": {"engine": "rq", "url": "redis://h/0"}}}, "t")
    assert settings.kinds["jobs"].adapter == "rq"
    assert settings.kinds["jobs"].options == {"url": "redis://h/0"}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            {"engine": "celery", "url": "redis://h/0", "bakend": "redis://h/1"},
            "kinds.jobs.bakend: unknown option for adapter 'celery'",
        ),
        ({"engine": "arq"}, "kinds.jobs.url is required by adapter 'arq'"),
        (
            {"engine": "celery", "url": "redis://h/0", "backend": "rpc://"},
            "kinds.jobs.backend = 'rpc://': watchkeeper reads Celery's Redis result backend",
        ),
        (
            {"engine": "langgraph", "url": "mysql://h/agent"},
            "kinds.jobs.url = 'mysql://h/agent': a LangGraph checkpointer is read from",
        ),
        (
            {"engine": "rq", "url": "redis://h/0", "heartbeat_grace_s": -1},
            "kinds.jobs.heartbeat_grace_s = -1:",
        ),
    ],
)
def test_a_bad_engine_table_is_named(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        build(table)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"engine": "temporal"}, "kinds.jobs.engine = 'temporal': Input should be 'celery'"),
        (
            {"engine": "celery", "adapter": "sql"},
            "kinds.jobs: engine = 'celery' reads the work through the celery adapter: "
            "remove adapter = 'sql'",
        ),
    ],
)
def test_a_bad_engine_name_is_named(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config.parse({"kinds": {"jobs": table}}, "watchkeeper.toml")
    assert message in str(raised.value)
