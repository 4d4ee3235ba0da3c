"""``watchkeeper replicas`` against a real ``watchkeeper serve``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import patient_http

from ..support.cli import wk
from ..support.serving import serving
from .test_cli import config_file  # noqa: F401  (fixture)


@pytest.fixture
def served(config_file: Path) -> Iterator[tuple[str, str]]:  # noqa: F811
    with serving(config_file) as (_process, url, token):
        yield url, token


def test_replicas_lists_the_serving_replica_as_leader(served: tuple[str, str]) -> None:
    url, token = served
    env = {"WATCHKEEPER_URL": url, "WATCHKEEPER_TOKEN": token}
    listed = wk("replicas", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    body = json.loads(listed.stdout)
    health = patient_http.get(url + "/healthz", timeout=5).json()["cluster"]
    assert health["leader"] is True and health["leader_alive"] is True
    assert body["leader"] == health["replica"] == body["answered_by"]
    assert [(r["name"], r["alive"], r["leader"]) for r in body["replicas"]] == [
        (health["replica"], True, True)
    ]
    table = wk("replicas", env=env, columns=250)
    assert table.returncode == 0, table.stderr
    assert "Replicas (1)" in table.stdout
    assert f"leader: {health['replica']} (epoch {body['epoch']})" in table.stdout
    row = next(line for line in table.stdout.splitlines() if health["replica"] in line)
    assert "yes" in row and "leads" in row


def test_replicas_without_a_token_says_how_to_get_one(served: tuple[str, str]) -> None:
    url, _token = served
    refused = wk("replicas", "--server", url, env={"WATCHKEEPER_TOKEN": ""})
    assert refused.returncode == 1
    assert "missing bearer token" in refused.stderr
    assert "watchkeeper token create" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_replicas_of_an_unreachable_server_says_so() -> None:
    gone = wk("replicas", "--server", "http://127.0.0.1:9", "--token", "wk_x")
    assert gone.returncode == 1
    assert "cannot reach watchkeeper at http://127.0.0.1:9" in gone.stderr
    assert "Traceback" not in gone.stderr
