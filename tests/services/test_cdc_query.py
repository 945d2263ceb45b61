"""The CDC query where Hudi's writers leave no CDC log: a COW rewrite without one fails as Hudi's does;
writes that log nothing are read as Hudi reads them; the logging mode is read leniently; the CLI
reads CDC as Spark and Flink do.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.cdc.reader import read_cdc
from hoodie.cdc.schemas import SupplementalLoggingMode
from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import HoodieError, InvalidTableConfigError
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from tests.services.cdc_support import (
    DATA,
    canonical_json,
    cdc_query,
    cdc_table,
    changes_model,
    compact,
    read_optimized_state,
    row_image,
    table_state,
)
from tests.tables import SCHEMA, new_table, rows


def test_a_rewrite_without_cdc_log_fails_the_query_as_hudi_does(tmp_path: Path) -> None:
    """The reported bug's symptom: a COW rewrite without a CDC log cannot be read as CDC."""
    path = tmp_path / "t"
    table = new_table(path, table_type=TableType.COPY_ON_WRITE, metadata_table=False)
    writer = HoodieWriter(table)
    first = writer.insert(rows(range(3), 1)).instant.requested_time
    writer.upsert(rows([0], 2))
    props = path / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text() + "hoodie.table.cdc.enabled=true\n")
    with pytest.raises(HoodieError, match="There should be a cdc log file"):
        read_cdc(HoodieTable.open(str(path)), first)


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        ("DATA_BEFORE_AFTER", SupplementalLoggingMode.DATA_BEFORE_AFTER),
        ("data_before", SupplementalLoggingMode.DATA_BEFORE),
        (" op_key_only ", SupplementalLoggingMode.OP_KEY_ONLY),
        ("cdc_op_key", SupplementalLoggingMode.OP_KEY_ONLY),
        ("cdc_data_before_after", SupplementalLoggingMode.DATA_BEFORE_AFTER),
        (None, SupplementalLoggingMode.DATA_BEFORE_AFTER),
    ],
)
def test_logging_mode_is_read_leniently(value: str | None, mode: SupplementalLoggingMode) -> None:
    assert SupplementalLoggingMode.parse(value) is mode


def test_unknown_logging_mode_is_named() -> None:
    with pytest.raises(
        InvalidTableConfigError, match="hoodie.table.cdc.supplemental.logging.mode=everything"
    ):
        SupplementalLoggingMode.parse("everything")


