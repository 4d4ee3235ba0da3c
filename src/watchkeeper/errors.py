"""The exception tree. Every error watchkeeper raises on purpose descends from one root.

Each class carries the HTTP status and the stable error code the API answers
with (``http_status``, ``code``) and the command line's exit status
(``exit_code``); the API maps an error by its class through them, so a new
error declares its answer where it is defined. Packages add their own
subclasses (``procs.errors``, ``queue.errors``, ``supervise.errors``...).

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

    #: The API's answer: an error no subclass maps is the server's own fault.
    http_status: int = 500
    code: str = "internal"
    #: The request field the error is about, when there is one.
    field: str | None = None
    exit_code: int = 1


class ConfigError(WatchkeeperError):
    """The configuration is wrong; the message names the key, the value and what is expected."""

    exit_code = 2


class StoreError(WatchkeeperError):
    """The database refused an operation."""


class StoreUnavailable(StoreError):
    """The database could not be reached."""

    http_status = 503
    code = "store_unavailable"


class NotFound(WatchkeeperError):
    """The named thing does not exist."""

    http_status = 404
    code = "not_found"


class Conflict(WatchkeeperError):
    """The request contradicts what is already stored."""

    http_status = 409
    code = "conflict"


class InvalidInput(WatchkeeperError):
    """A value the caller must change; the message says which and how."""

    http_status = 422
    code = "invalid"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ValueRefused(StoreError, InvalidInput):
    """The database cannot hold a value (too large a number, NUL in text): the caller's to fix."""

    http_status = 422
    code = "invalid"


class KindUnreadable(WatchkeeperError):
    """An adapter could not read its kind's own store."""


class ClientError(WatchkeeperError):
    """The watchkeeper server answered a client call with an error."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{message} (HTTP {status}, {code})")
        self.status = status
        self.code = code
        self.message = message
