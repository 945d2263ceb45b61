"""Writes to simple-bucket-index tables as Hudi's Spark writer makes them: one file group per
bucket per partition named after its bucket, every key in the file group of its bucket (its
bucket computed in the JVM from Java's ``List.hashCode``), updates and deletes in place,
insert_overwrite with new bucket file ids; and the writes hts refuses, with every file of the
table unchanged."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import InvalidInputError, UnsupportedTableError, WriteConflictError
from hoodie.index.bucket import bucket_id_from_file_id, is_bucket_file_id
from hoodie.read.reader import TableReader
from hoodie.table import HoodieTable
from hoodie.write.bucket_planner import check_bucket_options
from hoodie.write.create import create_table
from hoodie.write.writer import HoodieWriter
from service.cli import main
from tests.tables import new_table, rows

BUCKETS = 4
NBCC_TAIL = "-0000-0000-0000-000000000000-0"
OPTIONS = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": str(BUCKETS)}
TYPES = [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ]


def java_bucket(spark: Any, values: list[str | None], n: int = BUCKETS) -> int:
    """The bucket Java gives a list of hash keys: ``(List.hashCode() & Integer.MAX_VALUE) % n``."""
    jlist = spark.sparkContext._jvm.java.util.ArrayList()
    for v in values:
        jlist.add(v)
    return int((jlist.hashCode() & 0x7FFFFFFF) % n)


def file_hashes(path: Path) -> dict[str, str]:
    return {
        str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(path.rglob("*"))
        if f.is_file()
    }


def slices(path: Path) -> list[Any]:
    return HoodieTable.open(str(path)).file_system_view().latest_file_slices()


def keys_by_slice(path: Path) -> dict[tuple[str, str], list[str]]:
    table = HoodieTable.open(str(path))
    reader = TableReader(table)
    return {
        (s.partition_path, s.file_id): reader.read_file_slices([s]).column("_hoodie_record_key").to_pylist()
        for s in table.file_system_view().latest_file_slices()
    }


def snapshot(path: Path) -> dict[str, str]:
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    out: dict[str, str] = {}
    for r in data.to_pylist():
        assert r["id"] not in out, f"key {r['id']} read twice"
        out[r["id"]] = r["v"]
    return out


def hudi_rs_values(path: Path) -> dict[str, str]:
    """``id -> v`` as hudi-rs reads the table; a key read twice fails."""
    from hudi import HudiTableBuilder

    hudi = HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "false")
    batches = hudi.build().read()
    ids, values = [], []
    for batch in batches:
        ids += batch.column("id").to_pylist()
        values += batch.column("v").to_pylist()
    assert len(ids) == len(set(ids)), "hudi-rs reads a key twice"
    return dict(zip(ids, values, strict=True))


def assert_bucket_layout(path: Path, spark: Any, value_of: Any = lambda key: [key]) -> None:
    """One file group per (partition, bucket), bucket file ids, every key in its bucket's group."""
    seen: set[tuple[str, int]] = set()
    for (partition, file_id), keys in keys_by_slice(path).items():
        assert is_bucket_file_id(file_id), file_id
        bucket = bucket_id_from_file_id(file_id)
        assert (partition, bucket) not in seen, f"two file groups for bucket {bucket} in {partition}"
        seen.add((partition, bucket))
        assert bucket < BUCKETS
        for key in keys:
            assert java_bucket(spark, value_of(key)) == bucket, (key, file_id)


@pytest.mark.parametrize("table_type", TYPES)
def test_inserts_updates_and_deletes_stay_in_their_buckets(
    tmp_path: Path, spark: Any, table_type: TableType
) -> None:
    path = tmp_path / "t"
    writer = HoodieWriter(new_table(path, table_type=table_type), write_props=OPTIONS)
    writer.insert(rows(range(40), 1))
    assert_bucket_layout(path, spark)
    first = {(s.partition_path, s.file_id) for s in slices(path)}
    assert len(first) <= 3 * BUCKETS

    updated = writer.upsert(rows(range(20, 60), 2))
    assert_bucket_layout(path, spark)
    after = {(s.partition_path, s.file_id) for s in slices(path)}
    assert first <= after, "existing buckets keep their file groups"
    if table_type is TableType.MERGE_ON_READ:
        into_existing = [s for s in updated.write_stats if (s.partition_path, s.file_id) in first]
        assert into_existing and all(".log." in (s.path or "") for s in into_existing)

    writer.delete(rows(range(0, 10), 3).select(["id", "p"]))
    writer.insert(rows(range(60, 70), 4))
    assert_bucket_layout(path, spark)
    expected = {f"k{i}": f"v{i}@{2 if 20 <= i < 60 else 4 if i >= 60 else 1}" for i in range(10, 70)}
    assert snapshot(path) == expected
    assert hudi_rs_values(path) == expected


