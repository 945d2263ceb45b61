"""The schema-compiled Avro encoder writes fastavro's bytes for every metadata-table payload hts
writes, and declines (so that fastavro writes them) the values it does not handle."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.io.fileio import LocalFileIO
from hoodie.metadata.avro_encoder import Unsupported, compile_encoder
from hoodie.metadata.column_ranges import partition_stats
from hoodie.metadata.column_stats import file_column_stats, tombstone
from hoodie.metadata.keys import encode_file_id
from hoodie.metadata.records import (
    _RECORD_BRANCHES,
    META_FIELDS,
    _compiled,
    _parsed,
    bloom_filter_payload,
    column_stats_payload,
    encode_payload,
    files_payload,
    record_index_payload,
    secondary_index_payload,
)

ALL_TYPES = pa.schema(
    [
        ("s", pa.string()),
        ("i", pa.int32()),
        ("l", pa.int64()),
        ("f", pa.float32()),
        ("d", pa.float64()),
        ("amount", pa.decimal128(10, 2)),
        ("day", pa.date32()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("flag", pa.bool_()),
        ("raw", pa.binary()),
        ("empty", pa.int64()),
    ]
)


def _fastavro(record: dict[str, Any], version: int) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, _parsed(version), record)
    return out.getvalue()


def _record(payload: dict[str, Any], file_name: str | None) -> dict[str, Any]:
    """The datum encode_payload hands the encoders (branches named, as it does)."""
    record = {**dict.fromkeys(META_FIELDS), "_hoodie_file_name": file_name, **payload, "key": ""}
    for field, name in _RECORD_BRANCHES.items():
        if isinstance(record.get(field), dict):
            record[field] = (name, record[field])
    return record


def _stats(tmp_path: Path, version: int) -> list[dict[str, Any]]:
    rows = [
        {
            "s": f"é{i}",
            "i": i - 3,
            "l": -(1 << 40) + i,
            "f": i / 3,
            "d": float("nan") if i == 2 else -0.0 if i == 1 else i * 1.5,
            "amount": Decimal(f"{i}.{i}5"),
            "day": dt.date(2026, 1, 1 + i),
            "at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i),
            "flag": i % 2 == 0,
            "raw": bytes([i, 255 - i]),
            "empty": None,
        }
        for i in range(5)
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=ALL_TYPES), tmp_path / "f.parquet")
    stats = file_column_stats(
        LocalFileIO(), str(tmp_path), "", "f.parquet", ALL_TYPES.names, {}, table_version=version
    )
    assert len(stats) == len(ALL_TYPES)
    return stats


def _payloads(tmp_path: Path, version: int) -> list[dict[str, Any]]:
    stats = _stats(tmp_path, version)
    location = encode_file_id("9b42bb86-fbf9-4317-b639-168185d57da8-0")
    return [
        *(column_stats_payload(s) for s in stats),
        *(
            column_stats_payload(s, partition_stats=True)
            for s in partition_stats("p=1", stats, tight_bound=True)
        ),
        column_stats_payload(tombstone("p", "f.parquet", "s", table_version=version)),
        files_payload({"a.parquet": (123, False), ".b.log.1_0-1-0": (1 << 33, False), "c": (0, True)}),
        files_payload({"p=1": (0, False)}, all_partitions=True),
        files_payload({}),
        record_index_payload("p=1", location, 1795279877563),
        bloom_filter_payload("DYNAMIC_V0", "20260101000000000", b"\x00filter\xff"),
        bloom_filter_payload("DYNAMIC_V0", "20260101000000000", b"", deleted=True),
        secondary_index_payload(),
        secondary_index_payload(deleted=True),
    ]


@pytest.mark.parametrize("version", [8, 9])
def test_metadata_payloads_encode_as_fastavro(tmp_path: Path, version: int) -> None:
    compiled = _compiled(version)
    declined = []
    for payload in _payloads(tmp_path, version):
        for file_name in (None, "files-0000-0_0-1-0_20260101000000000.hfile"):
            record = _record(payload, file_name)
            expected = _fastavro(record, version)
            assert encode_payload(payload, version, file_name=file_name) == expected
            try:
                assert compiled(record) == expected, payload
            except Unsupported:
                declined.append(payload)
    # Only v8 decimals (DecimalWrapper holds a Python Decimal) are left to fastavro.
    names = {p["ColumnStatsMetadata"]["columnName"] for p in declined}
    assert names == ({"amount"} if version == 8 else set())


def test_generic_schema_features_and_what_is_declined() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "namespace": "n",
        "fields": [
            {"name": "m", "type": {"type": "map", "values": ["null", "long"]}},
            {"name": "a", "type": {"type": "array", "items": "double"}},
            {
                "name": "u",
                "type": [
                    "null",
                    "int",
                    {"type": "record", "name": "W", "fields": [{"name": "v", "type": "string"}]},
                ],
            },
            {"name": "next", "type": ["null", "R"]},
            {"name": "e", "type": ["null", {"type": "enum", "name": "E", "symbols": ["X", "Y"]}]},
        ],
    }
    encode = compile_encoder(schema)
    parsed = fastavro.parse_schema(schema)

    def both(value: dict[str, Any]) -> None:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, value)
        assert encode(value) == out.getvalue()

    leaf = {"m": {}, "a": [], "u": None, "next": None, "e": None}
    both(leaf)
    both(
        {
            "m": {"x": 1, "y": None, "z": -(1 << 62)},
            "a": [1.5, -0.0],
            "u": ("int", 7),
            "next": leaf,
            "e": None,
        }
    )
    both({**leaf, "u": ("n.W", {"v": "ü"})})
    for bad in (
        {**leaf, "u": 7},  # two non-null branches: which one is fastavro's business
        {**leaf, "e": "X"},  # enums are left to fastavro
        {**leaf, "m": {"x": "not a long"}},
        {**leaf, "m": {"x": 1 << 63}},
        {k: v for k, v in leaf.items() if k != "a"},  # a missing field (fastavro applies defaults)
    ):
        with pytest.raises(Unsupported):
            encode(bad)
