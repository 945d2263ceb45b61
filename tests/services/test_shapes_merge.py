"""Merge shapes: log compaction refused on the merges it does not implement; partial updates
(partial-update modes, IS_PARTIAL blocks) read and serviced as the model, and refused, nothing
written, under a merger without partial merge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiTableBuilder

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import UnsupportedShapeError
from hoodie.io.fileio import LocalFileIO
from hoodie.merge.config import PARTIAL_UPDATE_PAYLOAD, PAYLOAD_BASED_STRATEGY_ID
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext, service_named
from hoodie.shape.matrix import Shape
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from service.cli import main
from tests.services.shapes_support import (
    UNAVAILABLE,
    base_table,
    partial_block,
    partial_update_model,
    partial_updates,
    table_hash,
    write_props,
)
from tests.tables import rows


def _log_compaction_shape(path: Path, shape: Shape) -> str:
    """Build ``shape`` at ``path`` as Hudi's writers leave it; returns the evidence expected."""
    if shape is Shape.CUSTOM_MERGE:  # a v6 payload class Hudi 1.x infers CUSTOM for
        base_table(path)
        payload = "org.apache.hudi.common.model.PartialUpdateAvroPayload"
        write_props(path, {"hoodie.compaction.payload.class": payload})
        return payload
    options: dict[str, Any] = {"metadata_table": False, "table_version": TableVersion.NINE}
    if shape is Shape.MULTI_FIELD_ORDERING:
        options["ordering_fields"] = ["ts", "v"]
    else:
        options["ordering_fields"] = ["ts"]
        options["extra_properties"] = {"hoodie.table.partial.update.mode": "IGNORE_DEFAULTS"}
    from hoodie.write.create import create_table
    from tests.tables import SCHEMA

    table = create_table(
        str(path),
        table_name="t",
        table_type=TableType.MERGE_ON_READ,
        schema=SCHEMA,
        record_key_fields=["id"],
        partition_fields=["p"],
        **options,
    )
    writer = HoodieWriter(table)
    writer.insert(rows(range(12), 1))
    writer.upsert(rows(range(0, 12, 2), 2))
    writer.upsert(rows(range(0, 12, 3), 3))
    if shape is Shape.MULTI_FIELD_ORDERING:
        return "hoodie.table.ordering.fields=ts,v"
    return "hoodie.table.partial.update.mode=IGNORE_DEFAULTS"