@pytest.mark.parametrize("table_type", TYPES)
def test_insert_overwrite_writes_new_bucket_file_groups(
    tmp_path: Path, spark: Any, table_type: TableType
) -> None:
    path = tmp_path / "t"
    writer = HoodieWriter(new_table(path, table_type=table_type), write_props=OPTIONS)
    writer.insert(rows(range(30), 1))
    before = {(s.partition_path, s.file_id) for s in slices(path)}
    result = writer.insert_overwrite(rows(range(0, 30, 3), 2))  # partition p0 only
    assert set(result.replaced_file_groups) == {"p0"}
    assert sorted(result.replaced_file_groups["p0"]) == sorted(f for p, f in before if p == "p0")
    assert_bucket_layout(path, spark)
    now = {(s.partition_path, s.file_id) for s in slices(path)}
    assert {g for g in now if g[0] != "p0"} == {g for g in before if g[0] != "p0"}
    assert not ({g for g in now if g[0] == "p0"} & before)
    expected = {f"k{i}": f"v{i}@{2 if i % 3 == 0 else 1}" for i in range(30)}
    assert snapshot(path) == expected
    assert hudi_rs_values(path) == expected


def test_complex_keys_hash_the_hash_field_values(tmp_path: Path, spark: Any) -> None:
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
    table = create_table(
        str(tmp_path / "t"),
        table_name="t",
        table_type=TableType.COPY_ON_WRITE,
        schema=schema,
        record_key_fields=["id", "name"],
        partition_fields=[],
        ordering_fields=["ts"],
        table_version=TableVersion.NINE,
    )
    names = ["ann", "bøb", "日本", "😀x", "a,b", "t 10:00:00"]
    data = pa.Table.from_pylist(
        [{"id": i, "name": names[i % len(names)], "ts": 1, "v": f"v{i}"} for i in range(30)], schema=schema
    )
    props = {**OPTIONS, "hoodie.bucket.index.hash.field": "name"}
    HoodieWriter(table, write_props=props).insert(data)

    def name_of(key: str) -> list[str | None]:
        return [key.split(",name:", 1)[1]]  # Hudi hashes the value of the hash field only

    assert_bucket_layout(tmp_path / "t", spark, name_of)
    HoodieWriter(HoodieTable.open(str(tmp_path / "t")), write_props=props).upsert(data)
    assert_bucket_layout(tmp_path / "t", spark, name_of)
    assert TableReader(HoodieTable.open(str(tmp_path / "t"))).snapshot().num_rows == 30


