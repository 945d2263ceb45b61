"""``HoodieMetadataRecord`` payloads: building, encoding, decoding and merging them.

A payload is a dict shaped as fastavro reads the metadata schema with
``return_record_name=True, return_record_name_override=True``: wrapper unions (column-stats
min/max) are ``(full record name, {"value": v})`` tuples, every other union is its plain value.
The same dicts encode back byte for byte.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable, Mapping
from enum import IntEnum
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import fastavro

from hoodie.metadata.avro_encoder import Unsupported, compile_encoder, zigzag
from hoodie.schema.meta_fields import FILENAME_METADATA_FIELD, HOODIE_META_COLUMNS
from hoodie.schema.meta_fields import HOODIE_META_COLUMNS as META_FIELDS  # the name tests import

__all__ = [
    "META_FIELDS",
    "MetadataPartition",
    "RecordType",
    "decode_payload",
    "encode_payload",
    "files_payload",
    "merge_payloads",
    "metadata_schema",
    "plain_metadata_schema_json",
    "record_index_payload",
    "secondary_index_payload",
    "with_file_name",
]

Payload = dict[str, Any]


class RecordType(IntEnum):
    """The ``type`` of a metadata record."""

    ALL_PARTITIONS = 1
    FILE_LIST = 2
    COLUMN_STATS = 3
    BLOOM_FILTER = 4
    RECORD_INDEX = 5
    PARTITION_STATS = 6
    SECONDARY_INDEX = 7


class MetadataPartition:
    """Names of the metadata table's partitions and their file-group id prefixes."""

    FILES = "files"
    COLUMN_STATS = "column_stats"
    PARTITION_STATS = "partition_stats"
    BLOOM_FILTERS = "bloom_filters"
    RECORD_INDEX = "record_index"
    SECONDARY_PREFIX = "secondary_index_"
    EXPRESSION_PREFIX = "expr_index_"

    @staticmethod
    def file_id_prefix(partition: str) -> str:
        """``col-stats`` for column_stats, otherwise the partition name with ``_`` as ``-``."""
        if partition == MetadataPartition.COLUMN_STATS:
            return "col-stats"
        return partition.replace("_", "-")

    @staticmethod
    def file_id(partition: str, index: int) -> str:
        return f"{MetadataPartition.file_id_prefix(partition)}-{index:04d}-0"

    @staticmethod
    def record_type(partition: str) -> RecordType:
        if partition == MetadataPartition.FILES:
            return RecordType.FILE_LIST
        if partition.startswith(MetadataPartition.SECONDARY_PREFIX):
            return RecordType.SECONDARY_INDEX
        known = {
            MetadataPartition.COLUMN_STATS: RecordType.COLUMN_STATS,
            MetadataPartition.PARTITION_STATS: RecordType.PARTITION_STATS,
            MetadataPartition.BLOOM_FILTERS: RecordType.BLOOM_FILTER,
            MetadataPartition.RECORD_INDEX: RecordType.RECORD_INDEX,
        }
        if partition not in known:
            raise ValueError(f"unknown metadata table partition {partition!r}")
        return known[partition]


@cache
def metadata_schema(table_version: int) -> dict[str, Any]:
    """The meta-field-prefixed HoodieMetadataRecord schema Hudi writes for ``table_version`` (shared).

    Kept as Hudi writes it into log-block headers and HFile file info (with its docs), apart
    from the packaged models' doc-free schemas.
    """
    name = "HoodieMetadataRecord.v8.avsc" if table_version <= 8 else "HoodieMetadataRecord.v9.avsc"
    text = resources.files("hoodie.metadata").joinpath("avsc", name).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _parsed(table_version: int) -> Any:
    return fastavro.parse_schema(copy.deepcopy(metadata_schema(table_version)))


@cache
def header_schema_json(table_version: int) -> str:
    """The SCHEMA header and HFile ``schema`` file info: the prefixed schema, compact."""
    return json.dumps(metadata_schema(table_version), separators=(",", ":"))


@cache
def plain_metadata_schema_json(table_version: int) -> str:
    """The schema without meta fields (the ``schema`` extra metadata of metadata-table commits)."""
    schema = copy.deepcopy(metadata_schema(table_version))
    schema["fields"] = [f for f in schema["fields"] if f["name"] not in HOODIE_META_COLUMNS]
    return json.dumps(schema, separators=(",", ":"))


def _string(value: str) -> bytes:
    data = value.encode("utf-8")
    return zigzag(len(data)) + data


def _optional(value: Any, encode: Any) -> bytes:
    """A ``["null", T]`` union value."""
    return b"\x00" if value is None else b"\x02" + encode(value)


