"""The shape every channel shares, and how a failed HTTP call is classified.

A send ends in one of four ways, and the outbox acts on each differently:

- ``SENT``: the platform accepted it (with its message id).
- ``RETRY``: it definitely did not arrive (connection refused, connect
  timeout, HTTP 429): back to pending, retried with backoff (after the
  platform's ``retry_after`` for a 429).
- ``FAILED``: the platform refused it for good (400, 403, 404: bad button
  data, bot blocked, chat not found): shown on the incident.
- ``MAYBE_SENT``: nobody can tell (write or read timeout, connection dropped
  mid-request, any 5xx): never sent again automatically, unless the channel
  makes resends safe (``idempotent_sends``, within ``resend_window`` of the
  first such call) or the call was an edit.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from contextlib import suppress
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

import aiohttp
import httpx
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from watchkeeper.config import resolve_secret
from watchkeeper.errors import ConfigError
from watchkeeper.notify.message import Message, Target


def fit(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending in an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class SendOutcome(StrEnum):
    """How one call to a platform ended."""

    SENT = "sent"
    RETRY = "retry"
    FAILED = "failed"
    MAYBE_SENT = "maybe_sent"


@dataclass(frozen=True, slots=True)
class SendResult:
    """A send's outcome, the platform's message id, and why it did not work."""

    outcome: SendOutcome
    message_id: str | None = None
    error: str | None = None
    retry_after_s: float | None = None
    #: Seconds the conversation's route may take no other call (the platform said its
    #: bucket is spent), whatever the call's outcome.
    hold_s: float | None = None
    #: False when the platform was never called (its breaker is open, or a note waits for
    #: its card): a wait like that spends none of the message's attempts.
    called: bool = True


def classify_error(exc: httpx.HTTPError) -> SendResult:
    """A transport error: definitely not sent, or cannot tell."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
        return SendResult(SendOutcome.RETRY, error=f"not sent: {type(exc).__name__}: {exc}")
    return SendResult(
        SendOutcome.MAYBE_SENT, error=f"may have been sent: {type(exc).__name__}: {exc}"
    )


def as_httpx_error(exc: aiohttp.ClientError | TimeoutError) -> httpx.HTTPError:
    """The general client's error for the same failure, so both are classified (and
    named on incidents) alike: only a connection never made, or no free one in time,
    is known not to have sent anything."""
    kind: type[httpx.HTTPError]
    if isinstance(exc, aiohttp.ClientConnectorError):  # refused, no such name, TLS refused
        kind = httpx.ConnectError
    elif isinstance(exc, aiohttp.ConnectionTimeoutError):  # making one, or waiting for one
        kind = httpx.ConnectTimeout
    elif isinstance(exc, TimeoutError):  # the answer is late (aiohttp's are TimeoutErrors)
        kind = httpx.ReadTimeout
    elif isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        kind = httpx.RemoteProtocolError  # closed before the answer was whole
    elif isinstance(exc, aiohttp.ClientResponseError):  # an answer not understood
        kind = httpx.RemoteProtocolError
    elif isinstance(exc, aiohttp.NonHttpUrlClientError | aiohttp.InvalidURL):
        kind = httpx.UnsupportedProtocol
    else:  # the connection failed while the request or its answer went over it
        kind = httpx.ReadError
    return kind(str(exc) or type(exc).__name__)


def classify_status(response: httpx.Response, retry_after_s: float | None = None) -> SendResult:
    """A non-success answer: 429 retries, other 4xx fail for good, 5xx cannot tell."""
    reason = f"HTTP {response.status_code}: {response.text[:300]}"
    if response.status_code == 429:
        header = response.headers.get("Retry-After")
        if retry_after_s is None and header is not None:
            try:
                retry_after_s = float(header)
            except ValueError:
                retry_after_s = None
        return SendResult(SendOutcome.RETRY, error=reason, retry_after_s=retry_after_s)
    if 400 <= response.status_code < 500:
        return SendResult(SendOutcome.FAILED, error=reason)
    return SendResult(SendOutcome.MAYBE_SENT, error=reason)


class Channel(ABC):
    """Posts and edits messages on one platform. Subclasses implement ``send`` and ``edit``.

    Library-level automatic retries must be off: the outbox alone decides
    whether a message is sent again.
    """

    #: The channel's name in targets and configuration.
    name = "abstract"
    #: True when the platform deduplicates resends (Discord's nonce): ambiguous sends retry,
    #: and so does a send cut off by its process's death.
    idempotent_sends = False
    #: How long after a call the platform still takes its resend for the same message; a
    #: resend later than this could show the message twice, and is not made.
    resend_window = timedelta(0)
    #: Posts per second allowed to one conversation (the platform's own limit).
    per_chat_rate = 1.0
    #: Posts per second allowed across every conversation of the bot (``None``: no limit).
    global_rate: float | None = None
    #: Calls in flight at once: enough to keep many conversations going. A chat channel
    #: keeps as many connections alive (see ``ChatChannel``).
    max_in_flight = 16

    def pace_key(self, target: Target) -> str:
        """The pacing row of ``target``: its conversation, thread and all, unless the
        platform counts a chat's threads together."""
        return target.place

    def chat_gap_s(self, target: Target) -> float:
        """Seconds between two posts to the conversation of ``target``."""
        return 1.0 / self.per_chat_rate

    def burst_paces(self, target: Target) -> dict[str, tuple[float, float]]:
        """Further pacing rows of ``target`` that allow a burst: place -> (gap, burst),
        a send allowed up to ``burst`` seconds ahead of the row's one-per-``gap`` schedule."""
        return {}

    @abstractmethod
    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        """Post ``message`` to ``target``; never raises for platform or network failures."""

    @abstractmethod
    async def edit(self, target: Target, message: Message) -> SendResult:
        """Replace the message ``target.message_id`` (text and buttons); safe to repeat."""

    async def aclose(self) -> None:  # noqa: B027 - optional: channels without clients hold nothing
        """Release connections."""