def test_hash_field_must_be_a_record_key_field(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = new_table(path)
    before = file_hashes(path)
    with pytest.raises(InvalidInputError, match="subset of the record key fields"):
        HoodieWriter(table, write_props={**OPTIONS, "hoodie.bucket.index.hash.field": "v"}).insert(
            rows([1], 1)
        )
    with pytest.raises(InvalidInputError, match="hoodie.bucket.index.num.buckets"):
        HoodieWriter(table, write_props={**OPTIONS, "hoodie.bucket.index.num.buckets": "0"}).insert(
            rows([1], 1)
        )
    assert file_hashes(path) == before


def test_default_bucket_count_is_hudis(tmp_path: Path) -> None:
    path = tmp_path / "t"
    HoodieWriter(new_table(path), write_props={"hoodie.index.type": "BUCKET"}).insert(rows(range(300), 1))
    buckets = {bucket_id_from_file_id(s.file_id) for s in slices(path)}
    assert max(buckets) < 256 and len(buckets) > 4


def _bucket_table(tmp_path: Path, table_type: TableType = TableType.MERGE_ON_READ) -> Path:
    path = tmp_path / "t"
    HoodieWriter(new_table(path, table_type=table_type), write_props=OPTIONS).insert(rows(range(40), 1))
    return path


@pytest.mark.parametrize("table_type", TYPES)
def test_writing_a_bucket_table_without_its_options_is_refused(tmp_path: Path, table_type: TableType) -> None:
    path = _bucket_table(tmp_path, table_type)
    before = file_hashes(path)
    some_id = slices(path)[0].file_id
    for props in ({}, {"hoodie.index.type": "BLOOM"}):
        for op in ("upsert", "insert", "delete", "insert_overwrite", "bulk_insert"):
            writer = HoodieWriter(HoodieTable.open(str(path)), write_props=props)
            with pytest.raises(UnsupportedTableError) as e:
                getattr(writer, op)(rows(range(3), 9))
            if op == "bulk_insert":  # the table's shape refuses it whatever the options
                assert "simple bucket index table" in str(e.value) and some_id in str(e.value)
                assert "write (bulk_insert) is refused" in str(e.value)
                continue
            assert some_id in str(e.value) and "hoodie.index.type=BUCKET" in str(e.value)
            with pytest.raises(UnsupportedTableError) as e:  # a partition the table does not have yet
                getattr(writer, op)(rows([5], 9, partitions=8))
            assert some_id in str(e.value) and "hoodie.index.type=BUCKET" in str(e.value)
            assert "hoodie.bucket.index.num.buckets" in str(e.value)
    assert file_hashes(path) == before


def test_unsupported_operations_and_shapes_are_refused(tmp_path: Path) -> None:
    path = _bucket_table(tmp_path)
    table = HoodieTable.open(str(path))
    before = file_hashes(path)
    with pytest.raises(
        UnsupportedTableError, match=r"bulk_insert of record key 'k1' into bucket \d of partition p1"
    ):
        HoodieWriter(table, write_props=OPTIONS).bulk_insert(rows([1], 2))
    with pytest.raises(UnsupportedTableError, match=r"write \(insert_overwrite_table\) is refused"):
        HoodieWriter(table, write_props=OPTIONS).write(rows([1], 2), _op("insert_overwrite_table"))
    with pytest.raises(UnsupportedTableError, match=r"is bucket [23], but hoodie.bucket.index.num.buckets=2"):
        HoodieWriter(table, write_props={**OPTIONS, "hoodie.bucket.index.num.buckets": "2"}).upsert(
            rows([1], 2)
        )
    engine = {**OPTIONS, "hoodie.index.bucket.engine": "CONSISTENT_HASHING"}
    with pytest.raises(UnsupportedTableError, match="CONSISTENT_HASHING"):
        HoodieWriter(table, write_props=engine).upsert(rows([1], 2))
    nbcc = {**OPTIONS, "hoodie.write.concurrency.mode": "NON_BLOCKING_CONCURRENCY_CONTROL"}
    cow = new_table(tmp_path / "cow", table_type=TableType.COPY_ON_WRITE)
    with pytest.raises(UnsupportedTableError, match="requires a MERGE_ON_READ table"):
        HoodieWriter(cow, write_props=nbcc).upsert(rows([1], 2))
    six = new_table(tmp_path / "six", version=TableVersion.SIX)
    with pytest.raises(UnsupportedTableError, match="needs table version 8 or later, the table is version 6"):
        HoodieWriter(six, write_props=nbcc).upsert(rows([1], 2))
    with pytest.raises(UnsupportedTableError, match="insert_overwrite is not supported with non-blocking"):
        HoodieWriter(table, write_props=nbcc).insert_overwrite(rows([1], 2))
    assert file_hashes(path) == before
    for folder in ("consistent_hashing_metadata", "partition_bucket_index_meta"):
        # Opened afresh: a table's shape is kept while its timeline is unchanged, and Hudi's writers
        # create these folders in a write (or a rescale), which changes the timeline.
        (path / ".hoodie" / ".bucket_index" / folder).mkdir(parents=True)
        with pytest.raises(UnsupportedTableError, match=f".hoodie/.bucket_index/{folder} exists"):
            HoodieWriter(HoodieTable.open(str(path)), write_props=OPTIONS).upsert(rows([1], 2))
        with pytest.raises(UnsupportedTableError, match=f".hoodie/.bucket_index/{folder} exists"):
            HoodieWriter(HoodieTable.open(str(path))).upsert(rows([1], 2))
        shutil.rmtree(path / ".hoodie" / ".bucket_index")
    assert file_hashes(path) == before


def _op(name: str) -> Any:
    from hoodie.write.options import WriteOperation

    return WriteOperation(name)


def test_two_file_groups_of_one_bucket_are_refused(tmp_path: Path) -> None:
    path = _bucket_table(tmp_path, TableType.COPY_ON_WRITE)
    victim = next(s for s in slices(path) if s.partition_path == "p1")
    assert victim.base_file is not None
    src = path / "p1" / victim.base_file.name
    twin_id = victim.file_id[:8] + "-0000-4000-8000-000000000001-0"
    shutil.copy(src, path / "p1" / victim.base_file.name.replace(victim.file_id, twin_id))
    before = file_hashes(path)
    with pytest.raises(
        UnsupportedTableError, match="Find multiple files at partition path=p1 that belong to"
    ):
        HoodieWriter(HoodieTable.open(str(path)), write_props=OPTIONS).upsert(rows([1], 2))
    assert file_hashes(path) == before


def test_bucket_options_on_a_table_of_random_file_ids_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "t"
    HoodieWriter(new_table(path)).insert(rows(range(10), 1))
    before = file_hashes(path)
    with pytest.raises(UnsupportedTableError, match="has no bucket file id"):
        HoodieWriter(HoodieTable.open(str(path)), write_props=OPTIONS).upsert(rows([1], 2))
    assert file_hashes(path) == before


def test_version_6_refuses_keys_hudi_releases_bucket_differently(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string()), ("p", pa.string())])
    data = pa.Table.from_pylist([{"id": "2024-01-01 10:00:00", "ts": 1, "v": "x", "p": "a"}], schema=schema)
    six = new_table(tmp_path / "six", version=TableVersion.SIX)
    with pytest.raises(UnsupportedTableError, match="Hudi 0.14/0.15 and Hudi 1.x hash it differently"):
        HoodieWriter(six, write_props=OPTIONS).insert(data)
    assert not list((tmp_path / "six").glob("a/*"))
    HoodieWriter(six, write_props=OPTIONS).insert(rows(range(5), 1))  # plain keys agree everywhere
    complex_six = create_table(
        str(tmp_path / "complex_six"),
        table_name="t",
        table_type=TableType.MERGE_ON_READ,
        schema=schema,
        record_key_fields=["id", "v"],
        partition_fields=["p"],
        ordering_fields=["ts"],
        table_version=TableVersion.SIX,
    )
    writer = HoodieWriter(complex_six, write_props=OPTIONS)
    writer.insert(pa.Table.from_pylist([{"id": "a", "ts": 1, "v": "x", "p": "a"}], schema=schema))  # agree
    with pytest.raises(UnsupportedTableError, match="null or empty hash field on this version-6"):
        writer.insert(pa.Table.from_pylist([{"id": "b", "ts": 1, "v": None, "p": "a"}], schema=schema))
    eight = new_table(tmp_path / "eight", version=TableVersion.EIGHT)
    HoodieWriter(eight, write_props=OPTIONS).insert(data)  # Hudi 1.0+ only: hashed whole
    assert snapshot(tmp_path / "eight") == {"2024-01-01 10:00:00": "x"}


