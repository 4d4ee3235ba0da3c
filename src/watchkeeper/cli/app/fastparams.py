"""Option values the command line reads without loading pydantic.

Typer checks every option's value with a pydantic ``TypeAdapter``, which loads
all of pydantic (a good part of a command's start-up) even when the value is a
plain string. :func:`install` has the plain cases (text, flags, whole
numbers, decimals, lists of text) converted here, exactly as pydantic would convert
them; anything else, and any value these rules do not accept, still goes to
Typer's own pydantic check, so its results and error messages stay the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, get_args, get_origin

if TYPE_CHECKING:
    from typer._coercion import RuntimeParam, TypeDescriptor

#: Text that both ``int()`` and pydantic read as the same whole number.
_INT = re.compile(r"[+-]?[0-9]+\Z")
#: Text that both ``float()`` and pydantic read as the same decimal number.
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)\Z")

_installed = False


def install() -> None:
    """Route Typer's option coercion through the plain cases first (idempotent).

    A Typer release without these internals is left alone: it works as shipped,
    only slower to start.
    """
    global _installed
    if _installed:
        return
    try:
        from typer import core
        from typer._coercion import RuntimeParam
    except ImportError:  # pragma: no cover - another Typer release
        return
    found = getattr(core, "build_runtime_param", None)
    if found is None:  # pragma: no cover - another Typer release
        return
    typer_builds: Callable[[TypeDescriptor], RuntimeParam] = found

    @dataclass(frozen=True)
    class PlainParam(RuntimeParam):
        """A plain value converted here; anything else by Typer's pydantic check."""

        descriptor: TypeDescriptor
        convert: Callable[[Any], Any | None]

        @cached_property
        def typers(self) -> RuntimeParam:
            return typer_builds(self.descriptor)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            converted = self.convert(value)
            if converted is not None:
                return converted
            return self.typers._coerce_value(value, param=param, ctx=ctx)

    def build(descriptor: TypeDescriptor) -> RuntimeParam:
        convert = _converter(descriptor)
        if convert is None:
            return typer_builds(descriptor)
        return PlainParam(
            parameter_info=descriptor.parameter_info,
            annotation=descriptor.annotation,
            descriptor=descriptor,
            convert=convert,
        )

    # Typer's parameters look the builder up in this module each time they read a value.
    core.build_runtime_param = build  # type: ignore[attr-defined]
    _installed = True


def _converter(descriptor: TypeDescriptor) -> Callable[[Any], Any | None] | None:
    """How to convert this parameter's plain values (``None``: not a plain parameter)."""
    info = descriptor.parameter_info
    if info.parser is not None or descriptor.file_annotation is not None or descriptor.is_path:
        return None
    annotation: Any = descriptor.annotation
    if get_origin(annotation) is list and get_args(annotation) == (str,):
        return _texts
    if info.clamp:
        return None
    low, high = info.min, info.max
    if annotation is str:
        return _text
    if annotation is bool:
        return _flag
    if annotation is int:
        return _bounded(_int, low, high)
    if annotation is float:
        return _bounded(_float, low, high)
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _texts(value: Any) -> list[str] | None:
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return list(value)
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, str) and _INT.match(value):
        return int(value)
    return None


def _float(value: Any) -> float | None:
    if isinstance(value, str) and _FLOAT.match(value):
        return float(value)
    return None


def _bounded(
    parse: Callable[[Any], float | None], low: float | None, high: float | None
) -> Callable[[Any], Any | None]:
    """``parse``, whose numbers outside ``low``..``high`` go on to Typer's check (and error)."""

    def convert(value: Any) -> float | None:
        number = parse(value)
        if number is None or (low is not None and number < low):
            return None
        if high is not None and number > high:
            return None
        return number

    return convert
