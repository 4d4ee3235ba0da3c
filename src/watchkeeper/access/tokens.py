"""API tokens: create, list, revoke, and check a presented secret (briefly cached).

The token records and roles are defined beside their table
(:mod:`watchkeeper.store.tokens`) and re-exported here, so the layers above
the services name them without importing the store.
"""

from __future__ import annotations

import time

from watchkeeper.clock import Now
from watchkeeper.store import Store
from watchkeeper.store.tokens import Role, TaskToken, TokenInfo, hash_token, parse_role

__all__ = ["TOKEN_CACHE_S", "Role", "TaskToken", "TokenInfo", "TokenService", "parse_role"]

#: How long a checked token is trusted without asking the database again. A token revoked
#: from another process stops working within this time.
TOKEN_CACHE_S = 5.0
#: Past this many entries the cache starts afresh: forged tokens must not grow it without bound.
MAX_CACHED = 10_000


class TokenService:
    """Operator tokens for people, and the check every authenticated request makes.

    Checked tokens are kept for :data:`TOKEN_CACHE_S` (by the monotonic clock:
    it bounds a cache, it is no fact about the work). Task tokens are never
    kept: one is removed the moment its task ends, and must stop working at
    once, from any replica.
    """

    def __init__(self, store: Store, clock: Now, *, cache_s: float = TOKEN_CACHE_S) -> None:
        self._tokens = store.tokens
        self._clock = clock
        self._cache_s = cache_s
        self._kept: dict[str, tuple[TokenInfo | None, float]] = {}

    def create(self, role: Role | str, name: str) -> tuple[TokenInfo, str]:
        """A new token; its secret is returned once and never stored."""
        chosen = role if isinstance(role, Role) else parse_role(role)
        return self._tokens.create(chosen, name, self._clock())

    def list(self) -> list[TokenInfo]:
        """Every operator token, oldest first (never a secret)."""
        return self._tokens.list()

    def revoke(self, token_id: int) -> None:
        """Revoke a token; this process stops trusting it at once."""
        self._tokens.revoke(token_id, self._clock())
        self._kept.clear()

    def first_admin(self) -> str | None:
        """The secret of a new admin token when no live one exists yet, else ``None``.

        Replicas starting together on one database make one token between them:
        the check and the insert are one conditional write.
        """
        made = self._tokens.create_first(Role.ADMIN, "first admin", self._clock())
        return None if made is None else made[1]

    def login(self, secret: str) -> TokenInfo | None:
        """The live operator token for ``secret`` (a dashboard login; never cached)."""
        return self._tokens.authenticate(secret) if secret else None

    def cached(self, secret: str) -> tuple[bool, TokenInfo | None]:
        """Whether the cache still answers for ``secret`` and, if so, its answer.

        Never asks the database, so an event loop may call it; on a miss, call :meth:`check`.
        """
        kept = self._kept.get(hash_token(secret))
        if kept is not None and kept[1] > time.monotonic():
            return True, kept[0]
        return False, None

    def check(self, secret: str) -> TokenInfo | TaskToken | None:
        """The live token of either kind for ``secret``, from the cache while it is fresh."""
        digest = hash_token(secret)
        now = time.monotonic()
        kept = self._kept.get(digest)
        if kept is not None and kept[1] > now:
            return kept[0]
        found = self._tokens.lookup(secret)
        if isinstance(found, TaskToken):
            return found
        if len(self._kept) > MAX_CACHED:
            self._kept.clear()
        self._kept[digest] = (found, now + self._cache_s)
        return found