@pytest.mark.parametrize(
    "shape",
    [Shape.CUSTOM_MERGE, Shape.MULTI_FIELD_ORDERING, Shape.PARTIAL_UPDATES],
    ids=lambda s: s.name.lower(),
)
def test_log_compaction_is_refused_on_merges_it_does_not_implement(
    shape: Shape, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Log compaction merges with the vectorized commit-time / event-time merge of full records
    over the meta fields; these shapes need more, so it is refused naming the shape, every file
    unchanged. The table's other services are not refused."""
    path = tmp_path / "t"
    evidence = _log_compaction_shape(path, shape)
    found = HoodieTable.open(str(path)).shape().feature(shape)
    assert found is not None and evidence in found.evidence, found
    assert HoodieTable.open(str(path)).shape().refusal("compaction") is None
    before = table_hash(path)
    argv = ["run", "logcompaction", str(path), "--spark-master", "in-process"]
    assert main([*argv, "--option", "hoodie.log.compaction.blocks.threshold=1"]) != 0
    err = capsys.readouterr().err
    assert shape.value in err and evidence in err and "logcompaction is refused" in err, err
    assert table_hash(path) == before


def _rows_read(data: pa.Table) -> dict[str, tuple[int, str, str]]:
    return {r["id"]: (r["ts"], r["v"], r["p"]) for r in data.to_pylist()}


def test_a_partial_update_table_reads_and_is_serviced_as_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The partial-update case, column by column: IS_PARTIAL blocks keep the columns they lack and
    FILL_UNAVAILABLE keeps the stored value where the marker came (in file groups without a partial
    block, see :func:`partial_update_model`), in reads, after compaction, and through later writes
    and every other service (log compaction refused, nothing written)."""
    path = tmp_path / "t"
    path.mkdir()
    partial_updates(path)
    model = {k: (ts, v, f"p{int(k[1:]) % 3}") for k, (ts, v) in partial_update_model().items()}

    def check(hudi_rs: bool) -> None:
        assert _rows_read(TableReader(HoodieTable.open(str(path))).snapshot()) == model
        if hudi_rs:  # hudi-rs reads complete records only: after compaction every slice is a base file
            built = HudiTableBuilder.from_base_uri(str(path)).with_hudi_option(
                "hoodie.metadata.enable", "false"
            )
            assert _rows_read(pa.Table.from_batches(built.build().read())) == model

    check(hudi_rs=False)
    run = ["run", "compaction", str(path), "--spark-master", "in-process"]
    assert main(run) == 0, capsys.readouterr().err
    check(hudi_rs=True)
    # a later upsert with the marker on k1 (kept: partial1) and new values elsewhere
    batch = rows([1, 5, 7], 4)
    v = pa.array([UNAVAILABLE, "v5@4", "v7@4"])
    data = tmp_path / "upsert.parquet"
    pq.write_table(batch.set_column(batch.schema.get_field_index("v"), "v", v), data)
    assert main(["write", str(path), "--input", str(data), "--operation", "upsert"]) == 0
    model.update({"k1": (4, "partial1", "p1"), "k5": (4, "v5@4", "p2"), "k7": (4, "v7@4", "p1")})
    check(hudi_rs=False)
    before = table_hash(path)
    assert main(["run", "logcompaction", str(path), "--spark-master", "in-process"]) != 0
    err = capsys.readouterr().err
    assert "partial-update mode" in err and "refused" in err and table_hash(path) == before
    for service in ("clustering", "compaction", "clean", "archival"):
        assert main(["run", service, str(path), "--spark-master", "in-process"]) == 0, capsys.readouterr().err
        check(hudi_rs=service != "clustering")


def test_is_partial_blocks_without_a_partial_update_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Spark SQL's partial MERGE INTO leaves IS_PARTIAL blocks in a table without any partial-update
    property: reads and compaction keep the columns a block lacks (KEEP_VALUES); log compaction is
    refused with the shape message naming the block, nothing written."""
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    before_logs = set(path.rglob(".*.log.*"))
    partial = rows([1, 3], 1)
    HoodieWriter(HoodieTable.open(str(path))).upsert(
        partial.set_column(partial.schema.get_field_index("v"), "v", pa.array(["partial1", "partial3"]))
    )
    for log in set(path.rglob(".*.log.*")) - before_logs:
        partial_block(log, ("ts", "v"))
    ts = {i: 2 if i % 2 == 0 else 1 for i in range(12)}  # base_table's inserts and upserts
    model = {f"k{i}": (t, f"v{i}@{t}", f"p{i % 3}") for i, t in ts.items()}
    model.update({"k1": (1, "partial1", "p1"), "k3": (1, "partial3", "p0")})
    assert _rows_read(TableReader(HoodieTable.open(str(path))).snapshot()) == model
    before = table_hash(path)
    assert main(["run", "logcompaction", str(path), "--spark-master", "in-process"]) != 0
    err = capsys.readouterr().err
    assert "partial-update log blocks table" in err and "IS_PARTIAL=true" in err and "refused" in err, err
    assert table_hash(path) == before
    assert main(["run", "compaction", str(path), "--spark-master", "in-process"]) == 0
    assert _rows_read(TableReader(HoodieTable.open(str(path))).snapshot()) == model
    built = HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "false")
    assert _rows_read(pa.Table.from_batches(built.build().read())) == model


PAYLOAD_MERGE = {
    "hoodie.record.merge.mode": "CUSTOM",
    "hoodie.record.merge.strategy.id": PAYLOAD_BASED_STRATEGY_ID,
    "hoodie.compaction.payload.class": PARTIAL_UPDATE_PAYLOAD,
}


def _with_partial_block(path: Path) -> None:
    """A partial update of ``v`` on k1 and k3, written as Spark SQL's MERGE INTO writes it."""
    before_logs = set(path.rglob(".*.log.*"))
    partial = rows([1, 3], 1)
    HoodieWriter(HoodieTable.open(str(path))).upsert(
        partial.set_column(partial.schema.get_field_index("v"), "v", pa.array(["partial1", "partial3"]))
    )
    for log in set(path.rglob(".*.log.*")) - before_logs:
        partial_block(log, ("ts", "v"))


