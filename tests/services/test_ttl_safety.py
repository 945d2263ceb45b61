"""Partition TTL's safety (``hoodie.services.ttl``): every shape of the matrix, refusals before
writing, pending table services, crashes and a concurrent writer."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hoodie.config.table_config import TableType
from hoodie.errors import UnsupportedShapeError, UnsupportedTableError, WriteConflictError
from hoodie.services.base import LocalRunner, service_named
from hoodie.services.orchestrator import ServiceOutcome, run, service_context
from hoodie.shape.matrix import OPEN_REFUSED, cell
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.transaction.lock import InProcessLockProvider
from hoodie.transaction.time_generator import WaitBasedTimeGenerator
from hoodie.write.writer import HoodieWriter
from tests.services.shapes_support import CASES, Case, base_table
from tests.services.test_ttl import DAY_MS, DAYS, hudi_rs_keys, keys, planned, table_hash, ttl, write
from tests.tables import SCHEMA, define_secondary_index, hts, new_table, rows


def test_a_pending_compaction_in_an_expired_partition_blocks_the_delete(tmp_path: Path) -> None:
    path = tmp_path / "t"
    new_table(path, table_type=TableType.MERGE_ON_READ)
    write(path, 40, rows(range(9), 1))
    write(path, 39, rows(range(0, 9, 3), 2), "upsert")  # log files in p0
    ctx = service_context(HoodieTable.open(str(path)), {"hoodie.compact.inline.max.delta.commits": "1"})
    scheduled = service_named("compaction").schedule(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    before = table_hash(path)
    # KEEP_BY_TIME counts the slice a pending compaction opens (getLatestFileSlicesBeforeOrOn with
    # pending compactions included): p0 was "written" when the compaction was scheduled.
    by_time = ttl(path, {DAYS: "10"}, dry_run=True)
    assert planned(by_time) == ["p1", "p2"]
    assert by_time.scheduled is not None and by_time.scheduled.plan_json()["blockedBy"] == []

    creation = {DAYS: "10", "hoodie.partition.ttl.management.strategy.type": "KEEP_BY_CREATION_TIME"}
    outcome = ttl(path, creation)

    # p0 has expired by creation time, but Hudi's delete_partition refuses while a pending table
    # service has a file group in a partition to delete, and its TTL then deletes nothing.
    assert not outcome.executed and outcome.note == "nothing due"
    assert outcome.scheduled is not None and scheduled.instant_time in outcome.scheduled.reason
    assert outcome.scheduled.plan_json()["blockedBy"] == [scheduled.instant_time]
    assert table_hash(path) == before


def test_refused_before_writing(tmp_path: Path) -> None:
    indexed = tmp_path / "indexed"
    new_table(indexed, table_type=TableType.COPY_ON_WRITE)
    write(indexed, 40, rows(range(6), 1))
    define_secondary_index(indexed, "v_idx", "v")
    options = {
        "hoodie.metadata.record.index.enable": "true",
        "hoodie.metadata.index.secondary.enable": "true",
    }
    run(service_context(HoodieTable.open(str(indexed)), options), "indexing", LocalRunner)
    assert "secondary_index_v_idx" in HoodieTable.open(str(indexed)).config.metadata_partitions
    before = table_hash(indexed)
    with pytest.raises(
        UnsupportedShapeError,
        match=r"secondary-indexed table \(secondary_index_v_idx.*ttl is refused.*Nothing was written",
    ):
        ttl(indexed, {DAYS: "10"})
    assert table_hash(indexed) == before

    flat = tmp_path / "flat"
    from hoodie.write.create import create_table

    create_table(
        str(flat),
        table_name="flat",
        table_type=TableType.COPY_ON_WRITE,
        schema=SCHEMA,
        record_key_fields=["id"],
        ordering_fields=["ts"],
    )
    write(flat, 40, rows(range(6), 1))
    before = table_hash(flat)
    raw = HoodieTable.open(str(flat)).config.props.get("hoodie.table.partition.fields")
    if raw is None:  # Hudi's strategies do nothing without the key
        assert ttl(flat, {DAYS: "10"}).scheduled is None
    else:
        with pytest.raises(UnsupportedTableError, match="non-partitioned"):
            ttl(flat, {DAYS: "10"})
    assert table_hash(flat) == before


# -- the shape matrix ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.shape.name.lower() for c in CASES])
def test_the_shape_matrix_cells_of_ttl(case: Case, tmp_path: Path) -> None:
    """Every census shape: refused cells name the shape and its evidence and change no file; handled
    ones delete the expired partitions (a TTL instant 40 days on, so that every partition expired)
    and readers see none of their rows."""
    shape, build, options, evidence = case.shape, case.build, case.options, case.evidence
    path = base_table(tmp_path / "t")
    build(path)
    before = table_hash(path)
    opened = None if shape in OPEN_REFUSED else HoodieTable.open(str(path))

    def later() -> ServiceOutcome:
        table = opened or HoodieTable.open(str(path))
        lock = InProcessLockProvider(table.base_path)
        clock = WaitBasedTimeGenerator(
            lock, table.tz, clock_ms=lambda: int(time.time() * 1000) + 40 * DAY_MS, scope=f"{path}-ttl"
        )
        ctx = service_context(table, {**options, DAYS: "10"}, lock=lock, time_source=clock)
        return run(ctx, "ttl", LocalRunner)

    if cell(shape, "ttl") is not None:
        with pytest.raises(UnsupportedTableError) as refused:
            later()
        assert isinstance(refused.value, UnsupportedShapeError) or shape in OPEN_REFUSED
        assert shape.value in str(refused.value) and evidence in str(refused.value)
        assert table_hash(path) == before
        return
    outcome = later()
    assert planned(outcome) == ["p0", "p1", "p2"] and outcome.executed
    if cell(shape, "read") is None:
        assert keys(path) == set() == hudi_rs_keys(path)
    else:  # hts refuses to read this shape (e.g. a payload it does not implement): no file group is left
        assert HoodieTable.open(str(path)).file_system_view().latest_file_slices() == []


@pytest.mark.parametrize("crash_at", ["ttl.after_inflight", "ttl.before_complete"])
def test_a_crash_leaves_a_pending_replacecommit_that_rollback_removes(tmp_path: Path, crash_at: str) -> None:
    path = tmp_path / "t"
    new_table(path, table_type=TableType.MERGE_ON_READ)
    write(path, 40, rows(range(9), 1))
    before = keys(path)
    heartbeat = ["--option", "hoodie.client.heartbeat.interval_in_ms=200"]

    crashed = hts(
        "run",
        "ttl",
        str(path),
        "--option",
        f"{DAYS}=10",
        *heartbeat,
        "--spark-master",
        "in-process",
        crash_at=crash_at,
    )

    assert crashed.returncode == 97, crashed.stderr
    pending = HoodieTable.open(str(path)).reload().pending()
    assert [i.action for i in pending] == [Action.REPLACE_COMMIT]
    assert keys(path) == hudi_rs_keys(path) == before  # an inflight delete hides nothing
    time.sleep(0.6)  # the heartbeat expires (2 missed beats of 200 ms)
    rolled = hts("run", "rollback", str(path), *heartbeat, "--spark-master", "in-process")
    assert rolled.returncode == 0, rolled.stderr
    assert not HoodieTable.open(str(path)).reload().pending()
    again = ttl(path, {DAYS: "10"})
    assert planned(again) == ["p0", "p1", "p2"] and again.executed
    assert keys(path) == hudi_rs_keys(path) == set()


def test_a_pending_clustering_in_an_expired_partition_blocks_the_delete(tmp_path: Path) -> None:
    path = tmp_path / "t"
    new_table(path, table_type=TableType.COPY_ON_WRITE)
    write(path, 40, rows(range(9), 1))  # two small file groups per partition for clustering to bin-pack
    write(path, 39, rows(range(9, 18), 2))
    ctx = service_context(HoodieTable.open(str(path)), {})
    scheduled = service_named("clustering").schedule(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    before = table_hash(path)

    outcome = ttl(path, {DAYS: "10"})

    # a pending clustering opens no file slice: the partitions expired, and the delete waits for it
    assert planned(outcome) == ["p0", "p1", "p2"] and not outcome.executed
    assert outcome.scheduled is not None
    assert outcome.scheduled.plan_json()["blockedBy"] == [scheduled.instant_time]
    assert table_hash(path) == before


def test_a_write_to_a_file_group_deleted_meanwhile_fails_its_conflict_check(tmp_path: Path) -> None:

    path = tmp_path / "t"
    new_table(path, table_type=TableType.COPY_ON_WRITE)
    write(path, 40, rows(range(6), 1))

    class Interleaved(HoodieWriter):
        """A writer whose commit comes after a partition TTL that ran while it wrote."""

        def _complete(self, *args: object, **kwargs: object) -> object:
            assert planned(ttl(path, {DAYS: "10"})) == ["p0", "p1", "p2"]
            return super()._complete(*args, **kwargs)  # type: ignore[arg-type]

    with pytest.raises(WriteConflictError, match="concurrent commit"):
        Interleaved(HoodieTable.open(str(path))).upsert(rows([0], 2))  # k0's file group in p0

    # as Hudi's conflict resolution: the write touched a file group a committed DELETE_PARTITION replaced
    assert not HoodieTable.open(str(path)).reload().pending()
    assert keys(path) == hudi_rs_keys(path) == set()