_NO_META = b"\x00" * len(HOODIE_META_COLUMNS)
_RLI_HEAD = b"\x00" + zigzag(int(RecordType.RECORD_INDEX)) + b"\x00\x00\x00\x02"
"""``key`` (``""``), ``type``, three null unions, then the record-index branch of its union."""


_RLI_FIELDS = (
    "partitionName",
    "fileIdHighBits",
    "fileIdLowBits",
    "fileIndex",
    "fileId",
    "instantTime",
    "fileIdEncoding",
    "position",
)


def _encode_record_index(payload: Payload, file_name: str | None) -> bytes:
    """The datum of a ``record_index`` payload, written directly: the record index is the
    biggest partition by far, the generic Avro writer costs ~30 µs a record, and the records of
    one commit repeat a few locations (the key is not part of the value). It is the same in
    HoodieMetadataRecord v8 and v9; tests compare it with fastavro's bytes."""
    info = payload["recordIndexMetadata"]
    return _record_index_datum(tuple(info.get(f) for f in _RLI_FIELDS), file_name)


@lru_cache(maxsize=4096)
def _record_index_datum(values: tuple[Any, ...], file_name: str | None) -> bytes:
    partition, high, low, index, file_id, millis, encoding, position = values
    meta = _NO_META if file_name is None else _NO_META[:-1] + b"\x02" + _string(file_name)
    return b"".join(
        (
            meta,
            _RLI_HEAD,
            _optional(partition, _string),
            _optional(high, zigzag),
            _optional(low, zigzag),
            _optional(index, zigzag),
            _optional(file_id, _string),
            _optional(millis, zigzag),
            zigzag(encoding),
            _optional(position, zigzag),
            b"\x00",  # SecondaryIndexMetadata
        )
    )


def with_file_name(datum: bytes, file_name: str) -> bytes:
    """A datum that :func:`encode_payload` wrote without a file name, with ``_hoodie_file_name``
    set (the meta fields come first, all null but that one)."""
    if datum[: len(_NO_META)] != _NO_META:
        raise ValueError("not a metadata datum written without meta fields")
    return _NO_META[:-1] + b"\x02" + _string(file_name) + datum[len(_NO_META) :]


def encode_payload(payload: Payload, table_version: int, *, file_name: str | None = None) -> bytes:
    """The Avro datum of ``payload`` (``key`` written as ``""``; ``_hoodie_file_name`` in base files)."""
    if payload["type"] == RecordType.RECORD_INDEX and payload.get("recordIndexMetadata") is not None:
        return _encode_record_index(payload, file_name)
    record: dict[str, Any] = dict.fromkeys(HOODIE_META_COLUMNS)
    record[FILENAME_METADATA_FIELD] = file_name
    record.update(payload)
    record["key"] = ""
    for field, name in _RECORD_BRANCHES.items():  # name the union branch: fastavro skips matching
        value = record.get(field)
        if isinstance(value, dict):
            record[field] = (name, value)
    try:
        return _compiled(table_version)(record)
    except Unsupported:
        pass
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _parsed(table_version), record)
    return buf.getvalue()


@cache
def _compiled(table_version: int) -> Callable[[Any], bytes]:
    return compile_encoder(metadata_schema(table_version))


_RECORD_BRANCHES = {
    "BloomFilterMetadata": "org.apache.hudi.avro.model.HoodieMetadataBloomFilter",
    "ColumnStatsMetadata": "org.apache.hudi.avro.model.HoodieMetadataColumnStats",
    "recordIndexMetadata": "org.apache.hudi.avro.model.HoodieRecordIndexInfo",
    "SecondaryIndexMetadata": "org.apache.hudi.avro.model.HoodieSecondaryIndexInfo",
}
"""The ``["null", record]`` fields of HoodieMetadataRecord and their record names."""


def decode_payload(value: bytes, table_version: int, writer_schema: Any | None = None) -> Payload:
    """A payload from an HFile value (decoded with ``writer_schema`` when the file names one)."""
    reader = _parsed(table_version)
    payload: Any = fastavro.schemaless_reader(
        io.BytesIO(value),
        writer_schema if writer_schema is not None else reader,
        reader,
        return_record_name=True,
        return_record_name_override=True,
    )
    assert isinstance(payload, dict)
    for name in HOODIE_META_COLUMNS:
        payload.pop(name, None)
    return payload


@cache
def parse_writer_schema(text: str) -> Any:
    """A parsed writer schema from a block header or HFile file info (cached by its text)."""
    return fastavro.parse_schema(json.loads(text))


@cache
def writer_schema_for(text: str, table_version: int) -> Any | None:
    """The parsed writer schema named by ``text``, or None when it is the reader's own schema:
    decoding then skips schema resolution, which costs as much again."""
    if not text or json.loads(text) == metadata_schema(table_version):
        return None
    return parse_writer_schema(text)


