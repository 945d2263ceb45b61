"""Secondary indexes Apache Hudi built stay current when hts writes: on the v9 fixture table with
two secondary indexes (a string and a date column), upserts that change, null and keep values,
deletes and inserts leave each index holding exactly one live entry per live record."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hoodie.errors import UnsupportedTableError
from hoodie.metadata.keys import secondary_index_key
from hoodie.metadata.secondary import live_secondary_entries, secondary_indexes
from hoodie.metadata.table import MetadataTable
from hoodie.read.reader import TableReader
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows

FIXTURE = "sample_table/mor/avro/v9_txns_simple_meta"
INDEXES = {"secondary_index_merchant_idx": "merchant_name", "secondary_index_txn_date_idx": "txn_date"}
META = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
]


def _check(table: HoodieTable) -> pa.Table:
    snapshot = TableReader(table).snapshot()
    mdt = MetadataTable.open(table, table.reload())
    for partition, column in INDEXES.items():
        assert set(mdt.read_partition(partition)) == live_secondary_entries(snapshot, column), partition
    return snapshot


def test_writes_keep_hudis_secondary_indexes_current(table_copy: Any) -> None:
    path = table_copy(FIXTURE)
    table = HoodieTable.open(str(path))
    assert [i.column for i in secondary_indexes(table, list(table.config.metadata_partitions))] == list(
        INDEXES.values()
    )
    before = _check(table)  # what Hudi built reads as our rule computes it
    data = before.drop_columns(META)
    keys = data.column("txn_id").to_pylist()
    changed = data.slice(0, 4)
    merchants = pa.array(["Corner $hop", None, "Back\\slash", changed["merchant_name"][3].as_py()])
    changed = changed.set_column(changed.schema.get_field_index("merchant_name"), "merchant_name", merchants)
    if "txn_ts" in changed.column_names:
        changed = changed.set_column(
            changed.schema.get_field_index("txn_ts"), "txn_ts", pc.add(changed["txn_ts"], 1_000_000)
        )
    writer = HoodieWriter(table)
    writer.upsert(changed)
    _check(HoodieTable.open(str(path)))
    writer.delete(data.filter(pc.is_in(data["txn_id"], pa.array(keys[5:7]))))
    fresh = HoodieTable.open(str(path))
    snapshot = _check(fresh)
    assert len(snapshot) == len(before) - 2
    entries = MetadataTable.open(fresh, fresh.reload()).read_partition("secondary_index_merchant_idx")
    assert secondary_index_key("Corner $hop", keys[0]) in entries and "Corner \\$hop$" + keys[0] in entries
    assert secondary_index_key(None, keys[1]) in entries
    # hudi-rs still reads the table (it lists files through the metadata table).
    assert len(hudi_rs_rows(path)) == len(snapshot)


def test_unsupported_secondary_index_columns_are_refused_before_writing(table_copy: Any) -> None:
    path = table_copy(FIXTURE)
    defs = path / ".hoodie" / ".index_defs" / "index.json"
    defs.write_text(
        defs.read_text().replace('"sourceFields" : [ "txn_date" ]', '"sourceFields" : [ "amount" ]')
    )
    table = HoodieTable.open(str(path))
    data = TableReader(table).snapshot().drop_columns(META).slice(0, 1)
    timeline = sorted(p.name for p in (path / ".hoodie" / "timeline").iterdir())
    with pytest.raises(UnsupportedTableError, match="secondary_index_txn_date_idx is on 'amount'"):
        HoodieWriter(table).upsert(data)
    assert sorted(p.name for p in (path / ".hoodie" / "timeline").iterdir()) == timeline


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_secondary_index_follows_every_kind_of_write(tmp_path: Any, table_type: str) -> None:
    """On a table hts created, with an (empty) index on ``v`` registered as Hudi 1.1 does:
    inserts, updates that change values or keep them, and deletes, for both table types."""
    from hoodie.config.table_config import TableType
    from hoodie.metadata.init import build_partition, free_init_instant_time, set_metadata_partitions
    from hoodie.metadata.table import open_metadata_table
    from hoodie.services.base import ServiceContext
    from tests.tables import define_secondary_index, new_table, rows

    path = tmp_path / "t"
    new_table(path, table_type=TableType(table_type))
    table = define_secondary_index(path, "v_idx", "v")
    at = free_init_instant_time(open_metadata_table(table).reload())
    build_partition(
        table, "secondary_index_v_idx", {}, at, ServiceContext(table).new_instant_time, num_file_groups=4
    )
    set_metadata_partitions(table, add=("secondary_index_v_idx",))

    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.insert(rows(range(12), 1))
    writer.upsert(rows(range(0, 12, 3), 2))  # new values for four keys
    writer.upsert(rows(range(12, 15), 3))  # new keys, some into small files
    writer.delete(rows(range(1, 4), 4).select(["id", "ts", "p"]))
    fresh = HoodieTable.open(str(path))
    snapshot = TableReader(fresh).snapshot()
    assert len(snapshot) == 12
    entries = MetadataTable.open(fresh, fresh.reload()).read_partition("secondary_index_v_idx")
    assert set(entries) == live_secondary_entries(snapshot, "v")


def test_a_secondary_index_on_a_double_column_holds_javas_text(
    table_copy: Any, spark: Any, spark_runner: Any
) -> None:
    """On the v8 fixture (its ``fare`` is a DOUBLE), a secondary index on ``fare`` defined as
    Hudi's CREATE INDEX defines it: INDEXING (a Spark job) builds it and writes keep it current, every value
    written as the JVM's ``Double.toString`` writes it (0.0 and -0.0 apart, NaN, exponents)."""
    from hoodie.services.base import ServiceContext
    from hoodie.services.indexing import execute_indexing, schedule_indexing
    from tests.tables import define_secondary_index

    java_double = spark.sparkContext._jvm.java.lang.Double
    path = table_copy("quickstart_trips_table/mor/avro/v8_trips_8i3u1d")
    partition = "secondary_index_fare_idx"

    def check() -> pa.Table:
        table = HoodieTable.open(str(path))
        snapshot = TableReader(table).snapshot()
        expected = {
            secondary_index_key(None if fare is None else java_double.toString(fare), str(key))
            for key, fare in zip(
                snapshot["_hoodie_record_key"].to_pylist(), snapshot["fare"].to_pylist(), strict=True
            )
        }
        assert set(MetadataTable.open(table, table.reload()).read_partition(partition)) == expected
        return snapshot

    table = define_secondary_index(path, "fare_idx", "fare", version="V1")
    ctx = ServiceContext(table, options={"hoodie.metadata.index.secondary.enable": "true"})
    scheduled = schedule_indexing(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    execute_indexing(ctx, scheduled.instant_time, spark_runner)
    assert partition in HoodieTable.open(str(path)).config.metadata_partitions
    before = check()
    assert any(f == 0.0 for f in before["fare"].to_pylist())  # the fixture's UPDATE ... SET fare = 0

    fares = [-0.0, float("nan"), 1.25e-4, 123456789.5, 0.1 + 0.2, None]  # one per record
    changed = before.drop_columns(META).slice(0, len(fares))
    changed = changed.set_column(
        changed.schema.get_field_index("fare"),
        "fare",
        pa.array(fares, type=changed.schema.field("fare").type),
    )
    HoodieWriter(HoodieTable.open(str(path))).upsert(changed)
    after = check()
    fresh = HoodieTable.open(str(path))
    texts = {k.split("$", 1)[0] for k in MetadataTable.open(fresh, fresh.reload()).read_partition(partition)}
    assert {"-0.0", "NaN", "1.25E-4", "1.234567895E8", "0.30000000000000004", "\x00"} <= texts
    assert len(hudi_rs_rows(path)) == len(after)


def test_timestamp_millis_values_are_the_microseconds_spark_holds(tmp_path: Any, spark: Any) -> None:
    """Hudi builds secondary indexes with Spark, whose rows hold every timestamp in microseconds:
    an index on a timestamp-millis column holds microseconds, as Spark reads the base files."""
    from hoodie.config.table_config import TableType
    from hoodie.services.base import LocalRunner, ServiceContext
    from hoodie.services.indexing import execute_indexing, schedule_indexing
    from tests.tables import SCHEMA, define_secondary_index, new_table, rows

    schema = SCHEMA.append(pa.field("at", pa.timestamp("ms", "UTC")))
    path = tmp_path / "t"
    new_table(path, table_type=TableType.COPY_ON_WRITE, schema=schema)
    HoodieWriter(HoodieTable.open(str(path))).insert(rows(range(6), 1, schema=schema, at=1_700_000_000_123))
    table = define_secondary_index(path, "at_idx", "at")
    ctx = ServiceContext(table, options={"hoodie.metadata.index.secondary.enable": "true"})
    scheduled = schedule_indexing(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    execute_indexing(ctx, scheduled.instant_time, LocalRunner())
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows(range(3), 2, schema=schema, at=1_700_000_999_456))

    fresh = HoodieTable.open(str(path))
    files = [
        str(path / s.partition_path / s.base_file.name) for s in fresh.file_system_view().latest_base_files()
    ]
    spark_rows = spark.read.parquet(*files).selectExpr("_hoodie_record_key", "unix_micros(at)").collect()
    expected = {secondary_index_key(str(micros), key) for key, micros in spark_rows}
    assert {secondary_index_key("1700000999456000", "k0")} <= expected
    assert set(MetadataTable.open(fresh, fresh.reload()).read_partition("secondary_index_at_idx")) == expected


def test_a_secondary_index_on_a_nested_field(tmp_path: Any) -> None:
    """An index on ``info.city`` (a field of a nested record, as Hudi's index definitions name
    it): built by INDEXING and kept current by writes, null where the record or the field is."""
    from hoodie.services.base import LocalRunner, ServiceContext
    from hoodie.services.indexing import execute_indexing, schedule_indexing
    from tests.tables import SCHEMA, define_secondary_index, new_table, rows

    info = pa.struct([("city", pa.string()), ("zip", pa.int32())])
    schema = SCHEMA.append(pa.field("info", info))
    path = tmp_path / "t"
    new_table(path, schema=schema)
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.insert(rows(range(4), 1, schema=schema, info={"city": "sf", "zip": 94107}))
    writer.insert(rows(range(4, 6), 1, schema=schema, info=None))
    writer.insert(rows(range(6, 8), 1, schema=schema, info={"city": None, "zip": 1}))
    table = define_secondary_index(path, "city_idx", "info.city")
    ctx = ServiceContext(table, options={"hoodie.metadata.index.secondary.enable": "true"})
    scheduled = schedule_indexing(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    execute_indexing(ctx, scheduled.instant_time, LocalRunner())

    def check(expected: dict[str, str | None]) -> None:
        fresh = HoodieTable.open(str(path))
        entries = MetadataTable.open(fresh, fresh.reload()).read_partition("secondary_index_city_idx")
        assert set(entries) == {secondary_index_key(city, key) for key, city in expected.items()}

    cities: dict[str, str | None] = {f"k{i}": "sf" if i < 4 else None for i in range(8)}
    check(cities)
    HoodieWriter(HoodieTable.open(str(path))).upsert(
        rows([0, 4, 6], 2, schema=schema, info={"city": "Oakland $2", "zip": 94607})
    )
    check({**cities, "k0": "Oakland $2", "k4": "Oakland $2", "k6": "Oakland $2"})
