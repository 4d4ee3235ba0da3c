"""A small validator for TypedDicts: TypedDicts check nothing at run time, the fakes must.

The fake Discord checks every body we send against the ``discord_typings``
TypedDicts with :func:`problems`, and every answer it gives as well.
"""

from __future__ import annotations

import functools
import types
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin

from typing_extensions import get_type_hints, is_typeddict


def problems(value: Any, expected: Any, path: str = "$") -> list[str]:
    """Why ``value`` is not an instance of the type ``expected`` (empty: it is)."""
    if expected is Any or expected is object:
        return []
    origin = get_origin(expected)
    if is_typeddict(origin):
        return problems(value, origin, path)
    if is_typeddict(expected):
        return _typed_dict(value, expected, path)
    if origin is Union or origin is types.UnionType:
        found = [problems(value, option, path) for option in get_args(expected)]
        if any(not f for f in found):
            return []
        return min(found, key=len)
    if origin is Literal:
        if any(value == a and type(value) is type(a) for a in get_args(expected)):
            return []
        return [f"{path}: {value!r} is not one of {get_args(expected)}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        (item,) = get_args(expected) or (Any,)
        return [p for i, v in enumerate(value) for p in problems(v, item, f"{path}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {type(value).__name__}"]
        return []
    return _scalar(value, expected, path)


def _typed_dict(value: Any, expected: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected an object ({expected.__name__}), got {type(value).__name__}"]
    hints = _hints(expected)
    found = [
        f"{path}.{k}: required by {expected.__name__}"
        for k in sorted(_required(expected))
        if k not in value
    ]
    found += [f"{path}.{k}: not a field of {expected.__name__}" for k in value if k not in hints]
    for key, item in value.items():
        if key in hints:
            found += problems(item, hints[key], f"{path}.{key}")
    return found


@functools.cache
def _hints(expected: Any) -> dict[str, Any]:
    return get_type_hints(expected)


@functools.cache
def _required(expected: Any) -> frozenset[str]:
    """Required keys, read from the annotations (``__required_keys__`` misses some inherited
    ``NotRequired`` fields when the annotations are strings)."""
    total = getattr(expected, "__total__", True)
    required = set()
    for key, hint in get_type_hints(expected, include_extras=True).items():
        marker = get_origin(hint)
        if marker is NotRequired or (not total and marker is not Required):
            continue
        required.add(key)
    return frozenset(required)


def _scalar(value: Any, expected: Any, path: str) -> list[str]:
    if expected is type(None) or expected is None:
        ok = value is None
    elif expected is bool:
        ok = isinstance(value, bool)
    elif expected is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif expected is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif isinstance(expected, type):
        ok = isinstance(value, expected)
    else:
        ok = True  # a TypeVar or something this small validator does not model
    return [] if ok else [f"{path}: {value!r} is not {getattr(expected, '__name__', expected)}"]
