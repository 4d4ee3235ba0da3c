"""Logging for long-lived commands (``serve``, ``runner``) that cannot carry a secret out.

Two leaks are closed here. HTTP clients log every request URL at INFO, and
some APIs put the credential in the URL (Telegram's ``/bot<token>/``), so
their loggers are held at WARNING. And every record is passed through
:func:`watchkeeper.redact.redact`: message, traceback and stack alike.

A filter on the root handlers covers what propagates to them; loggers with
handlers of their own, configured later (uvicorn's, once ``serve`` starts it),
never reach those handlers, so the same scrubbing also runs where every record
is made, through the record factory.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from watchkeeper.redact import redact

#: Loggers of the HTTP client that write request URLs at INFO.
QUIET = ("httpx", "httpcore")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_DONE = "_watchkeeper_redacted"


def scrub(record: logging.LogRecord) -> logging.LogRecord:
    """``record`` with its message, traceback and stack redacted (once).

    The format and its arguments are kept apart where they can be: some formatters read
    the arguments themselves (uvicorn's access log unpacks five), so a record whose
    message holds no secret is left as it is, and one whose secrets each sit inside one
    argument or in the format gets them redacted in place. Only a secret formed across
    the pieces makes the record one redacted message without arguments.
    """
    if getattr(record, _DONE, False):
        return record
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - a bad format string is reported by the handler, as usual
        return record
    cleaned = redact(message)
    if cleaned != message:
        record.msg, record.args = _in_pieces(record) or (cleaned, None)
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    setattr(record, _DONE, True)
    return record


def _redacted(value: object) -> object:
    return redact(value) if isinstance(value, str) else value


def _in_pieces(record: logging.LogRecord) -> tuple[object, Any] | None:
    """The record's format and arguments each redacted, if then no secret is left in the
    message they make; else ``None``."""
    args: Any = record.args
    if isinstance(args, Mapping):
        args = {key: _redacted(value) for key, value in args.items()}
    elif isinstance(args, tuple):
        args = tuple(_redacted(value) for value in args)
    msg = _redacted(record.msg)
    try:
        message = str(msg) % args if args else str(msg)
    except (TypeError, ValueError, KeyError):  # redaction took a placeholder away
        return None
    return (msg, args) if redact(message) == message else None


class RedactingFilter(logging.Filter):
    """A handler filter that redacts every record it lets through."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Always keep the record, redacted."""
        scrub(record)
        return True


def _redacting_factory(previous: Any) -> Any:
    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return scrub(previous(*args, **kwargs))

    make.redacts = True  # type: ignore[attr-defined]
    return make


def install(level: int = logging.INFO) -> None:
    """Configure logging for a long-lived command: ``level`` and above, nothing secret."""
    logging.basicConfig(level=level, format=FORMAT)
    for name in QUIET:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    factory = logging.getLogRecordFactory()
    if not getattr(factory, "redacts", False):
        logging.setLogRecordFactory(_redacting_factory(factory))
