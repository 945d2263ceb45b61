"""The one adapter between plan/metadata models and their bytes on the timeline.

Two encodings exist:

* an Avro Object Container File holding exactly one record, null codec, with only ``avro.schema``
  in the file metadata (every payload in table versions 8/9, everything except commit metadata in
  table version 6);
* the Jackson pretty-printed JSON of ``HoodieCommitMetadata`` / ``HoodieReplaceCommitMetadata``
  that table version 6 uses for commit, deltacommit and replacecommit files.

Schemas live in ``hoodie/models/avsc``. ``<Name>.avsc`` is the schema of table versions 8 and 9;
``<Name>.v<N>.avsc`` overrides it for every supported table version up to and including ``N``
(``.v6`` for table version 6 only, ``.v8`` for versions 6 and 8).
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Mapping
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import fastavro

from hoodie.errors import MalformedPlanError, SchemaError, UnsupportedTableError

__all__ = [
    "AVRO_MAGIC",
    "SUPPORTED_TABLE_VERSIONS",
    "decode_avro",
    "decode_commit_json",
    "encode_avro",
    "encode_commit_json",
    "is_avro_container",
    "load_schema",
    "schema_names",
]

AVRO_MAGIC = b"Obj\x01"
SUPPORTED_TABLE_VERSIONS = (6, 8, 9)
_SYNC_SIZE = 16
_VARIANT = re.compile(r"^(?P<name>\w+?)(?:\.v(?P<upto>\d+))?\.avsc$")


# ----------------------------------------------------------------------------------------------
# schema registry


@lru_cache(maxsize=1)
def _schema_files() -> dict[str, dict[int | None, str]]:
    """``{record name: {upto version or None for the default: file name}}`` of the packaged avsc."""
    found: dict[str, dict[int | None, str]] = {}
    for entry in resources.files("hoodie.models").joinpath("avsc").iterdir():
        match = _VARIANT.match(entry.name)
        if match is None:
            continue
        upto = match.group("upto")
        found.setdefault(match.group("name"), {})[int(upto) if upto else None] = entry.name
    return found


def schema_names() -> list[str]:
    """The record names that have a packaged schema, sorted."""
    return sorted(_schema_files())


def _check_version(table_version: int) -> None:
    if table_version not in SUPPORTED_TABLE_VERSIONS:
        raise UnsupportedTableError(
            f"table version {table_version} is not supported; supported versions: {SUPPORTED_TABLE_VERSIONS}"
        )


@cache
def _schema_file(name: str, table_version: int) -> str:
    _check_version(table_version)
    variants = _schema_files().get(name)
    if variants is None:
        raise SchemaError(f"no Avro schema named {name!r}; known: {', '.join(schema_names())}")
    eligible = sorted(v for v in variants if v is not None and v >= table_version)
    return variants[eligible[0]] if eligible else variants[None]


@cache
def _schema_by_file(file_name: str) -> dict[str, Any]:
    text = resources.files("hoodie.models").joinpath("avsc", file_name).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def load_schema(name: str, table_version: int) -> dict[str, Any]:
    """The Avro schema (as JSON data) Hudi writes ``name`` with for ``table_version``.

    The returned dict is shared (cached): treat it as read-only.
    """
    return _schema_by_file(_schema_file(name, table_version))


@cache
def _schema_text(file_name: str) -> bytes:
    # Java's Schema.toString(): compact JSON in the key order the avsc file keeps.
    return json.dumps(_schema_by_file(file_name), separators=(",", ":")).encode("utf-8")


@cache
def _parsed(file_name: str) -> Any:
    return fastavro.parse_schema(json.loads(json.dumps(_schema_by_file(file_name))))


# ----------------------------------------------------------------------------------------------
# Avro object container files


def _zigzag(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _avro_bytes(value: bytes) -> bytes:
    return _zigzag(len(value)) + value


def is_avro_container(data: bytes) -> bool:
    """True when ``data`` starts with the Avro object container magic."""
    return data[:4] == AVRO_MAGIC


def encode_avro(record: Mapping[str, Any], name: str, table_version: int) -> bytes:
    """One-record Avro container file of ``record``, laid out as Java's ``DataFileWriter`` does."""
    file_name = _schema_file(name, table_version)
    body = io.BytesIO()
    try:
        fastavro.schemaless_writer(body, _parsed(file_name), dict(record))
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
        raise SchemaError(f"cannot encode {name} for table version {table_version}: {exc}") from exc
    datum = body.getvalue()
    sync = os.urandom(_SYNC_SIZE)
    header = (
        AVRO_MAGIC
        + _zigzag(1)
        + _avro_bytes(b"avro.schema")
        + _avro_bytes(_schema_text(file_name))
        + _zigzag(0)
        + sync
    )
    return header + _zigzag(1) + _zigzag(len(datum)) + datum + sync


