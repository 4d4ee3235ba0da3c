"""One merge is linked once, whatever bytes its delivery comes in.

A signed GitHub delivery was known only by the digest of its body, so the
same merge delivered again with its JSON written differently (another webhook
of the repository, other key order or spacing) linked its job a second time.
A merge is known by what it is: its repository, pull request and merge commit.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

import httpx
from alembic import command

from tests.integration.queue.conftest import submit
from tests.support import patient_http
from tests.support.live_server import LiveServer
from watchkeeper.queue.service import QueueService
from watchkeeper.store import Store
from watchkeeper.store.migrate import alembic_config, current_revision, head_revision, upgrade
from watchkeeper.store.timeline import TimelineStore

from .test_webhooks import GITHUB_SECRET, _merged
from .test_webhooks import queue as queue  # a fixture
from .test_webhooks import server as server  # a fixture

#: The same payload written as other senders write it.
WRITINGS: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "compact": lambda p: json.dumps(p, separators=(",", ":")).encode(),
    "indented": lambda p: json.dumps(p, indent=2).encode(),
    "sorted": lambda p: json.dumps(p, sort_keys=True).encode(),
    "escaped": lambda p: json.dumps(p, ensure_ascii=True).replace("/", "\\/").encode(),
}


def _post(server: LiveServer, body: bytes, delivery: str) -> httpx.Response:
    signature = hmac.new(GITHUB_SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": f"sha256={signature}",
        "Content-Type": "application/json",
    }
    return patient_http.post(f"{server.url}/webhooks/github", content=body, headers=headers)


def test_the_same_merge_in_other_bytes_is_linked_once(
    server: LiveServer, queue: QueueService, store: Store
) -> None:
    job = submit(queue)
    payload = _merged(f"Closes wk-job:{job.id}")
    first = _post(server, json.dumps(payload).encode(), "d-1")
    assert first.json() == {"outcome": "linked", "jobs": [job.id], "unknown_jobs": []}
    # Another webhook of the same repository says more, in its own way, and names the
    # repository in other letters: still that merge.
    other_hook = {**payload, "hook_id": 77, "repository": {"full_name": "ACME/App"}}
    for n, (name, write) in enumerate(WRITINGS.items()):
        for said in (payload, other_hook):
            answer = _post(server, write(said), f"d-{name}-{n}")
            assert answer.status_code == 200, answer.text
            assert answer.json()["outcome"] == "duplicate", (name, answer.json())
    (link,) = TimelineStore(store.engine).links(job.id)
    assert link["detail"]["delivery"] == "d-1"


def test_another_merge_of_the_same_job_is_linked_too(
    server: LiveServer, queue: QueueService, store: Store
) -> None:
    job = submit(queue)
    payload = _merged(f"Closes wk-job:{job.id}")
    assert _post(server, json.dumps(payload).encode(), "d-1").json()["outcome"] == "linked"
    pr = payload["pull_request"]
    others = [
        {**payload, "pull_request": {**pr, "merge_commit_sha": "def456"}},  # merged again
        {**payload, "pull_request": {**pr, "number": 43}},  # another pull request
        {**payload, "repository": {"full_name": "acme/other"}},  # another repository
    ]
    for n, other in enumerate(others):
        assert _post(server, json.dumps(other).encode(), f"d-{n + 2}").json()["outcome"] == (
            "linked"
        )
    assert len(TimelineStore(store.engine).links(job.id)) == 4


def test_the_same_merge_naming_one_more_job_links_that_job_alone(
    server: LiveServer, queue: QueueService, store: Store
) -> None:
    job, other = submit(queue), submit(queue)
    first = _post(server, json.dumps(_merged(f"Closes wk-job:{job.id}")).encode(), "d-1")
    assert first.json()["jobs"] == [job.id]
    both = _merged(f"Closes wk-job:{job.id}, wk-job:{other.id}")
    again = _post(server, json.dumps(both).encode(), "d-2")
    assert again.json() == {"outcome": "linked", "jobs": [other.id], "unknown_jobs": []}
    links = TimelineStore(store.engine)
    assert (len(links.links(job.id)), len(links.links(other.id))) == (1, 1)


def test_a_merge_linked_before_the_upgrade_is_not_linked_again_after_it(
    server: LiveServer, queue: QueueService, store: Store
) -> None:
    job = submit(queue)
    payload = _merged(f"Closes wk-job:{job.id}")
    assert _post(server, json.dumps(payload).encode(), "d-1").json()["outcome"] == "linked"
    with store.engine.connect() as connection, connection.begin():
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, "0025")  # as a store linked before merges had keys
    upgrade(store.engine)
    assert current_revision(store.engine) == head_revision()
    again = _post(server, json.dumps(payload, indent=1).encode(), "d-2")
    assert again.json()["outcome"] == "duplicate", again.json()
    assert len(TimelineStore(store.engine).links(job.id)) == 1
