"""Key generators end to end: a MERGE_ON_READ table per key generator and partitioning, its
``hoodie.properties`` as Hudi records it, written (insert, upsert, delete) and then serviced
(compaction, log compaction, clustering, clean, archival). After the writes and after every service
the table reads, ours and hudi-rs's, as a model of Hudi's semantics: each live record under the
record key and partition path Hudi's key generators make for it (worked out by hand from
KeyGenUtils, PartitionPathEncodeUtils, TimestampBasedAvroKeyGenerator and CustomAvroKeyGenerator).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from hoodie.config.table_config import TableType, TableVersion, update_table_properties
from hoodie.io.fileio import LocalFileIO
from hoodie.keygen import KeyGeneratorType
from hoodie.read.reader import TableReader
from hoodie.table import HoodieTable
from hoodie.write.create import create_table
from hoodie.write.writer import HoodieWriter
from service.cli import main

SERVICES = ("logcompaction", "compaction", "clustering", "clean", "archival")
STRINGS = pa.schema(
    [("a", pa.string()), ("b", pa.int32()), ("ts", pa.int64()), ("r", pa.string()), ("d", pa.date32())]
)
EVENTS = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("region", pa.string()), ("ev", pa.int64())])
DATES = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("when", pa.string())])
NESTED = pa.schema(
    [
        ("k", pa.struct([("x", pa.decimal128(10, 8)), ("y", pa.string())])),
        ("t", pa.timestamp("us", tz="UTC")),
        ("ts", pa.int64()),
        ("r", pa.string()),
    ]
)
NEW_YEAR = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)  # timestamp-micros 1704067200000000
INTS = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string()), ("p", pa.int32())])
EPOCH_GMT8 = {
    "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
    "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
    "hoodie.keygen.timebased.output.timezone": "GMT+8:00",
}
NOV_14 = 1_700_000_000_000  # 2023-11-14T22:13:20Z: 2023-11-15 in GMT+8


@dataclass
class Case:
    name: str
    schema: pa.Schema
    record_keys: list[str]
    partitions: list[str]  # as hoodie.table.partition.fields records them (field:TYPE for CUSTOM v8+)
    writes: list[tuple[str, list[dict[str, Any]]]]
    expected: dict[str, tuple[str, int]]  # record key -> (partition path, ts)
    props: dict[str, str] = field(default_factory=dict)  # hoodie.properties as Hudi records them
    hive: bool = False
    url: bool = False
    hudi_rs: bool = True
    version: TableVersion = TableVersion.EIGHT
    metadata_table: bool = False


CASES = [
    Case(
        "simple_int_partition_hive",
        INTS,
        ["id"],
        ["p"],
        [
            ("insert", [{"id": i, "ts": 1, "v": "a", "p": i % 2} for i in range(4)]),
            ("upsert", [{"id": 1, "ts": 2, "v": "b", "p": 1}, {"id": 9, "ts": 2, "v": "c", "p": None}]),
            ("delete", [{"id": 2, "ts": 3, "v": None, "p": 0}]),
        ],
        {"0": ("p=0", 1), "1": ("p=1", 2), "3": ("p=1", 1), "9": ("p=__HIVE_DEFAULT_PARTITION__", 2)},
        hive=True,
    ),
    Case(
        "complex_urlencoded_two_levels",
        STRINGS,
        ["a", "b"],
        ["r", "d"],
        [
            (
                "insert",
                [
                    {"a": "x/y", "b": 1, "ts": 1, "r": "eu west/1", "d": dt.date(2024, 1, 2)},
                    {"a": "", "b": 5, "ts": 1, "r": "é=ü?%", "d": None},
                    {"a": None, "b": 2, "ts": 1, "r": None, "d": dt.date(2024, 1, 3)},
                    {"a": "z", "b": 3, "ts": 1, "r": "eu west/1", "d": dt.date(2024, 1, 2)},
                ],
            ),
            ("upsert", [{"a": "x/y", "b": 1, "ts": 2, "r": "eu west/1", "d": dt.date(2024, 1, 2)}]),
            ("delete", [{"a": "z", "b": 3, "ts": 3, "r": "eu west/1", "d": dt.date(2024, 1, 2)}]),
        ],
        {
            "a:x/y,b:1": ("r=eu west%2F1/d=2024-01-02", 2),
            "a:__empty__,b:5": ("r=é%3Dü%3F%25/d=__HIVE_DEFAULT_PARTITION__", 1),
            "a:__null__,b:2": ("r=__HIVE_DEFAULT_PARTITION__/d=2024-01-03", 1),
        },
        hive=True,
        url=True,
    ),
    Case(
        "complex_one_field_version_6",
        STRINGS,
        ["a"],
        ["r"],
        [
            ("insert", [{"a": "x", "b": 1, "ts": 1, "r": "eu/west", "d": None}]),
            ("upsert", [{"a": "x", "b": 1, "ts": 2, "r": "eu/west", "d": None}]),
        ],
        {"a:x": ("eu/west", 2)},  # 0.14.0's field-prefixed encoding, a path of two levels
        props={"hoodie.table.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator"},
        version=TableVersion.SIX,
    ),
    Case(
        "complex_nested_decimal_and_timestamp",
        NESTED,
        ["k", "t"],
        ["r"],
        [
            (
                "insert",
                [
                    {"k": {"x": Decimal("0.00000010"), "y": "q"}, "t": NEW_YEAR, "ts": 1, "r": "a"},
                    {"k": {"x": Decimal("12.5"), "y": "q"}, "t": None, "ts": 1, "r": "a"},
                ],
            ),
            ("upsert", [{"k": {"x": Decimal("12.5"), "y": "q"}, "t": None, "ts": 2, "r": "a"}]),
        ],
        # BigDecimal.toString (scientific below 10^-6), the raw timestamp-micros long, __null__
        {"k.x:1.0E-7,t:1704067200000000": ("a", 1), "k.x:12.50000000,t:__null__": ("a", 2)},
        props={"hoodie.table.recordkey.fields": "k.x,t"},
    ),
    Case(
        "nonpartitioned_two_fields",
        STRINGS,
        ["a", "b"],
        [],
        [
            ("insert", [{"a": "x", "b": 1, "ts": 1, "r": "r", "d": None}]),
            ("upsert", [{"a": "x", "b": 1, "ts": 2, "r": "r2", "d": None}]),
        ],
        {"a:x,b:1": ("", 2)},
    ),
    Case(
        "timestamp_epoch_millis",
        EVENTS,
        ["id"],
        ["ev"],
        [
            (
                "insert",
                [
                    {"id": "a", "ts": 1, "region": "eu", "ev": NOV_14},
                    {"id": "b", "ts": 1, "region": None, "ev": None},
                ],
            ),
            ("upsert", [{"id": "a", "ts": 2, "region": "eu", "ev": NOV_14}]),
        ],
        # a null value formats the default 1 ms (TimestampBasedAvroKeyGenerator.getDefaultPartitionVal)
        {"a": ("2023/11/15", 2), "b": ("1970/01/01", 1)},
        props={"hoodie.table.keygenerator.type": "TIMESTAMP", **EPOCH_GMT8},
    ),
    Case(
        "timestamp_date_string",
        DATES,
        ["id"],
        ["when"],
        [
            (
                "insert",
                [{"id": "a", "ts": 1, "when": "2024-03-01T10:00:00Z"}, {"id": "b", "ts": 1, "when": None}],
            ),
            ("upsert", [{"id": "a", "ts": 2, "when": "2024-03-01T10:00:00Z"}]),
        ],
        {"a": ("20240301", 2), "b": ("19700101", 1)},
        props={
            "hoodie.table.keygenerator.type": "TIMESTAMP",
            "hoodie.keygen.timebased.timestamp.type": "DATE_STRING",
            "hoodie.keygen.timebased.input.dateformat": "yyyy-MM-dd'T'HH:mm:ssZ",
            "hoodie.keygen.timebased.output.dateformat": "yyyyMMdd",
            "hoodie.keygen.timebased.timezone": "UTC",
        },
    ),
    Case(
        "timestamp_scalar_days",
        EVENTS,
        ["id"],
        ["ev"],
        [
            (
                "insert",
                [
                    {"id": "a", "ts": 1, "region": "eu", "ev": 19000},
                    {"id": "b", "ts": 1, "region": None, "ev": None},
                ],
            )
        ],
        {"a": ("2022-01-08", 1), "b": ("1970-01-02", 1)},
        props={
            "hoodie.table.keygenerator.type": "TIMESTAMP",
            "hoodie.keygen.timebased.timestamp.type": "SCALAR",
            "hoodie.keygen.timebased.timestamp.scalar.time.unit": "DAYS",
            "hoodie.keygen.timebased.output.dateformat": "yyyy-MM-dd",
        },
    ),
    Case(
        "custom_version_8_types_recorded",
        EVENTS,
        ["id"],
        ["region:SIMPLE", "ev:TIMESTAMP"],
        [
            (
                "insert",
                [
                    {"id": "a", "ts": 1, "region": "eu", "ev": NOV_14},
                    {"id": "b", "ts": 1, "region": None, "ev": None},
                ],
            ),
            ("upsert", [{"id": "a", "ts": 2, "region": "eu", "ev": NOV_14}]),
            ("delete", [{"id": "b", "ts": 3, "region": None, "ev": None}]),
        ],
        {"a": ("region=eu/ev=2023/11/15", 2)},
        props={"hoodie.table.keygenerator.type": "CUSTOM", **EPOCH_GMT8},
        hive=True,
        # hudi-rs takes 'region:SIMPLE' for a column name ("not present in the table schema")
        hudi_rs=False,
    ),
]
# The same table as version 9 with a metadata table (its files partition lists the encoded paths).
CASES.append(
    replace(
        next(c for c in CASES if c.name == "complex_urlencoded_two_levels"),
        name="complex_urlencoded_two_levels_v9_metadata_table",
        version=TableVersion.NINE,
        metadata_table=True,
    )
)


def _build(path: Path, case: Case) -> None:
    names = [p.split(":")[0] for p in case.partitions]
    create_table(
        str(path),
        table_name="t",
        table_type=TableType.MERGE_ON_READ,
        schema=case.schema,
        record_key_fields=case.record_keys,
        partition_fields=names,
        ordering_fields=["ts"],
        table_version=case.version,
        key_generator=KeyGeneratorType.COMPLEX if len(names) > 1 or len(case.record_keys) > 1 else None,
        hive_style_partitioning=case.hive,
        url_encode_partitioning=case.url,
        metadata_table=case.metadata_table,
    )
    if case.props:
        props = {**case.props, "hoodie.table.partition.fields": ",".join(case.partitions)}
        update_table_properties(LocalFileIO(), str(path / ".hoodie"), props)
    for operation, batch in case.writes:
        writer = HoodieWriter(HoodieTable.open(str(path)))
        getattr(writer, operation)(pa.Table.from_pylist(batch, schema=case.schema))


def _hudi_rs_read(path: Path) -> dict[str, tuple[str, int]]:
    table = HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "false")
    data = pa.Table.from_batches(table.build().read()).to_pylist()
    return {r["_hoodie_record_key"]: (r["_hoodie_partition_path"], r["ts"]) for r in data}


def _read(path: Path) -> dict[str, tuple[str, int]]:
    data = TableReader(HoodieTable.open(str(path))).snapshot().to_pylist()
    out = {r["_hoodie_record_key"]: (r["_hoodie_partition_path"], r["ts"]) for r in data}
    assert len(out) == len(data), "a key read twice"
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_key_generators_through_writes_and_services(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t"
    _build(path, case)
    for partition, _ in case.expected.values():
        assert partition == "" or (path / partition).is_dir(), partition
    for step in ("writes", *SERVICES):
        if step != "writes":
            options = (
                ["--option", "hoodie.log.compaction.blocks.threshold=1"] if step == "logcompaction" else []
            )
            assert main(["run", step, str(path), "--spark-master", "in-process", *options]) == 0, (
                capsys.readouterr().err
            )
        assert _read(path) == case.expected, step
        if case.hudi_rs:
            assert _hudi_rs_read(path) == case.expected, step