def decode_avro(data: bytes, name: str, table_version: int, source: str) -> dict[str, Any]:
    """The single record of an Avro container, resolved from its writer schema to ours.

    Fields our schema has but the writer's lacks get their defaults; writer-only fields are dropped.
    ``source`` names the file (or instant) in error messages.
    """
    where = source or f"<{name} payload>"
    if not data:
        raise MalformedPlanError(f"{where}: empty file, expected an Avro container holding {name}")
    if not is_avro_container(data):
        raise MalformedPlanError(
            f"{where}: not an Avro container (magic {bytes(data[:4])!r}), expected {name}"
        )
    reader_schema = _parsed(_schema_file(name, table_version))
    try:
        reader = fastavro.reader(io.BytesIO(data), reader_schema=reader_schema)
        records = iter(reader)
        first = next(records, None)
        if first is not None:
            # Reading on validates the rest of the file (block framing and sync markers).
            for _ in records:
                pass
    except Exception as exc:  # fastavro raises many types on corrupt input
        raise MalformedPlanError(f"{where}: undecodable {name} Avro container: {exc!r}") from exc
    if not isinstance(first, dict):
        raise MalformedPlanError(f"{where}: Avro container holds no {name} record")
    return first


# ----------------------------------------------------------------------------------------------
# table version 6 JSON of commit metadata (Jackson, DefaultPrettyPrinter)

_WRITE_STAT_KEYS = (
    "fileId",
    "path",
    "cdcStats",
    "prevCommit",
    "numWrites",
    "numDeletes",
    "numUpdateWrites",
    "numInserts",
    "totalWriteBytes",
    "totalWriteErrors",
    "tempPath",
    "partitionPath",
    "totalLogRecords",
    "totalLogFilesCompacted",
    "totalLogSizeCompacted",
    "totalUpdatedRecordsCompacted",
    "totalLogBlocks",
    "totalCorruptLogBlock",
    "totalRollbackBlocks",
    "fileSizeInBytes",
    "minEventTime",
    "maxEventTime",
    "runtimeStats",
)
# Java primitives (long/int): Jackson writes 0 where our dict holds None.
_PRIMITIVE_KEYS = frozenset(
    {
        "numWrites",
        "numDeletes",
        "numUpdateWrites",
        "numInserts",
        "totalWriteBytes",
        "totalWriteErrors",
        "totalLogRecords",
        "totalLogFilesCompacted",
        "totalLogSizeCompacted",
        "totalUpdatedRecordsCompacted",
        "totalLogBlocks",
        "totalCorruptLogBlock",
        "totalRollbackBlocks",
        "fileSizeInBytes",
        "logVersion",
        "logOffset",
    }
)
_RUNTIME_KEYS = ("totalScanTime", "totalUpsertTime", "totalCreateTime")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


class _Obj(list[tuple[str, Any]]):
    """Key/value pairs written, in this order, as a JSON object."""


def _json_string(value: str) -> str:
    def escape(match: re.Match[str]) -> str:
        char = match.group(0)
        return _ESCAPES.get(char) or f"\\u{ord(char):04X}"

    return '"' + _NEEDS_ESCAPE.sub(escape, value) + '"'


