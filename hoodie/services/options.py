"""Service options by Apache Hudi's config keys: lookup across a key's spellings, and typed values
that fail with the key and the value named."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import TypeVar

from hoodie.errors import TableServiceError

Keys = str | tuple[str, ...]
"""One key, or a setting's spellings: the current one first, then those Hudi also accepts."""

_E = TypeVar("_E", bound=Enum)


def lookup(options: Mapping[str, str], keys: Keys) -> tuple[str, str] | None:
    """The first of ``keys`` set to a non-blank value, with that value stripped."""
    for key in (keys,) if isinstance(keys, str) else keys:
        raw = options.get(key)
        if raw is not None and raw.strip():
            return key, raw.strip()
    return None


def int_option(options: Mapping[str, str], keys: Keys, default: int, minimum: int | None = None) -> int:
    found = lookup(options, keys)
    if found is None:
        return default
    key, raw = found
    try:
        value = int(raw)
    except ValueError as e:
        raise TableServiceError(f"{key}={raw!r} is not a whole number") from e
    if minimum is not None and value < minimum:
        raise TableServiceError(f"{key}={value} must be at least {minimum}")
    return value


def bool_option(options: Mapping[str, str], keys: Keys, default: bool) -> bool:
    found = lookup(options, keys)
    if found is None:
        return default
    key, raw = found
    value = raw.lower()
    if value not in ("true", "false"):
        raise TableServiceError(f"{key}={raw!r} is neither true nor false")
    return value == "true"


def enum_option(options: Mapping[str, str], keys: Keys, kind: type[_E], default: _E) -> _E:
    """An upper-case enum value (Hudi's policy and strategy names)."""
    found = lookup(options, keys)
    if found is None:
        return default
    key, raw = found
    try:
        return kind(raw.upper())
    except ValueError as e:
        allowed = ", ".join(str(m.value) for m in kind)
        raise TableServiceError(f"unsupported {key}={raw!r} (supported: {allowed})") from e
