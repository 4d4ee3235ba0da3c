"""The exception tree. Every error watchkeeper raises on purpose descends from one root.

::

    WatchkeeperError
    ├── ConfigError          the configuration file is wrong (exit status 2)
    ├── StoreError           the database could not be reached or used
    │   ├── StoreUnavailable the database is away (down, locked, unreachable)
    │   └── ValueRefused     a column cannot hold a value sent (also an InvalidInput)
    ├── NotFound             an id that does not exist
    ├── Conflict             the request contradicts what is stored
    ├── InvalidInput         a value the caller must change
    ├── KindUnreadable       an adapter could not read its kind's store
    └── ClientError          the HTTP API answered with an error
"""

from __future__ import annotations


class WatchkeeperError(Exception):
    """Root of every error watchkeeper raises on purpose."""

    exit_code = 1


class ConfigError(WatchkeeperError):
    """The configuration is wrong; the message names the key, the value and what is expected."""

    exit_code = 2


class StoreError(WatchkeeperError):
    """The database refused an operation."""


class StoreUnavailable(StoreError):
    """The database could not be reached."""


class NotFound(WatchkeeperError):
    """The named thing does not exist."""


class Conflict(WatchkeeperError):
    """The request contradicts what is already stored."""


class InvalidInput(WatchkeeperError):
    """A value the caller must change; the message says which and how."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ValueRefused(StoreError, InvalidInput):
    """The database cannot hold a value (too large a number, NUL in text): the caller's to fix."""


class KindUnreadable(WatchkeeperError):
    """An adapter could not read its kind's own store."""


class ClientError(WatchkeeperError):
    """The watchkeeper server answered a client call with an error."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{message} (HTTP {status}, {code})")
        self.status = status
        self.code = code
        self.message = message