def _json_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    raise SchemaError(f"cannot write {type(value).__name__} value {value!r} as commit-metadata JSON")


def _pretty(value: Any, depth: int, out: list[str]) -> None:
    """Jackson's DefaultPrettyPrinter: objects indent two spaces per level, arrays stay on one line."""
    if isinstance(value, Mapping):
        value = _Obj(value.items())
    if isinstance(value, _Obj):
        if not value:
            out.append("{ }")
            return
        out.append("{")
        inner = "  " * (depth + 1)
        for i, (key, item) in enumerate(value):
            out.append(("," if i else "") + "\n" + inner + _json_string(key) + " : ")
            _pretty(item, depth + 1, out)
        out.append("\n" + "  " * depth + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[ ]")
            return
        out.append("[ ")
        for i, item in enumerate(value):
            if i:
                out.append(", ")
            _pretty(item, depth, out)
        out.append(" ]")
    else:
        out.append(_json_scalar(value))


def _json_write_stat(stat: Mapping[str, Any]) -> _Obj:
    def get(key: str) -> Any:
        value = stat.get(key)
        return 0 if value is None and key in _PRIMITIVE_KEYS else value

    items = _Obj((key, get(key)) for key in _WRITE_STAT_KEYS)
    runtime = stat.get("runtimeStats")
    if runtime is not None:
        items[_WRITE_STAT_KEYS.index("runtimeStats")] = (
            "runtimeStats",
            _Obj((key, runtime.get(key) or 0) for key in _RUNTIME_KEYS),
        )
    if stat.get("logVersion") is not None:  # a HoodieDeltaWriteStat (log write)
        items += [
            ("logVersion", get("logVersion")),
            ("logOffset", get("logOffset")),
            ("baseFile", stat.get("baseFile")),
            ("logFiles", list(stat.get("logFiles") or [])),
            ("recordsStats", _Obj([("val", None)])),
        ]
    return items


def encode_commit_json(metadata: Mapping[str, Any], replace: bool) -> bytes:
    """The table version 6 JSON of (replace) commit metadata, byte-for-byte as Hudi 0.14/0.15 writes it.

    ``metadata`` uses the Avro field names (``partitionToWriteStats``, ...). A write stat whose
    ``logVersion`` is set is written as a delta (log) write stat. There is no ``version`` key and
    no trailing newline.
    """
    stats = metadata.get("partitionToWriteStats") or {}
    items = _Obj(
        [
            (
                "partitionToWriteStats",
                _Obj(
                    (part, [_json_write_stat(s) for s in part_stats or []])
                    for part, part_stats in stats.items()
                ),
            ),
            ("compacted", metadata.get("compacted")),
            ("extraMetadata", dict(metadata.get("extraMetadata") or {})),
            ("operationType", metadata.get("operationType")),
        ]
    )
    if replace:
        replaced = metadata.get("partitionToReplaceFileIds") or {}
        items.append(("partitionToReplaceFileIds", _Obj((k, list(v or [])) for k, v in replaced.items())))
    out: list[str] = []
    _pretty(items, 0, out)
    return "".join(out).encode("utf-8")


def decode_commit_json(data: bytes, source: str) -> dict[str, Any]:
    """Parse table version 6 commit-metadata JSON; unknown keys are kept, missing keys stay missing."""
    where = source or "<commit metadata JSON>"
    if not data:
        raise MalformedPlanError(f"{where}: empty file, expected commit metadata JSON")
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedPlanError(f"{where}: undecodable commit metadata JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise MalformedPlanError(f"{where}: commit metadata JSON is a {type(parsed).__name__}, not an object")
    stats = parsed.get("partitionToWriteStats")
    if stats is not None and not (
        isinstance(stats, dict) and all(isinstance(v, list | None) for v in stats.values())
    ):
        raise MalformedPlanError(f"{where}: partitionToWriteStats is not a map of lists")
    return parsed