def test_cli_creates_and_writes_a_bucket_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "b"
    data = tmp_path / "in.parquet"
    pq.write_table(rows(range(24), 1), data)
    options = ["--option", "hoodie.index.type=BUCKET", "--option", "hoodie.bucket.index.num.buckets=4"]
    create = ["write", str(table), "--input", str(data), "--operation", "upsert", "--create"]
    create += ["--record-key", "id", "--partition-field", "p", "--ordering-field", "ts", *options]
    assert main(create) == 0
    groups = slices(table)
    assert all(is_bucket_file_id(s.file_id) for s in groups)
    assert len({(s.partition_path, bucket_id_from_file_id(s.file_id)) for s in groups}) == len(groups)
    assert {bucket_id_from_file_id(s.file_id) for s in groups} <= set(range(4))
    capsys.readouterr()

    before = file_hashes(table)
    assert main(["write", str(table), "--input", str(data), "--operation", "upsert"]) == 2
    err = capsys.readouterr().err
    assert "simple bucket index table" in err and "hoodie.index.type=BUCKET" in err
    assert file_hashes(table) == before
    assert main(["write", str(table), "--input", str(data), "--operation", "upsert", *options]) == 0
    assert len(slices(table)) == len(groups)


def test_concurrent_writers_starting_one_bucket_conflict(tmp_path: Path) -> None:
    """Two writers each start a file group for the same new bucket: the later commit is aborted
    (Hudi compares buckets, not file ids, on bucket tables), so the bucket keeps one file group."""
    path = tmp_path / "t"
    table = new_table(path)
    HoodieWriter(table, write_props=OPTIONS).insert(rows(range(12), 1))

    class Interleaved(HoodieWriter):
        def _execute(self, *args: Any, **kwargs: Any) -> Any:
            HoodieWriter(HoodieTable.open(str(path)), write_props=OPTIONS).insert(rows([15], 2, partitions=4))
            return super()._execute(*args, **kwargs)

    with pytest.raises(WriteConflictError, match="concurrent commit"):
        Interleaved(HoodieTable.open(str(path)), write_props=OPTIONS).insert(rows([15], 3, partitions=4))
    p3 = [s for s in slices(path) if s.partition_path == "p3"]
    assert len(p3) == 1
    assert snapshot(path)["k15"] == "v15@2"


