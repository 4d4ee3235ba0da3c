"""Field types of the HTTP API that match what both stores can hold.

PostgreSQL refuses NUL in text and integers beyond 32 bits in ``INTEGER``
columns; SQLite's driver cannot bind integers beyond 64 bits, and neither
driver can encode a lone UTF-16 surrogate. A value a column cannot hold is
refused here, with a 422 naming the field and what is allowed, instead of
failing in the driver. Text carries its length: ``Annotated[str, Text(2000)]``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, Field, GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# Times are stored as epoch seconds and read back as UTC datetimes: a time before year 1
# in UTC (0001-01-01T00:00+01:00) stores, then cannot be read. Work reports nothing older
# than the epoch, and the last year stays free for the deadlines added to a time.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)

# Control characters are Unicode category Cc: U+0000-U+001F and U+007F-U+009F.
# Lone surrogates (U+D800-U+DFFF) come from JSON escapes and cannot be encoded as UTF-8.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_FREE_TEXT_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
# JSON text carries any other control character escaped; PostgreSQL refuses NUL even there.
_JSON_BAD = re.compile("[\x00\ud800-\udfff]")


def _problem(value: str, bad: re.Pattern[str]) -> str | None:
    found = bad.search(value)
    if found is None:
        return None
    char = found.group()
    what = "a lone surrogate" if "\ud800" <= char <= "\udfff" else "the control character"
    return f"contains {what} {char!r} at position {found.start()}"


def free_text(value: str) -> str:
    """Refuse control characters other than tab, newline and carriage return."""
    problem = _problem(value, _FREE_TEXT_BAD)
    if problem is not None:
        raise ValueError(f"{problem}; only tab, newline and carriage return are allowed")
    return value


def one_line(value: str) -> str:
    """Refuse every control character, line breaks included."""
    problem = _problem(value, _CONTROL)
    if problem is not None:
        raise ValueError(f"{problem}; send one line of printable text")
    return value


@dataclass(frozen=True)
class Text:
    """Free text of ``min_length`` to ``max_length`` characters: ``Annotated[str, Text(500)]``.

    The lengths sit on the string itself, so a too long value gets the usual
    ``string_too_long`` error; the character check runs after them.
    """

    max_length: int
    min_length: int = 0
    pattern: str | None = None

    def check(self, value: str) -> str:
        """The character rule of this kind of text."""
        return free_text(value)

    def __get_pydantic_core_schema__(
        self, _source: Any, _handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        inner = core_schema.str_schema(
            min_length=self.min_length or None, max_length=self.max_length, pattern=self.pattern
        )
        return core_schema.no_info_after_validator_function(self.check, inner)


@dataclass(frozen=True)
class Line(Text):
    """One line of at most ``max_length`` characters (names, hosts, tokens, paths)."""

    def check(self, value: str) -> str:
        """No control characters at all."""
        return one_line(value)


def json_text(value: Any) -> Any:
    """Refuse what a JSON column cannot hold: NUL or lone surrogates in strings, NaN, infinity."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        where = path or "the top"
        if isinstance(item, dict):
            for key, child in item.items():
                inner = f"{path}.{key}" if path else str(key)
                problem = _problem(str(key), _JSON_BAD)
                if problem is not None:
                    raise ValueError(f"the key {inner!r} {problem}; remove it")
                stack.append((inner, child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{index}]", child) for index, child in enumerate(item))
        elif isinstance(item, str):
            problem = _problem(item, _JSON_BAD)
            if problem is not None:
                raise ValueError(f"the value at {where} {problem}; remove it")
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"the value at {where} is {item}, which JSON cannot hold")
    return value


def moment(value: datetime) -> datetime:
    """Refuse a time the stores cannot give back."""
    if not EARLIEST <= value < LATEST:
        raise ValueError(
            f"{value.isoformat()} is out of range: send a time from "
            f"{EARLIEST:%Y-%m-%dT%H:%M:%SZ} to before {LATEST:%Y-%m-%dT%H:%M:%SZ}"
        )
    return value


#: A time with its offset, within what the stores hold.
Moment = Annotated[AwareDatetime, AfterValidator(moment)]
#: A JSON object stored as is (job payloads).
JsonObject = Annotated[dict[str, Any], AfterValidator(json_text)]

#: A PostgreSQL ``INTEGER`` (SQLite's are wider): -2147483648..2147483647.
Int32 = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]
#: A ``BIGINT``, and the widest integer SQLite's driver binds.
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
#: A positive ``INTEGER`` id (incidents): 1..2147483647.
Id32 = Annotated[int, Field(ge=1, le=INT32_MAX)]
#: A count kept in an ``INTEGER`` column: 0..2147483647.
Count32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
#: A process id: ``pid_t`` is a signed 32-bit integer, and ids are never negative.
Pid = Annotated[int, Field(ge=0, le=INT32_MAX)]
#: A process exit status as reported (negative for a signal): any 32-bit integer.
ExitCode = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]
