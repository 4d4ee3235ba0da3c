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
    │   ├── ValueRefused     a column cannot hold a value sent (also an InvalidInput)
    │   └── StoredDataUnreadable  a stored row holds a value that cannot be read
    ├── NotFound             an id that does not exist
    ├── Conflict             the request contradicts what is stored
    ├── Unauthorized         a request whose signature or secret does not check out
    ├── InvalidInput         a value the caller must change
    ├── KindUnreadable       an adapter could not read its kind's store
    ├── LeadershipLost       a singleton loop's write after its replica stopped leading
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

    def __init_subclass__(
        cls, *, http_status: int | None = None, code: str | None = None, **kwargs: object
    ) -> None:
        """Let a subclass declare its answer in its header: ``class X(Base, http_status=404)``."""
        super().__init_subclass__(**kwargs)
        if http_status is not None:
            cls.http_status = http_status
        if code is not None:
            cls.code = code


class ConfigError(WatchkeeperError):
    """The configuration is wrong; the message names the key, the value and what is expected."""

    exit_code = 2


class StoreError(WatchkeeperError):
    """The database refused an operation."""


class StoreUnavailable(StoreError, http_status=503, code="store_unavailable"):
    """The database could not be reached."""


class NotFound(WatchkeeperError, http_status=404, code="not_found"):
    """The named thing does not exist."""


class Conflict(WatchkeeperError, http_status=409, code="conflict"):
    """The request contradicts what is already stored."""


class Unauthorized(WatchkeeperError, http_status=401, code="unauthorized"):
    """The request is not from who it claims to be (a bad signature or secret): nothing changes."""


class InvalidInput(WatchkeeperError, http_status=422, code="invalid"):
    """A value the caller must change; the message says which and how."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ValueRefused(StoreError, InvalidInput, http_status=422, code="invalid"):
    """The database cannot hold a value (too large a number, NUL in text): the caller's to fix."""


class StoredDataUnreadable(StoreError, http_status=500, code="stored_data_unreadable"):
    """A stored row holds a value watchkeeper cannot read (written by hand, restored from a
    bad copy): the operator's to fix, never the caller's. Names the table and the row."""

    #: Whether the store logged it already (once per row): the API need not again.
    told = False

    def __init__(self, message: str, table: str | None = None, row_id: object = None) -> None:
        super().__init__(message)
        self.table = table
        self.row_id = row_id


class LeadershipLost(WatchkeeperError, http_status=503, code="not_leader"):
    """This replica's leader lease moved on: the write was refused, the new leader makes it."""


class KindUnreadable(WatchkeeperError):
    """An adapter could not read its kind's own store."""


class ClientError(WatchkeeperError):
    """The watchkeeper server answered a client call with an error."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        # Status 0: no HTTP answer came at all, and the message says why in words.
        super().__init__(f"{message} (HTTP {status}, {code})" if status else message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