def test_is_partial_blocks_under_a_merger_without_partial_merge_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hudi's reader fails on an IS_PARTIAL block when the table's merger has no partialMerge (the
    payload-based merger): reads are refused naming the block, and compaction, clustering and indexing
    are refused when they schedule (the headers of the slices' logs are read), nothing written."""
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    write_props(path, PAYLOAD_MERGE)
    _with_partial_block(path)
    shape = Shape.UNMERGED_PARTIAL_BLOCKS.value
    with pytest.raises(UnsupportedShapeError, match=f"{shape} table \\(IS_PARTIAL=true in .*read is refused"):
        TableReader(HoodieTable.open(str(path))).snapshot()
    for service in ("compaction", "clustering", "logcompaction"):
        before = table_hash(path)
        assert main(["run", service, str(path), "--spark-master", "in-process"]) != 0
        err = capsys.readouterr().err
        # log compaction is refused on the table's CUSTOM merge mode already, before any block is read
        named = (
            "custom merge mode table" if service == "logcompaction" else f"{shape} table (IS_PARTIAL=true in"
        )
        assert named in err and f"{service} is refused" in err and table_hash(path) == before, err
        if service != "logcompaction":
            assert "PayloadRecordMerger" in err, err
    before = table_hash(path)
    indexing = ["run", "indexing", str(path), "--option", "hoodie.metadata.record.index.enable=true"]
    assert main(indexing) != 0
    err = capsys.readouterr().err
    assert f"{shape} table (IS_PARTIAL=true in" in err and "indexing is refused" in err, err
    assert table_hash(path) == before


def test_a_compaction_planned_before_the_merger_changed_is_refused_when_it_runs(tmp_path: Path) -> None:
    """A plan written elsewhere (Hudi's scheduler, or before the merge properties changed) is checked
    again when it runs, before any base file is written."""
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    _with_partial_block(path)
    ctx = ServiceContext(HoodieTable.open(str(path)), {"hoodie.compact.inline.max.delta.commits": "1"})
    scheduled = service_named("compaction").schedule(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    write_props(path, PAYLOAD_MERGE)
    before = table_hash(path)
    table = HoodieTable.open(str(path))
    with pytest.raises(UnsupportedShapeError, match="IS_PARTIAL=true in .*compaction is refused"):
        service_named("compaction").execute(ServiceContext(table, {}), scheduled.instant_time, LocalRunner())
    assert table_hash(path) == before


class CountingFileIO(LocalFileIO):
    """The local filesystem, counting the bytes read from log files."""

    def __init__(self) -> None:
        super().__init__()
        self.log_bytes = 0

    def read_bytes(self, path: str) -> bytes:
        data = super().read_bytes(path)
        self.log_bytes += len(data) if ".log." in path else 0
        return data

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        data = super().read_range(path, offset, length)
        self.log_bytes += len(data) if ".log." in path else 0
        return data


def test_the_schedule_time_check_reads_log_block_headers_not_their_records(tmp_path: Path) -> None:
    """The planned slices' logs are read up to each block's header: a 3 MiB partial block costs at
    most the 1 MiB prefix a header is looked for in, not its records."""
    from hoodie.services.compaction_plan import compaction_operation, slice_of
    from hoodie.services.partial_check import check_planned_slices

    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    write_props(path, PAYLOAD_MERGE)
    before_logs = set(path.rglob(".*.log.*"))
    big = rows([1], 1)
    HoodieWriter(HoodieTable.open(str(path))).upsert(
        big.set_column(big.schema.get_field_index("v"), "v", pa.array(["x" * (3 << 20)]))
    )
    (log,) = set(path.rglob(".*.log.*")) - before_logs
    partial_block(log, ("ts", "v"))
    assert log.stat().st_size > 3 << 20
    fileio = CountingFileIO()
    table = HoodieTable(fileio, str(path), HoodieTable.open(str(path)).config)
    timeline = table.reload()
    slices = [slice_of(compaction_operation(s)) for s in table.file_system_view().latest_file_slices()]
    with pytest.raises(UnsupportedShapeError, match=f"IS_PARTIAL=true in .*{log.name}"):
        check_planned_slices(table, timeline, "compaction", slices)
    assert 0 < fileio.log_bytes <= (1 << 20) + 64 * 1024, fileio.log_bytes