def test_cli_reads_cdc_as_spark_and_flink(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from service.cli import main

    path = tmp_path / "t"
    table = cdc_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    first = writer.insert(rows(range(6), 1)).instant.requested_time
    writer.upsert(rows([0, 1], 2))
    before, merged = read_optimized_state(path), table_state(path)
    done = compact(path)
    out = tmp_path / "cdc.parquet"
    base = ["read", str(path), "--begin-instant", first, "--out", str(out)]
    assert main([*base, "--cdc"]) == 0
    spark = pq.read_table(out)
    assert spark.schema.names == ["op", "ts_ms", "before", "after"]
    assert sorted(spark["op"].to_pylist()) == ["u", "u"] and done not in spark["ts_ms"].to_pylist()
    assert main([*base, "--cdc-from-compaction"]) == 0
    flink = pq.read_table(out)
    from_compaction = [r for r in flink.to_pylist() if r["ts_ms"] == done]
    assert sorted(
        (r["op"], r["ts_ms"], canonical_json(r["before"]), canonical_json(r["after"]))
        for r in from_compaction
    ) == changes_model(before, merged, done)
    assert "changes to" in capsys.readouterr().out
    assert main(["read", str(path), "--cdc", "--out", str(out)]) == 2
    assert "--cdc needs --begin-instant" in capsys.readouterr().err
    assert (
        main(["read", str(path), "--cdc", "--begin-instant", done, "--end-instant", first, "--out", str(out)])
        == 2
    )
    assert "not a valid range" in capsys.readouterr().err


def _with_is_deleted(path: Path) -> tuple[HoodieWriter, pa.Schema]:
    schema = pa.schema([*SCHEMA, ("_hoodie_is_deleted", pa.bool_())])
    table = new_table(
        path,
        table_type=TableType.COPY_ON_WRITE,
        schema=schema,
        extra_properties={"hoodie.table.cdc.enabled": "true"},
    )
    return HoodieWriter(table), schema


def test_a_rewrite_that_deletes_every_old_record_and_inserts_logs_nothing_as_hudi(tmp_path: Path) -> None:
    """Hudi's ``HoodieCDCLogger.writeCDCDataIfNeeded`` skips the log when every record the handle
    wrote is an insert, though old records were deleted; 1.x's ``HoodieCDCExtractor`` then reads
    the file as BASE_FILE_INSERT (its check of ``numDeletes == 0`` is gone), so Hudi's CDC query
    reports the inserts and not the deletes. hts writes the same files and reads them the same."""
    path = tmp_path / "t"
    writer, schema = _with_is_deleted(path)
    first = writer.insert(rows([0], 1, partitions=1, schema=schema, _hoodie_is_deleted=False))
    batch = pa.concat_tables(
        [
            rows([0], 2, partitions=1, schema=schema, _hoodie_is_deleted=True),
            rows([1], 2, partitions=1, schema=schema, _hoodie_is_deleted=False),
        ]
    )
    result = writer.upsert(batch)
    done = result.instant.requested_time
    (stat,) = result.write_stats
    assert (stat.num_writes, stat.num_inserts, stat.num_update_writes, stat.num_deletes) == (1, 1, 0, 1)
    assert not stat.cdc_stats and not list(path.rglob("*.cdc"))
    after = {"id": "k1", "ts": 2, "v": "v1@2", "p": "p0", "_hoodie_is_deleted": False}
    assert table_state(path, (*DATA, "_hoodie_is_deleted")) == {"k1": after}
    assert cdc_query(path, first.instant.requested_time, done) == [("i", done, None, row_image(after))]


def test_an_upsert_deleting_every_record_of_a_file_logs_nothing_as_hudi(tmp_path: Path) -> None:
    """An upsert whose ``_hoodie_is_deleted`` records remove a whole file group writes no record
    (``recordsWritten == 0``), so no log; Hudi 1.x's extractor reads the empty file as
    BASE_FILE_INSERT (not a delete operation) and reports no change. A delete operation emptying a
    group is read as BASE_FILE_DELETE."""
    path = tmp_path / "t"
    writer, schema = _with_is_deleted(path)
    first = writer.insert(rows([0, 1], 1, partitions=1, schema=schema, _hoodie_is_deleted=False))
    result = writer.upsert(rows([0, 1], 2, partitions=1, schema=schema, _hoodie_is_deleted=True))
    (stat,) = result.write_stats
    assert (stat.num_writes, stat.num_deletes, stat.cdc_stats) == (0, 2, None)
    assert table_state(path) == {}
    assert cdc_query(path, first.instant.requested_time, result.instant.requested_time) == []
    second = writer.upsert(rows([5], 3, partitions=1, schema=schema, _hoodie_is_deleted=False))
    deleted = writer.delete(rows([5], 4, partitions=1).select(["id", "p"]))
    assert not any(s.cdc_stats for s in deleted.write_stats)
    gone = {"id": "k5", "ts": 3, "v": "v5@3", "p": "p0", "_hoodie_is_deleted": False}
    assert cdc_query(path, second.instant.requested_time, deleted.instant.requested_time) == [
        ("d", deleted.instant.requested_time, row_image(gone), None)
    ]


def test_a_concatenating_insert_into_an_empty_small_file_is_inferred_as_hudi(tmp_path: Path) -> None:
    """HoodieConcatHandle into a small file holding no record writes only inserts
    (``numWrites == numInserts``): no CDC log, read as BASE_FILE_INSERT, so hts does not refuse it."""
    path = tmp_path / "t"
    writer, schema = _with_is_deleted(path)  # version 8: hoodie.merge.allow.duplicate.on.inserts=true
    writer.insert(rows([0, 1], 1, partitions=1, schema=schema, _hoodie_is_deleted=False))
    emptied = writer.upsert(rows([0, 1], 2, partitions=1, schema=schema, _hoodie_is_deleted=True))
    result = writer.insert(rows([5], 3, partitions=1, schema=schema, _hoodie_is_deleted=False))
    (stat,) = result.write_stats
    assert stat.prev_commit == emptied.instant.requested_time  # the emptied file group's small file
    assert (stat.num_writes, stat.num_inserts, stat.cdc_stats) == (1, 1, None)
    done = result.instant.requested_time
    after = {"id": "k5", "ts": 3, "v": "v5@3", "p": "p0", "_hoodie_is_deleted": False}
    assert cdc_query(path, emptied.instant.requested_time, done) == [("i", done, None, row_image(after))]