def test_cli_refuses_bad_bucket_options_before_creating_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "in.parquet"
    pq.write_table(rows(range(4), 1), data)
    create = ["write", "--input", str(data), "--operation", "insert", "--create", "--record-key", "id"]
    bad = [
        ("hoodie.bucket.index.num.buckets=0", "must be positive"),
        ("hoodie.bucket.index.num.buckets=four", "not an integer"),
        ("hoodie.bucket.index.hash.field=v", "subset of the record key fields"),
        ("hoodie.index.bucket.engine=CONSISTENT_HASHING", "consistent-hashing bucket index table"),
    ]
    for i, (option, message) in enumerate(bad):
        table = tmp_path / f"t{i}"
        args = [
            create[0],
            str(table),
            *create[1:],
            "--option",
            "hoodie.index.type=BUCKET",
            "--option",
            option,
        ]
        assert main(args) == 2
        assert message in capsys.readouterr().err
        assert not table.exists()


def test_nbcc_file_ids_are_appended_to_and_new_buckets_start_log_only(tmp_path: Path, spark: Any) -> None:
    """A table whose file groups have Flink's fixed NBCC ids: updates go to the logs of those file
    groups, and a bucket without one starts as the log-only file group of its fixed id."""
    path = tmp_path / "t"
    table = new_table(path, metadata_table=False)
    HoodieWriter(table, write_props=OPTIONS).insert(rows(range(40), 1))
    for s in slices(path):  # the ids Flink's NBCC writer gives these buckets
        fixed = f"{bucket_id_from_file_id(s.file_id):08d}-0000-0000-0000-000000000000-0"
        for f in (path / s.partition_path).iterdir():
            if f.name.startswith(s.file_id):
                f.rename(f.with_name(f.name.replace(s.file_id, fixed)))
    assert all(s.file_id.endswith(NBCC_TAIL) for s in slices(path))
    result = HoodieWriter(HoodieTable.open(str(path)), write_props=OPTIONS).upsert(rows(range(10), 2))
    assert all(".log." in (s.path or "") and s.file_id.endswith(NBCC_TAIL) for s in result.write_stats)
    before = file_hashes(path)
    refused = r"NBCC\) bucket table .*write \(insert_overwrite\) is refused"
    with pytest.raises(UnsupportedTableError, match=refused):
        HoodieWriter(HoodieTable.open(str(path)), write_props=OPTIONS).insert_overwrite(rows([1], 3))
    assert file_hashes(path) == before

    new = HoodieWriter(HoodieTable.open(str(path)), write_props=OPTIONS).upsert(
        rows(range(40, 52), 3, partitions=6)
    )
    started = [s for s in slices(path) if s.partition_path in ("p3", "p4", "p5")]
    assert started and all(s.base_file is None and s.file_id.endswith(NBCC_TAIL) for s in started)
    starts = [st for st in new.write_stats if st.partition_path in ("p3", "p4", "p5")]
    assert starts and all(st.prev_commit == new.instant.requested_time for st in starts)
    assert_bucket_layout(path, spark)
    expected = {f"k{i}": f"v{i}@{2 if i < 10 else 3 if i >= 40 else 1}" for i in range(52)}
    assert snapshot(path) == expected
    _compact(path)  # hudi-rs 0.5 skips log-only file groups; after compaction it reads them all
    assert snapshot(path) == expected
    assert hudi_rs_values(path) == expected


