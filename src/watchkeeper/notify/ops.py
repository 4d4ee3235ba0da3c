"""Notices for operators: the log, and a signed webhook. Needs no database."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from typing import Any

import httpx

from watchkeeper.clock import rfc3339
from watchkeeper.config import OpsConfig
from watchkeeper.watch.selfcheck import Notice, NoticeKind

log = logging.getLogger(__name__)
SIGNATURE_HEADER = "X-Watchkeeper-Signature"
TIMESTAMP_HEADER = "X-Watchkeeper-Timestamp"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """HMAC-SHA256 over ``timestamp.body``, as ``sha256=<hex>``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def notice_payload(notice: Notice) -> dict[str, Any]:
    """The JSON body of an ops notice."""
    return {
        "type": notice.kind.value,
        "text": notice.text,
        "at": rfc3339(notice.at),
        "failing_since": rfc3339(notice.failing_since),
        "error": notice.error,
    }


class OpsNotifier:
    """Sends supervision notices to the log and the configured webhook."""

    def __init__(self, config: OpsConfig, attempts: int = 3) -> None:
        self.config = config
        self.attempts = attempts
        self.sent: list[Notice] = []

    def send(self, notice: Notice) -> None:
        """Deliver ``notice``; blocking, so callers run it off the event loop."""
        level = logging.ERROR if notice.kind is NoticeKind.DOWN else logging.WARNING
        log.log(level, notice.text, extra={"action": notice.kind.value})
        self.sent.append(notice)
        if self.config.webhook_url:
            self._post(notice_payload(notice))

    def _post(self, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        if self.config.webhook_secret:
            stamp = str(int(time.time()))
            headers[TIMESTAMP_HEADER] = stamp
            headers[SIGNATURE_HEADER] = sign(self.config.webhook_secret, stamp, body)
        url = self.config.webhook_url
        assert url is not None
        for attempt in range(1, self.attempts + 1):
            try:
                response = httpx.post(
                    url, content=body, headers=headers, timeout=self.config.timeout_s
                )
            except httpx.HTTPError as exc:
                log.warning(
                    "Ops webhook attempt %d failed: %s",
                    attempt,
                    exc,
                    extra={"action": "ops_webhook"},
                )
            else:
                if response.is_success:
                    return
                log.warning(
                    "Ops webhook attempt %d answered HTTP %d",
                    attempt,
                    response.status_code,
                    extra={"action": "ops_webhook"},
                )
                if response.status_code < 500 and response.status_code != 429:
                    return
            time.sleep(min(2.0**attempt * 0.1, 2.0))
