"""Validating and preparing incoming records before anything is written.

Checks the data against the table schema (naming the column and the types at fault), computes
record keys and partition paths with the table's key generator, and de-duplicates keys inside
the batch as Hudi's precombine does. Nothing here touches storage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.config.table_config import RecordMergeMode
from hoodie.errors import InvalidInputError, SchemaError
from hoodie.keygen import KeyGenerator
from hoodie.merge.buffer import dedupe_incoming
from hoodie.merge.config import MergeConfig
from hoodie.merge.log_entries import MergeSpec, data_delete_mask
from hoodie.schema.avro_arrow import avro_to_arrow_schema, conform
from hoodie.schema.meta_fields import HOODIE_META_COLUMNS


@dataclass(frozen=True)
class PreparedInput:
    """Incoming rows conformed to the table schema, with their keys, partitions and delete flags."""

    data: pa.Table
    keys: pa.Array
    partitions: pa.Array
    is_delete: npt.NDArray[np.bool_]

    @property
    def num_rows(self) -> int:
        return int(self.data.num_rows)

    def take(self, indices: npt.NDArray[np.int64]) -> PreparedInput:
        idx = pa.array(indices, pa.int64())
        return PreparedInput(
            self.data.take(idx), self.keys.take(idx), self.partitions.take(idx), self.is_delete[indices]
        )

    def partition_values(self) -> list[str]:
        return sorted(set(self.partitions.to_pylist()))


def conform_to_schema(data: pa.Table, target: pa.Schema, *, allow_missing: bool = True) -> pa.Table:
    """``data`` with ``target``'s columns and types; meta columns in the input are dropped.

    Missing nullable columns become null; extra columns, missing non-nullable columns and types
    that cannot be promoted are errors naming the column.
    """
    incoming = [n for n in data.column_names if n not in HOODIE_META_COLUMNS]
    extra = sorted(set(incoming) - set(target.names))
    if extra:
        raise SchemaError(
            f"columns {extra} are not in the table schema {target.names}; "
            "adding columns (schema evolution) is not supported by this writer"
        )
    arrays: list[pa.ChunkedArray | pa.Array] = []
    for f in target:
        if f.name in data.column_names:
            col = data[f.name]
            if col.type != f.type:
                try:
                    col = pa.chunked_array(
                        [conform(c, f.type, f.name, promote_only=False) for c in col.chunks], f.type
                    )
                except SchemaError as e:
                    raise SchemaError(
                        f"column {f.name!r} has type {data[f.name].type}, the table has {f.type}: {e}"
                    ) from e
            arrays.append(col)
        elif allow_missing and f.nullable:
            arrays.append(pa.nulls(data.num_rows, f.type))
        else:
            raise SchemaError(f"column {f.name!r} ({f.type}) is missing from the input")
    return pa.Table.from_arrays(arrays, schema=target)


def _check_types_compatible(data: pa.Table, target: pa.Schema) -> None:
    for f in target:
        if f.name in data.column_names:
            src = data.schema.field(f.name).type
            if src == f.type:
                continue
            # Numbers may widen and strings stay strings; anything else must be an exact match.
            ok = (
                (pa.types.is_integer(src) and (pa.types.is_integer(f.type) or pa.types.is_floating(f.type)))
                or (pa.types.is_floating(src) and pa.types.is_floating(f.type))
                or (pa.types.is_string(src) and pa.types.is_large_string(f.type))
                or (pa.types.is_large_string(src) and pa.types.is_string(f.type))
                or (pa.types.is_decimal(src) and pa.types.is_decimal(f.type))
                or (pa.types.is_timestamp(src) and pa.types.is_timestamp(f.type))
                or pa.types.is_nested(src)
                or (pa.types.is_null(src))
            )
            if not ok:
                raise SchemaError(
                    f"column {f.name!r} has type {src}, which does not match the table's {f.type}"
                )


def prepare_input(
    data: pa.Table,
    table_schema: Mapping[str, Any],
    keygen: KeyGenerator,
    spec: MergeSpec,
    *,
    keys_only: bool = False,
) -> PreparedInput:
    """Conform ``data`` to the table's Avro schema and compute keys and partition paths.

    ``keys_only`` is for deletes: only key and partition columns (and ordering fields, if given)
    are needed and other columns may be absent.
    """
    if data.num_rows == 0:
        target = avro_to_arrow_schema(table_schema)
        return PreparedInput(
            target.empty_table(), pa.array([], pa.string()), pa.array([], pa.string()), np.zeros(0, bool)
        )
    target = avro_to_arrow_schema(table_schema)
    _check_types_compatible(data, target)
    if keys_only:
        present = [f for f in target if f.name in data.column_names]
        data = conform_to_schema(data.select([f.name for f in present]), pa.schema(present))
        full = conform_to_schema(data, target)
    else:
        full = conform_to_schema(data, target)
    keys = keygen.record_keys(full)
    partitions = keygen.partition_paths(full)
    if keys.null_count:
        raise InvalidInputError(
            f"{keys.null_count} record(s) have a null record key ({list(keygen.record_key_fields)})"
        )
    is_delete = data_delete_mask(full, spec)
    if spec.event_time and not keys_only:
        missing = [f for f in spec.ordering_fields if f not in data.column_names]
        if missing:
            raise SchemaError(
                f"ordering field(s) {missing} are missing from the input (EVENT_TIME_ORDERING needs them)"
            )
    return PreparedInput(full, keys.cast(pa.string()), partitions.cast(pa.string()), is_delete)


def dedupe(prepared: PreparedInput, merge: MergeConfig, spec: MergeSpec) -> PreparedInput:
    """Keep one record per (partition, key), as Hudi's precombine of an incoming batch does.

    COMMIT_TIME_ORDERING keeps the last record; EVENT_TIME_ORDERING the one with the greatest
    ordering value, ties going to the later record; CUSTOM modes use the merger's pre-combine.
    """
    n = prepared.num_rows
    if n < 2:
        return prepared
    composite = pc.binary_join_element_wise(prepared.partitions, prepared.keys, "\x00")
    encoded = pc.dictionary_encode(composite)
    codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    if len(encoded.dictionary) == n:
        return prepared
    if merge.mode is RecordMergeMode.COMMIT_TIME_ORDERING or (
        merge.mode is RecordMergeMode.EVENT_TIME_ORDERING and not spec.event_time
    ):
        last = np.full(len(encoded.dictionary), -1, dtype=np.int64)
        np.maximum.at(last, codes, np.arange(n, dtype=np.int64))
        return prepared.take(np.sort(last))
    if merge.mode is RecordMergeMode.EVENT_TIME_ORDERING and merge.partial_update_mode is None:
        order_keys: list[npt.NDArray[Any]] = [np.arange(n)]
        for name in reversed(spec.ordering_fields):
            col = prepared.data[name].combine_chunks()
            t = col.type
            filled = (
                pc.fill_null(col, pa.scalar(0, t))
                if (pa.types.is_integer(t) or pa.types.is_floating(t))
                else col
            )
            ranks = pc.rank(filled, sort_keys=[("", "ascending", "at_start")], tiebreaker="dense")
            order_keys.append(np.asarray(ranks.to_numpy(), dtype=np.int64))
        order_keys.append(codes)
        order = np.lexsort(order_keys)
        ordered_codes = codes[order]
        last_of = np.ones(n, dtype=bool)
        last_of[:-1] = ordered_codes[1:] != ordered_codes[:-1]
        return prepared.take(np.sort(order[last_of]))
    # Per-record pre-combine for CUSTOM mergers, payloads and partial updates.
    rows = prepared.data.to_pylist()
    for row, key, partition in zip(
        rows, prepared.keys.to_pylist(), prepared.partitions.to_pylist(), strict=True
    ):
        row["\x00key"] = f"{partition}\x00{key}"
    ctx = merge.with_schema(prepared.data.schema)
    kept = dedupe_incoming(rows, ctx, lambda r: str(r["\x00key"]))
    positions = {id(r): i for i, r in enumerate(rows)}
    indices = [positions[id(r)] for r in kept if id(r) in positions]
    if len(indices) == len(kept):
        return prepared.take(np.sort(np.asarray(indices, dtype=np.int64)))
    merged_rows = [{k: v for k, v in r.items() if k != "\x00key"} for r in kept]
    table = pa.Table.from_pylist(merged_rows, schema=prepared.data.schema)
    keys = pa.array([str(r["\x00key"]).split("\x00", 1)[1] for r in kept], pa.string())
    parts = pa.array([str(r["\x00key"]).split("\x00", 1)[0] for r in kept], pa.string())
    return PreparedInput(
        table, keys, parts, data_delete_mask(table, MergeSpec(merge.mode, merge.ordering_fields))
    )
