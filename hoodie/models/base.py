"""A small base turning dataclasses with snake_case attributes into Hudi's camelCase Avro dicts and back.

Each model is a ``@dataclass(frozen=True, slots=True, kw_only=True)`` subclass of :class:`AvroModel`.
Attribute ``file_id`` maps to Avro field ``fileId``; :func:`avro_name` field metadata overrides the
name where Hudi breaks its own convention (``RollbackRequests``). Attribute order must equal the
Avro field order.
The per-class conversion plan is derived once from the type hints, which may use ``X | None``,
``list[X]``, ``dict[str, X]`` and nested models. There is no per-object validation: the Avro
encoder rejects values of the wrong type.

Top-level records also subclass :class:`AvroRecord`, which adds ``to_bytes`` / ``from_bytes``
through :mod:`hoodie.models.codec`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, Self

from hoodie.errors import MalformedPlanError
from hoodie.models import codec

__all__ = ["AvroModel", "AvroRecord", "avro_name", "camel_case"]

_AVRO_NAME = "avro_name"
_Convert = Callable[[Any], Any]


def camel_case(attribute: str) -> str:
    """``total_log_files`` -> ``totalLogFiles``."""
    head, *rest = attribute.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def avro_name(name: str) -> dict[str, str]:
    """Field metadata giving the Avro name of an attribute that is not the camelCase of its name.

    Use as ``field(default=None, metadata=avro_name("RollbackRequests"))``.
    """
    return {_AVRO_NAME: name}


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    attribute: str
    key: str
    decode: _Convert | None
    encode: _Convert | None


def _optional(convert: _Convert | None) -> _Convert | None:
    if convert is None:
        return None
    return lambda value: None if value is None else convert(value)


def _converters(hint: Any) -> tuple[_Convert | None, _Convert | None]:
    """(decode, encode) for one type hint; ``None`` means the value passes through unchanged."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) != 1:
            return None, None  # a union of plain types: values pass through
        decode, encode = _converters(members[0])
        return _optional(decode), _optional(encode)
    if origin is list:
        item_decode, item_encode = _converters(args[0])
        if item_decode is None or item_encode is None:
            return None, None
        return (
            lambda values: [item_decode(v) for v in values],
            lambda values: [item_encode(v) for v in values],
        )
    if origin is dict:
        value_decode, value_encode = _converters(args[1])
        if value_decode is None or value_encode is None:
            return None, None
        return (
            lambda values: {k: value_decode(v) for k, v in values.items()},
            lambda values: {k: value_encode(v) for k, v in values.items()},
        )
    if isinstance(hint, type) and issubclass(hint, AvroModel):
        model: type[AvroModel] = hint
        return model.from_avro, lambda value: value.to_avro()
    return None, None


class AvroModel:
    """Base of every plan/metadata model; see the module docstring."""

    __slots__ = ()
    _plans: ClassVar[dict[type, tuple[_FieldPlan, ...]]] = {}

    @classmethod
    def _plan(cls) -> tuple[_FieldPlan, ...]:
        plan = AvroModel._plans.get(cls)
        if plan is None:
            hints = typing.get_type_hints(cls)
            entries = []
            for field in dataclasses.fields(cls):  # type: ignore[arg-type]
                decode, encode = _converters(hints[field.name])
                key = field.metadata.get(_AVRO_NAME) or camel_case(field.name)
                entries.append(_FieldPlan(field.name, key, decode, encode))
            plan = tuple(entries)
            AvroModel._plans[cls] = plan
        return plan

    @classmethod
    def from_avro(cls, data: Mapping[str, Any]) -> Self:
        """From an Avro-shaped dict; absent keys take the attribute default, unknown keys are ignored."""
        kwargs: dict[str, Any] = {}
        for entry in cls._plan():
            if entry.key in data:
                value = data[entry.key]
                kwargs[entry.attribute] = (
                    value if entry.decode is None or value is None else entry.decode(value)
                )
        return cls(**kwargs)

    def to_avro(self) -> dict[str, Any]:
        """The Avro-shaped dict (Hudi's field names, every field present)."""
        out: dict[str, Any] = {}
        for entry in self._plan():
            value = getattr(self, entry.attribute)
            out[entry.key] = value if entry.encode is None or value is None else entry.encode(value)
        return out

    @classmethod
    def avro_names(cls) -> Iterator[tuple[str, str]]:
        """(attribute, Avro field name) pairs in field order."""
        return ((entry.attribute, entry.key) for entry in cls._plan())


class AvroRecord(AvroModel):
    """A top-level record stored on its own in a timeline file (an Avro container by default)."""

    __slots__ = ()
    AVRO_NAME: ClassVar[str]

    def to_bytes(self, table_version: int) -> bytes:
        """The instant-file bytes Hudi writes for this record in ``table_version``."""
        return self.to_avro_container(table_version)

    @classmethod
    def from_bytes(cls, data: bytes, table_version: int, source: str = "") -> Self:
        """Decode instant-file bytes; ``source`` names the file in errors (MalformedPlanError)."""
        return cls.from_avro_container(data, table_version, source)

    # Subclasses that override to_bytes/from_bytes call these (zero-argument super() does not work
    # in methods of slotted dataclasses, which are re-created classes).

    def to_avro_container(self, table_version: int) -> bytes:
        """This record as a one-record Avro container with the schema of ``table_version``."""
        return codec.encode_avro(self.to_avro(), self.AVRO_NAME, table_version)

    @classmethod
    def from_avro_container(cls, data: bytes, table_version: int, source: str = "") -> Self:
        """Decode a one-record Avro container, resolving its writer schema to ``table_version``'s."""
        return cls.from_payload(codec.decode_avro(data, cls.AVRO_NAME, table_version, source), source)

    @classmethod
    def from_payload(cls, data: Mapping[str, Any], source: str = "") -> Self:
        """``from_avro`` that reports a missing required field as MalformedPlanError naming ``source``."""
        try:
            return cls.from_avro(data)
        except (TypeError, AttributeError) as exc:
            where = source or f"<{cls.AVRO_NAME} payload>"
            raise MalformedPlanError(f"{where}: not a valid {cls.AVRO_NAME}: {exc}") from exc
