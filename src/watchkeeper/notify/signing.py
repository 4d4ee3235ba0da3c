"""How watchkeeper signs what it POSTs: the ops webhook and the webhook channel share one scheme."""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Watchkeeper-Signature"
TIMESTAMP_HEADER = "X-Watchkeeper-Timestamp"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """HMAC-SHA256 over ``timestamp.body``, as ``sha256=<hex>``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def signed_headers(secret: str | None, body: bytes, now_s: float) -> dict[str, str]:
    """The JSON POST's headers, signed at ``now_s`` (epoch seconds) when a secret is set."""
    headers = {"Content-Type": "application/json"}
    if secret:
        stamp = str(int(now_s))
        headers[TIMESTAMP_HEADER] = stamp
        headers[SIGNATURE_HEADER] = sign(secret, stamp, body)
    return headers
