"""Hudi's key generators: ``_hoodie_record_key`` and ``_hoodie_partition_path`` for whole Arrow tables.

Record keys:

* one field (simple, timestamp-based, non-partitioned, custom with one field): the field's value
  as a string; a null or empty value is an error;
* several fields (complex, and the other kinds when given several fields):
  ``f1:v1,f2:v2`` with ``__null__`` / ``__empty__`` standing for null / empty values; a row
  whose values are all null or empty is an error;
* the complex generator with a single field writes ``f1:v1`` (``FIELD_PREFIXED``) or the bare
  value (``VALUE_ONLY``, Hudi 0.14.1-1.0.2 on tables below version 9); see
  :class:`ComplexKeyEncoding`.

Partition paths are the per-field segments of :mod:`hoodie.keygen.partition_path` joined with
``/``; the timestamp-based generator formats its field as a date instead. A partition field
missing from the data counts as null, as in Hudi. Values are stringified as described in
:mod:`hoodie.keygen.values`. Dotted names address nested struct fields.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import InvalidInputError, InvalidTableConfigError
from hoodie.keygen.partition_path import join_segments, partition_segments
from hoodie.keygen.timestamp import TimestampOptions, timestamp_partition_values
from hoodie.keygen.values import ValueFormat, column, java_strings

NULL_RECORD_KEY_PLACEHOLDER = "__null__"
EMPTY_RECORD_KEY_PLACEHOLDER = "__empty__"
RECORD_KEY_PARTS_SEPARATOR = ","
COLUMN_VALUE_SEPARATOR = ":"


class KeyGeneratorType(StrEnum):
    """The built-in key generators, by their ``hoodie.table.keygenerator.type`` names."""

    SIMPLE = "SIMPLE"
    COMPLEX = "COMPLEX"
    NON_PARTITION = "NON_PARTITION"
    TIMESTAMP = "TIMESTAMP"
    CUSTOM = "CUSTOM"

    @property
    def class_name(self) -> str:
        """The Spark key generator class Hudi records for this type (``hoodie.table.keygenerator.class``)."""
        return _CLASS_NAMES[self]


_CLASS_NAMES = {
    KeyGeneratorType.SIMPLE: "org.apache.hudi.keygen.SimpleKeyGenerator",
    KeyGeneratorType.COMPLEX: "org.apache.hudi.keygen.ComplexKeyGenerator",
    KeyGeneratorType.NON_PARTITION: "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
    KeyGeneratorType.TIMESTAMP: "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
    KeyGeneratorType.CUSTOM: "org.apache.hudi.keygen.CustomKeyGenerator",
}


class ComplexKeyEncoding(StrEnum):
    """How the complex generator writes a one-field record key (``hoodie.table.complex.keygen.encoding``)."""

    FIELD_PREFIXED = "FIELD_PREFIXED"
    """``field:value``: Hudi up to 0.14.0, and every writer at table version 9 and above."""
    VALUE_ONLY = "VALUE_ONLY"
    """The bare value: Hudi 0.14.1, 0.15.0 and 1.0.0-1.0.2 on tables below version 9."""


class PartitionKeyType(StrEnum):
    """How the custom generator turns one partition field into a segment."""

    SIMPLE = "SIMPLE"
    TIMESTAMP = "TIMESTAMP"


@dataclass(frozen=True, kw_only=True)
class KeyGenerator(ABC):
    """Computes record keys and partition paths for a table's rows.

    ``hive_style`` and ``url_encode`` are ``hoodie.datasource.write.hive_style_partitioning`` and
    ``hoodie.datasource.write.partitionpath.urlencode``; ``value_format`` says how timestamps
    (and floating-point numbers) become strings.
    """

    kind: ClassVar[KeyGeneratorType]

    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    hive_style: bool = False
    url_encode: bool = False
    value_format: ValueFormat = field(default_factory=ValueFormat)

    def __post_init__(self) -> None:
        for name in (*self.record_key_fields, *self.partition_fields):
            if not name:
                raise InvalidTableConfigError(f"{self.kind} key generator: empty field name in {self!r}")

    @abstractmethod
    def record_keys(self, table: pa.Table) -> pa.Array:
        """``_hoodie_record_key`` of every row (a string array without nulls)."""

    @abstractmethod
    def partition_paths(self, table: pa.Table) -> pa.Array:
        """``_hoodie_partition_path`` of every row (a string array without nulls)."""

    def _single_record_keys(self, table: pa.Table) -> pa.Array:
        self._require_record_key_fields()
        return _single_field_keys(table, self.record_key_fields[0], self.value_format)

    def _check_at_most_one_record_key_field(self) -> None:
        if len(self.record_key_fields) > 1:
            got = list(self.record_key_fields)
            raise InvalidTableConfigError(f"{self.kind} key generator takes one record key field, got {got}")

    def _require_record_key_fields(self) -> None:
        if not self.record_key_fields:
            raise InvalidTableConfigError(
                f"{self.kind} key generator has no record key fields: the table's record keys are "
                "generated by the writer, not derived from the data"
            )

    def _keys_by_field_count(self, table: pa.Table) -> pa.Array:
        """One field: the bare value; several: the ``f1:v1,f2:v2`` form."""
        self._require_record_key_fields()
        if len(self.record_key_fields) == 1:
            return _single_field_keys(table, self.record_key_fields[0], self.value_format)
        return _composite_keys(table, self.record_key_fields, self.value_format)

    def _simple_segments(self, table: pa.Table, name: str) -> pa.Array:
        values = column(table, name)
        text = (
            pa.nulls(table.num_rows, pa.string())
            if values is None
            else java_strings(values, field=name, fmt=self.value_format)
        )
        return partition_segments(name, text, hive_style=self.hive_style, url_encode=self.url_encode)


@dataclass(frozen=True, kw_only=True)
class SimpleKeyGenerator(KeyGenerator):
    """One record key field, one partition field (``SimpleKeyGenerator``)."""

    kind: ClassVar[KeyGeneratorType] = KeyGeneratorType.SIMPLE

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_at_most_one_record_key_field()
        if len(self.partition_fields) != 1:
            raise InvalidTableConfigError(
                f"SIMPLE key generator needs exactly one partition field, got {list(self.partition_fields)}"
            )

    def record_keys(self, table: pa.Table) -> pa.Array:
        return self._single_record_keys(table)

    def partition_paths(self, table: pa.Table) -> pa.Array:
        return self._simple_segments(table, self.partition_fields[0])


@dataclass(frozen=True, kw_only=True)
class ComplexKeyGenerator(KeyGenerator):
    """Any number of record key and partition fields (``ComplexKeyGenerator``)."""

    kind: ClassVar[KeyGeneratorType] = KeyGeneratorType.COMPLEX

    single_field_encoding: ComplexKeyEncoding = ComplexKeyEncoding.FIELD_PREFIXED

    def __post_init__(self) -> None:
        super().__post_init__()

    def record_keys(self, table: pa.Table) -> pa.Array:
        self._require_record_key_fields()
        if len(self.record_key_fields) == 1 and self.single_field_encoding is ComplexKeyEncoding.VALUE_ONLY:
            return _single_field_keys(table, self.record_key_fields[0], self.value_format)
        return _composite_keys(table, self.record_key_fields, self.value_format)

    def partition_paths(self, table: pa.Table) -> pa.Array:
        segments = [self._simple_segments(table, name) for name in self.partition_fields]
        return join_segments(segments, table.num_rows)


@dataclass(frozen=True, kw_only=True)
class NonpartitionedKeyGenerator(KeyGenerator):
    """Non-partitioned tables (``NonpartitionedKeyGenerator``): every partition path is ``""``."""

    kind: ClassVar[KeyGeneratorType] = KeyGeneratorType.NON_PARTITION

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.partition_fields:
            raise InvalidTableConfigError(
                f"NON_PARTITION key generator takes no partition fields, got {list(self.partition_fields)}"
            )

    def record_keys(self, table: pa.Table) -> pa.Array:
        return self._keys_by_field_count(table)

    def partition_paths(self, table: pa.Table) -> pa.Array:
        return join_segments([], table.num_rows)


@dataclass(frozen=True, kw_only=True)
class TimestampBasedKeyGenerator(KeyGenerator):
    """One record key field; the partition field formatted as a date (``TimestampBasedKeyGenerator``)."""

    kind: ClassVar[KeyGeneratorType] = KeyGeneratorType.TIMESTAMP

    timestamp: TimestampOptions

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_at_most_one_record_key_field()
        if len(self.partition_fields) != 1:
            got = list(self.partition_fields)
            raise InvalidTableConfigError(
                f"TIMESTAMP key generator needs exactly one partition field, got {got}"
            )

    def record_keys(self, table: pa.Table) -> pa.Array:
        return self._single_record_keys(table)

    def partition_paths(self, table: pa.Table) -> pa.Array:
        return _timestamp_segments(self, table, self.partition_fields[0], self.timestamp)


@dataclass(frozen=True, kw_only=True)
class CustomKeyGenerator(KeyGenerator):
    """Per-field partition kinds, ``field:SIMPLE`` or ``field:TIMESTAMP`` (``CustomKeyGenerator``).

    ``partition_types[i]`` applies to ``partition_fields[i]``; ``timestamp`` is required when any
    field is ``TIMESTAMP`` (all timestamp fields share it, as in Hudi).
    """

    kind: ClassVar[KeyGeneratorType] = KeyGeneratorType.CUSTOM

    partition_types: tuple[PartitionKeyType, ...] = ()
    timestamp: TimestampOptions | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.partition_types) != len(self.partition_fields):
            raise InvalidTableConfigError(
                f"CUSTOM key generator: partition fields {list(self.partition_fields)} and types "
                f"{[str(t) for t in self.partition_types]} differ in length"
            )
        if PartitionKeyType.TIMESTAMP in self.partition_types and self.timestamp is None:
            raise InvalidTableConfigError(
                "CUSTOM key generator with a TIMESTAMP partition field needs timestamp options"
            )

    @property
    def partition_specs(self) -> tuple[str, ...]:
        """The ``field:TYPE`` entries of ``hoodie.table.partition.fields``."""
        return tuple(f"{f}:{t}" for f, t in zip(self.partition_fields, self.partition_types, strict=True))

    def record_keys(self, table: pa.Table) -> pa.Array:
        return self._keys_by_field_count(table)

    def partition_paths(self, table: pa.Table) -> pa.Array:
        segments = []
        for name, kind in zip(self.partition_fields, self.partition_types, strict=True):
            if kind is PartitionKeyType.TIMESTAMP:
                assert self.timestamp is not None  # checked in __post_init__
                segments.append(_timestamp_segments(self, table, name, self.timestamp))
            else:
                segments.append(self._simple_segments(table, name))
        return join_segments(segments, table.num_rows)


def parse_partition_specs(entries: Sequence[str]) -> tuple[tuple[str, ...], tuple[PartitionKeyType, ...]]:
    """Split custom-generator entries ``field:type`` (type case-insensitive) into names and types."""
    names: list[str] = []
    types: list[PartitionKeyType] = []
    for entry in entries:
        name, sep, kind = entry.partition(COLUMN_VALUE_SEPARATOR)
        if not sep or not name or COLUMN_VALUE_SEPARATOR in kind:
            raise InvalidTableConfigError(
                f"custom key generator partition field {entry!r} is not 'field:TYPE'"
            )
        try:
            types.append(PartitionKeyType(kind.strip().upper()))
        except ValueError:
            raise InvalidTableConfigError(
                f"custom key generator partition field {entry!r}: type {kind!r} is not SIMPLE or TIMESTAMP"
            ) from None
        names.append(name.strip())
    return tuple(names), tuple(types)


def _missing_record_key_field(table: pa.Table, name: str) -> InvalidInputError:
    return InvalidInputError(f"record key field {name!r} is not in the data (columns: {table.column_names})")


def _single_field_keys(table: pa.Table, name: str, fmt: ValueFormat) -> pa.Array:
    values = column(table, name)
    if values is None:
        raise _missing_record_key_field(table, name)
    keys = java_strings(values, field=name, fmt=fmt)
    bad = pc.fill_null(pc.equal(keys, ""), True)
    if pc.any(bad).as_py():
        row = pc.index(bad, True).as_py()
        what = "null" if keys[row].as_py() is None else "empty"
        raise InvalidInputError(
            f"record key field {name!r} is {what} in row {row}; record keys must be non-empty"
        )
    return keys


def _composite_keys(table: pa.Table, names: Sequence[str], fmt: ValueFormat) -> pa.Array:
    parts: list[pa.Array] = []
    all_missing: pa.Array | None = None
    for name in names:
        values = column(table, name)
        if values is None:
            raise _missing_record_key_field(table, name)
        text = java_strings(values, field=name, fmt=fmt)
        empty = pc.fill_null(pc.equal(text, ""), False)
        shown = pc.if_else(empty, pa.scalar(EMPTY_RECORD_KEY_PLACEHOLDER), text)
        shown = pc.fill_null(shown, NULL_RECORD_KEY_PLACEHOLDER)
        parts.append(pc.binary_join_element_wise(name + COLUMN_VALUE_SEPARATOR, shown, ""))
        missing = pc.fill_null(pc.equal(text, ""), True)
        all_missing = missing if all_missing is None else pc.and_(all_missing, missing)
    if all_missing is not None and pc.any(all_missing).as_py():
        row = pc.index(all_missing, True).as_py()
        raise InvalidInputError(f"record key fields {list(names)} are all null or empty in row {row}")
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, RECORD_KEY_PARTS_SEPARATOR)


def _timestamp_segments(gen: KeyGenerator, table: pa.Table, name: str, options: TimestampOptions) -> pa.Array:
    values = timestamp_partition_values(
        column(table, name), table.num_rows, field=name, options=options, fmt=gen.value_format
    )
    return partition_segments(
        name, values, hive_style=gen.hive_style, url_encode=gen.url_encode, default_for_empty=False
    )


def virtual_record_keys(table: pa.Table, record_key_fields: Sequence[str], fmt: ValueFormat) -> pa.Array:
    """The record keys a reader rebuilds for a table without meta fields (``populate.meta.fields=false``).

    As Hudi's ``RecordContext.virtualKeyExtractor``: one record key field gives the field's value as
    a string (null is an error, empty is kept); several give ``KeyGenerator.constructRecordKey``'s
    ``f1:v1,f2:v2`` with ``__null__`` / ``__empty__`` (all null or empty is an error). Only the
    record key fields count, never the key generator class: a one-field complex key reads bare here
    as in Hudi. Values print as the writers' key generators print them (:func:`java_strings`).
    """
    if not record_key_fields:
        raise InvalidTableConfigError("a table without meta fields needs record key fields to rebuild keys")
    if len(record_key_fields) > 1:
        return _composite_keys(table, record_key_fields, fmt)
    name = record_key_fields[0]
    values = column(table, name)
    if values is None:
        raise _missing_record_key_field(table, name)
    keys = java_strings(values, field=name, fmt=fmt)
    if keys.null_count:
        row = pc.index(pc.is_null(keys), True).as_py()
        raise InvalidInputError(f"record key field {name!r} is null in row {row}; record keys cannot be null")
    return keys