def test_nbcc_mode_on_a_new_table_writes_log_only_file_groups(tmp_path: Path, spark: Any) -> None:
    path = tmp_path / "t"
    nbcc = {**OPTIONS, "hoodie.write.concurrency.mode": "NON_BLOCKING_CONCURRENCY_CONTROL"}
    writer = HoodieWriter(new_table(path), write_props=nbcc)
    writer.insert(rows(range(30), 1))
    writer.upsert(rows(range(20, 40), 2))
    writer.delete(rows(range(5), 3).select(["id", "p"]))
    groups = slices(path)
    assert groups and all(s.base_file is None and s.file_id.endswith(NBCC_TAIL) for s in groups)
    assert_bucket_layout(path, spark)
    expected = {f"k{i}": f"v{i}@{2 if i >= 20 else 1}" for i in range(5, 40)}
    assert snapshot(path) == expected
    _compact(path)  # hudi-rs 0.5 skips log-only file groups; after compaction it reads them all
    assert {(s.partition_path, s.file_id) for s in slices(path)} == {
        (s.partition_path, s.file_id) for s in groups
    }
    assert all(s.base_file is not None for s in slices(path))
    assert snapshot(path) == expected
    assert hudi_rs_values(path) == expected
    writer.upsert(rows(range(35, 45), 4))
    expected |= {f"k{i}": f"v{i}@4" for i in range(35, 45)}
    assert_bucket_layout(path, spark)
    assert snapshot(path) == expected


def test_bucket_index_needs_record_key_fields() -> None:
    with pytest.raises(UnsupportedTableError, match="needs record key fields"):
        check_bucket_options(OPTIONS, [])


def _compact(path: Path) -> None:
    from hoodie.services.base import LocalRunner, ServiceContext
    from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction

    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, LocalRunner())


def test_compaction_keeps_bucket_file_ids_and_writes_go_on(tmp_path: Path, spark: Any) -> None:
    """Compaction rewrites a slice under its own file id, so a MERGE_ON_READ bucket table stays
    one it can write to with the same options."""
    path = _bucket_table(tmp_path)
    HoodieWriter(HoodieTable.open(str(path)), write_props=OPTIONS).upsert(rows(range(20), 2))
    before = {(s.partition_path, s.file_id) for s in slices(path)}
    _compact(path)
    assert {(s.partition_path, s.file_id) for s in slices(path)} == before
    assert all(not s.log_files for s in slices(path))
    HoodieWriter(HoodieTable.open(str(path)), write_props=OPTIONS).upsert(rows(range(10, 30), 3))
    assert_bucket_layout(path, spark)
    expected = {f"k{i}": f"v{i}@{3 if 10 <= i < 30 else 2 if i < 10 else 1}" for i in range(40)}
    assert snapshot(path) == expected
    assert hudi_rs_values(path) == expected


@pytest.mark.parametrize("table_type", TYPES)
def test_bulk_insert_writes_a_new_file_group_per_bucket(
    tmp_path: Path, spark: Any, table_type: TableType
) -> None:
    """As Hudi's bucket bulk insert (BucketBulkInsertDataInternalWriterHelper): one new file group per
    bucket written, a base file even on MERGE_ON_READ; later writes find the keys in their buckets.
    A bucket that has a file group is refused, nothing written."""
    path = tmp_path / "t"
    writer = HoodieWriter(new_table(path, table_type=table_type), write_props=OPTIONS)
    first = writer.bulk_insert(rows(range(40), 1))
    assert first.write_stats and all((s.path or "").endswith(".parquet") for s in first.write_stats)
    assert_bucket_layout(path, spark)
    more = [i for i in range(40, 80) if i % 6 >= 3]  # partitions p3..p5, new
    writer.bulk_insert(rows(more, 2, partitions=6))
    assert_bucket_layout(path, spark)
    writer.upsert(rows(range(0, 40, 5), 3))
    writer.upsert(rows(more[:5], 3, partitions=6))
    assert_bucket_layout(path, spark)
    expected = {f"k{i}": f"v{i}@1" for i in range(40)}
    expected.update({f"k{i}": f"v{i}@2" for i in more})
    expected.update({f"k{i}": f"v{i}@3" for i in [*range(0, 40, 5), *more[:5]]})
    assert snapshot(path) == expected
    assert hudi_rs_values(path) == expected
    before = file_hashes(path)
    with pytest.raises(UnsupportedTableError, match="which has file group"):
        writer.bulk_insert(rows([100], 4))
    assert file_hashes(path) == before