def _empty(record_type: RecordType) -> Payload:
    return {
        "key": "",
        "type": int(record_type),
        "filesystemMetadata": None,
        "BloomFilterMetadata": None,
        "ColumnStatsMetadata": None,
        "recordIndexMetadata": None,
        "SecondaryIndexMetadata": None,
    }


def files_payload(entries: Mapping[str, tuple[int, bool]], *, all_partitions: bool = False) -> Payload:
    """A ``files`` record: file (or partition) name -> (size, is_deleted)."""
    payload = _empty(RecordType.ALL_PARTITIONS if all_partitions else RecordType.FILE_LIST)
    payload["filesystemMetadata"] = {
        name: {"size": int(size), "isDeleted": bool(deleted)} for name, (size, deleted) in entries.items()
    }
    return payload


def record_index_payload(partition_path: str, location: Mapping[str, Any], instant_millis: int) -> Payload:
    """A ``record_index`` record pointing at a file group (``location`` from ``keys.encode_file_id``)."""
    payload = _empty(RecordType.RECORD_INDEX)
    payload["recordIndexMetadata"] = {
        "partitionName": partition_path,
        "fileIdHighBits": location.get("fileIdHighBits"),
        "fileIdLowBits": location.get("fileIdLowBits"),
        "fileIndex": location.get("fileIndex"),
        "fileId": location.get("fileId"),
        "instantTime": instant_millis,
        "fileIdEncoding": location.get("fileIdEncoding", 0),
        "position": None,
    }
    return payload


def secondary_index_payload(*, deleted: bool = False) -> Payload:
    payload = _empty(RecordType.SECONDARY_INDEX)
    payload["SecondaryIndexMetadata"] = {"isDeleted": deleted}
    return payload


def bloom_filter_payload(
    bloom_type: str, instant_time: str, data: bytes, *, deleted: bool = False
) -> Payload:
    """A ``bloom_filters`` record: a base file's serialized filter (its footer string as UTF-8
    bytes), the filter type's name, and the instant that wrote the record; a deleted file gets
    ``isDeleted`` and no bytes."""
    payload = _empty(RecordType.BLOOM_FILTER)
    payload["BloomFilterMetadata"] = {
        "type": bloom_type,
        "timestamp": instant_time,
        "bloomFilter": b"" if deleted else bytes(data),
        "isDeleted": deleted,
    }
    return payload


def column_stats_payload(stats: Mapping[str, Any], *, partition_stats: bool = False) -> Payload:
    """A ``column_stats`` (or ``partition_stats``) record around one HoodieMetadataColumnStats."""
    payload = _empty(RecordType.PARTITION_STATS if partition_stats else RecordType.COLUMN_STATS)
    payload["ColumnStatsMetadata"] = dict(stats)
    return payload


def _merge_files(older: Payload, newer: Payload) -> Payload:
    """``files`` merge (hudi-format.md §6.3): sizes take the max, tombstones remove live entries."""
    merged: dict[str, dict[str, Any]] = dict(older.get("filesystemMetadata") or {})
    for name, info in (newer.get("filesystemMetadata") or {}).items():
        old = merged.get(name)
        if old is None:
            merged[name] = info
        elif info["isDeleted"]:
            if old["isDeleted"]:
                merged[name] = info
            else:
                del merged[name]
        else:
            merged[name] = {"size": max(int(old["size"]), int(info["size"])), "isDeleted": False}
    out = dict(newer)
    out["filesystemMetadata"] = merged
    return out


def _merge_column_stats(older: Payload, newer: Payload) -> Payload:
    from hoodie.metadata.column_ranges import merge_column_stats

    out = dict(newer)
    out["ColumnStatsMetadata"] = merge_column_stats(
        older["ColumnStatsMetadata"], newer["ColumnStatsMetadata"]
    )
    return out


def merge_payloads(older: Payload | None, newer: Payload | None) -> Payload | None:
    """What a key holds after ``newer`` is applied over ``older`` (None: deleted / absent)."""
    if newer is None or older is None:
        return newer
    kind = newer.get("type")
    if kind in (RecordType.ALL_PARTITIONS, RecordType.FILE_LIST):
        return _merge_files(older, newer)
    if kind in (RecordType.COLUMN_STATS, RecordType.PARTITION_STATS):
        return _merge_column_stats(older, newer)
    return newer  # record index, secondary index, bloom filters: the newer record wins


def is_live(payload: Payload | None) -> bool:
    """False for absent keys and for index entries marked deleted."""
    if payload is None:
        return False
    for field in ("SecondaryIndexMetadata", "ColumnStatsMetadata", "BloomFilterMetadata"):
        inner = payload.get(field)
        if inner is not None and inner.get("isDeleted"):
            return False
    return True
