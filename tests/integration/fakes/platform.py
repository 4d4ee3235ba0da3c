"""What the fake chat platforms share, and the work's own action service.

Each fake (Discord, Slack) keeps its own wire format, signature scheme and
quirks; this base holds the rest: the loopback HTTP server, the request log,
queued faults, a per-channel rate limit window, and the platform-neutral verbs
the shared scenarios in ``tests/integration/notify/test_chat_platforms.py``
use (press a button, read the private replies to a press, ask ``/runs``).
"""

from __future__ import annotations

import ssl
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, NoReturn

import httpx

from tests.support.waiting import wait_for

#: One TLS context for every test client: building one per client costs ~0.1 s (the fakes
#: speak plain HTTP, so it is never used for a handshake).
LOOPBACK_TLS = ssl.create_default_context()


@dataclass
class FakePlatform(ABC):
    """State every fake keeps and the knobs tests turn, whatever the platform."""

    #: Our name of the platform (settings table, ``origin`` platform, ``via``).
    NAME: ClassVar[str]
    #: How our messages name the platform ("... by @ana on Slack").
    TITLE: ClassVar[str]
    #: The conversation the tests post to, in the platform's id format.
    CHAT: ClassVar[str]
    #: What our endpoint answers a press with: (HTTP status, body) as :meth:`answer` reads it.
    ACK: ClassVar[tuple[int, Any]]
    #: The key holding a private reply's text.
    TEXT: ClassVar[str]
    #: The fields that make a reply visible to the presser only.
    PRIVATE: ClassVar[dict[str, Any]]
    #: The fields of our answer to ``/runs``.
    RUNS: ClassVar[dict[str, Any]]
    #: The longest message text the platform accepts.
    MAX_TEXT: ClassVar[int]
    #: Whether a decided card keeps its remaining buttons (else they are removed).
    KEEPS_BUTTONS: ClassVar[bool]

    url: str = ""
    token: str = ""
    invalid: list[str] = field(default_factory=list)
    #: Faults queued for the next creates, in each platform's own words.
    faults: list[Any] = field(default_factory=list)
    #: Creates allowed per channel within ``window_s`` before 429s (``None``: unlimited).
    per_channel_limit: int | None = 5
    window_s: float = 5.0
    released: threading.Event = field(default_factory=threading.Event)
    changed: threading.Condition = field(default_factory=threading.Condition)
    _posted: dict[str, list[float]] = field(default_factory=dict)

    def wait_for(self, check: Callable[[], bool], timeout: float = 15.0) -> None:
        """Block until ``check()`` holds (checked whenever a request arrives)."""
        wait_for(
            check, what=f"the fake {self.TITLE} to see it", timeout=timeout, changed=self.changed
        )

    def _take_slot(self, channel: str) -> float | None:
        """Count one post in ``channel``; ``None``, or how long until the window has room."""
        now = time.monotonic()
        recent = [t for t in self._posted.get(channel, []) if now - t < self.window_s]
        if self.per_channel_limit is not None and len(recent) >= self.per_channel_limit:
            return round(self.window_s - (now - recent[0]), 3)
        self._posted[channel] = [*recent, now]
        return None

    def _hang(self) -> NoReturn:
        """Hold the request until the test ends, then drop it unanswered."""
        self.released.wait(30)
        raise ConnectionAbortedError

    @abstractmethod
    def credentials(self) -> dict[str, Any]:
        """What our settings table for this platform needs to reach this fake and trust it."""

    @abstractmethod
    def stored(self) -> list[Any]:
        """Every message the fake holds."""

    @abstractmethod
    def message(self, message_id: str) -> Any:
        """The message our channel was told has ``message_id``."""

    @abstractmethod
    def in_channel(self, channel: str) -> list[Any]:
        """The messages of one conversation, oldest first."""

    @abstractmethod
    def press(
        self, server_url: str, card: Any, label: str, user_id: str, username: str, timestamp: int
    ) -> tuple[httpx.Response, dict[str, Any]]:
        """Press ``label`` on ``card`` as the platform would; our answer and what was sent."""

    @abstractmethod
    def repeat(self, server_url: str, payload: dict[str, Any], timestamp: int) -> httpx.Response:
        """Deliver a press already sent once again, as the platform does on a retry."""

    @abstractmethod
    def replies_to(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        """What our side sent back privately to the presser of ``payload``."""

    @abstractmethod
    def runs(
        self, server_url: str, user_id: str, username: str, everything: bool, timestamp: int
    ) -> Any:
        """Ask ``/runs`` (``all`` when ``everything``); the answer's JSON."""

    @abstractmethod
    def runs_text(self, answer: dict[str, Any]) -> str:
        """The text of our answer to ``/runs``."""

    @staticmethod
    @abstractmethod
    def answer(response: httpx.Response) -> tuple[int, Any]:
        """Our endpoint's answer to a press, in the shape ``ACK`` is written in."""


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], release: threading.Event) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port and yield its URL; on exit set ``release``
    (so no request stays held) and stop."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# -- the work's own service, whose actions can be held open -----------------------------------


@dataclass
class ActionService:
    """The kind's own action endpoint (shared by the chat platform tests).

    With ``hold`` set, every call waits until ``release`` is set, so a test can
    show that a press is answered while the action it started is still running.
    """

    url: str = ""
    paths: list[str] = field(default_factory=list)
    hold: bool = False
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, check: Callable[[], bool], timeout: float = 15.0) -> None:
        """Block until ``check()`` holds (checked whenever a call ends)."""
        wait_for(check, what="the action service to see it", timeout=timeout, changed=self.changed)


@contextmanager
def action_service() -> Iterator[ActionService]:
    """Start the service on a free port; release anything held and stop it on exit."""
    service = ActionService()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if service.hold:
                service.entered.set()
                service.release.wait(30)
            with service.changed:
                service.paths.append(self.path)
                service.changed.notify_all()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            return

    with serving(Handler, service.release) as url:
        service.url = url
        yield service
