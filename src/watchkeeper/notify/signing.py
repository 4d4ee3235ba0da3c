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
