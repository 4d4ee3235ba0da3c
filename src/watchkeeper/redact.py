"""Remove secrets from text before it is stored, shown or sent anywhere.

Covers bearer and basic authorization headers, ``key=value`` pairs whose key
names a secret, URLs with passwords, private key blocks, and well-known token
shapes (API keys of common providers, JWTs, watchkeeper's own tokens).
"""

from __future__ import annotations

import re

MASK = "[redacted]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
        MASK,
    ),
    (
        re.compile(r"(?i)\b(authorization\s*[:=]\s*)(bearer|basic|token)\s+[^\s'\"]+"),
        rf"\1\2 {MASK}",
    ),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"), f"Bearer {MASK}"),
    (
        re.compile(
            r"(?i)\b([A-Za-z0-9_.-]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key"
            r"|private[_-]?key|credential|auth)[A-Za-z0-9_.-]*)([\"']?\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&]+)"
        ),
        rf"\1\2{MASK}",
    ),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+@"), rf"\1{MASK}@"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), MASK),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}"), MASK),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), MASK),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\bwk_[A-Za-z0-9_-]{20,}"), MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MASK),
)


def redact(text: str) -> str:
    """``text`` with every secret it appears to contain replaced by ``[redacted]``."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def tail(text: str, lines: int = 20, max_chars: int = 4000) -> str:
    """The last ``lines`` lines of ``text``, redacted and capped at ``max_chars``."""
    kept = "\n".join(text.splitlines()[-lines:])
    return redact(kept)[-max_chars:]
