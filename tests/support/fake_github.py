"""A fake GitHub on loopback: the comments and labels of any issue, behind a bearer token.

Every call is kept. ``hold_comments`` makes it take a comment and keep its answer back
until ``release`` is set, so a test can stop watchkeeper between its claim and
GitHub's answer.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import unquote

from .json_server import JsonHandler, JsonServer, answering

TOKEN = "ghp-results-token"
_ISSUE = re.compile(r"^/repos/([^/]+/[^/]+)/issues/(\d+)/(comments|labels)(?:/(.+))?$")


class FakeGitHub(JsonServer):
    """Comments and labels per issue (``OWNER/REPO#N``); every call kept."""

    calls: list[tuple[str, str]]
    comments: dict[str, list[str]]
    labels: dict[str, set[str]]
    hold_comments: bool
    held: threading.Event
    release: threading.Event
    lock: threading.Lock

    def comments_on(self, issue: str) -> list[str]:
        """The comments posted on ``issue`` so far."""
        with self.lock:
            return list(self.comments.get(issue, []))

    def labels_on(self, issue: str) -> set[str]:
        """The labels ``issue`` has now."""
        with self.lock:
            return set(self.labels.get(issue, set()))


class _Issues(JsonHandler):
    server: FakeGitHub

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        found = self._allowed("POST")
        if found is None:
            return
        issue, what, _ = found
        if what == "comments":
            with self.server.lock:
                self.server.comments.setdefault(issue, []).append(body["body"])
                count = len(self.server.comments[issue])
            if self.server.hold_comments:
                self.server.held.set()
                self.server.release.wait(30)
                return  # whoever asked is gone by now: no answer
            self.send_json(201, {"id": count})
        else:
            with self.server.lock:
                labels = self.server.labels.setdefault(issue, set())
                labels.update(body["labels"])
                named = [{"name": name} for name in sorted(labels)]
            self.send_json(200, named)

    def do_DELETE(self) -> None:
        found = self._allowed("DELETE")
        if found is None:
            return
        issue, what, name = found
        with self.server.lock:
            labels = self.server.labels.setdefault(issue, set())
            if what != "labels" or name not in labels:
                self.send_json(404, {"message": "Label does not exist"})
                return
            labels.discard(name)
            named = [{"name": label} for label in sorted(labels)]
        self.send_json(200, named)

    def _allowed(self, method: str) -> tuple[str, str, str | None] | None:
        path = unquote(self.path)
        with self.server.lock:
            self.server.calls.append((method, path))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.send_json(401, {"message": "Bad credentials"})
            return None
        match = _ISSUE.match(path)
        if match is None:
            self.send_json(404, {"message": "Not Found"})
            return None
        return f"{match.group(1)}#{match.group(2)}", match.group(3), match.group(4)


@contextmanager
def fake_github() -> Iterator[FakeGitHub]:
    """A fake GitHub answering until the block ends."""
    fake = FakeGitHub(("127.0.0.1", 0), _Issues)
    fake.calls, fake.comments, fake.labels = [], {}, {}
    fake.hold_comments = False
    fake.held, fake.release, fake.lock = threading.Event(), threading.Event(), threading.Lock()
    with answering(fake):
        try:
            yield fake
        finally:
            fake.release.set()  # a held answer must not keep the server from stopping
