"""What a forge delivery is known by when the same thing may arrive in other bytes.

A webhook delivery is handled once, known by a key in ``forge_deliveries``.
For most deliveries the key is the SHA-256 of the signed body. A merged pull
request is known by what it is instead, so the same merge delivered again with
its JSON written differently (another webhook of the same repository, other
key order or spacing) is still one merge, and each job it names is linked to
it once: see :func:`merge_delivery_id` and :func:`merge_link_id`. Migration
0026 keys the merges linked before it the same way, so both must agree: these
functions serve both.
"""

from __future__ import annotations

import hashlib

#: ``forge_deliveries.delivery_id`` holds at most this many characters.
DELIVERY_ID_MAX = 200
MERGE_PREFIX = "merge:"


def merge_delivery_id(repository: object, number: object, commit: object) -> str | None:
    """``merge:<owner/repo>#<number>@<merge commit>``; ``None`` when one of them is missing.

    GitHub's names are case-insensitive and its hashes hex: both are lower-cased.
    """
    if not (isinstance(repository, str) and repository.strip()):
        return None
    if not isinstance(number, int) or isinstance(number, bool):
        return None
    if not (isinstance(commit, str) and commit.strip()):
        return None
    return _fit(f"{MERGE_PREFIX}{repository.strip().lower()}#{number}@{commit.strip().lower()}")


def merge_link_id(merge_id: str, job_id: str) -> str:
    """The key of ``job_id``'s link to the merge known as ``merge_id``."""
    return _fit(f"{merge_id} {job_id}")


def _fit(key: str) -> str:
    # Hashed rather than cut when longer than the column: two keys never become one.
    if len(key) <= DELIVERY_ID_MAX:
        return key
    return MERGE_PREFIX + hashlib.sha256(key.encode()).hexdigest()