class BotConfig(Protocol):
    """What every chat platform's settings say about reaching its API as a bot."""

    @property
    def bot_token(self) -> str | None:
        """The token itself, when the file holds it."""

    @property
    def bot_token_env(self) -> str | None:
        """The environment variable holding the token."""

    @property
    def base_url(self) -> str:
        """Where the platform's API answers."""

    @property
    def timeout_s(self) -> float:
        """How long one call may take."""


ConfigT = TypeVar("ConfigT", bound=BotConfig)


def decoded_json(response: httpx.Response) -> Any:
    """The answer's JSON, or ``None`` when it is not JSON (a proxy's error page, say)."""
    try:
        return response.json()
    except ValueError:
        return None


class ChatChannel(Channel, Generic[ConfigT]):
    """A chat platform reached with a bot token over an HTTP session of its own.

    The session keeps up to ``max_in_flight`` connections alive, one per call
    in flight; calls beyond wait for one, within the connect timeout. It does
    not follow redirects, keeps no cookies and never retries a call. The tests
    send through this same session to local servers speaking each platform's wire
    format, so the path they prove is the one production runs.

    A missing or unreadable token does not stop the server: the channel keeps
    the reason in ``problem`` and every send fails with it.
    """

    def __init__(self, config: ConfigT) -> None:
        self.config = config
        #: Made on the first call: a session belongs to the event loop it was made in.
        self._session: aiohttp.ClientSession | None = None
        #: The trust store the general client would use (certifi, or ``SSL_CERT_FILE``),
        #: loaded once: loading it is the costly part of a connection's TLS.
        self._tls = httpx.create_ssl_context()
        #: Host -> (proxy, its credentials), the proxy from the environment as ``trust_env``
        #: would find it, but looked up once per host (a Discord channel's address names
        #: the chat): ``trust_env`` looks up the proxy and ``.netrc`` on a thread on every
        #: call (more CPU than the call).
        self._proxies: dict[str, tuple[URL | None, aiohttp.BasicAuth | None]] = {}
        self.base_url = config.base_url.rstrip("/")
        setting = f"{self.name}.bot_token"
        self._token: str | None
        self.problem: str | None
        try:
            self._token = resolve_secret(config.bot_token, config.bot_token_env, setting)
            self.problem = None if self._token else f"{setting} is not configured"
        except ConfigError as exc:
            self._token = None
            self.problem = str(exc)

    def _unconfigured(self) -> SendResult | None:
        """The failure every call ends in while the bot token is missing."""
        return None if self._token else SendResult(SendOutcome.FAILED, error=self.problem)

    async def _request(
        self, method: str, url: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> httpx.Response | SendResult:
        """One call: the platform's answer, or why there is none (classified, never raised)."""
        raw = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        sending = {"Content-Type": "application/json", **(headers or {})}
        try:
            target, proxy, proxy_auth = self._address(url)
            session = self._session or self._open()
            async with session.request(
                method,
                target,
                data=raw.encode(),
                headers=sending,
                proxy=proxy,
                proxy_auth=proxy_auth,
                allow_redirects=False,
            ) as answer:
                content = await answer.read()
                return httpx.Response(answer.status, headers=answer.raw_headers, content=content)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return classify_error(as_httpx_error(exc))

    def _address(self, url: str) -> tuple[URL, URL | None, aiohttp.BasicAuth | None]:
        """``url`` parsed, and the proxy the environment names for its host (if any)."""
        target = URL(url)
        host = f"{target.scheme}://{target.host}:{target.port}"
        found = self._proxies.get(host)
        if found is None:
            found = (None, None)
            with suppress(LookupError):  # no proxy for this host
                found = get_env_proxy_for_url(target)
            if len(self._proxies) < 64:  # a channel calls a handful of hosts
                self._proxies[host] = found
        return target, *found

    def _open(self) -> aiohttp.ClientSession:
        timeout_s = self.config.timeout_s
        self._session = aiohttp.ClientSession(
            # ``connect`` also bounds the wait for a free connection: nothing sent yet.
            connector=aiohttp.TCPConnector(limit=self.max_in_flight, ssl=self._tls),
            timeout=aiohttp.ClientTimeout(total=None, connect=timeout_s, sock_read=timeout_s),
            headers={"User-Agent": "watchkeeper"},
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        return self._session

    async def aclose(self) -> None:
        """Close the HTTP session this channel made."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()
