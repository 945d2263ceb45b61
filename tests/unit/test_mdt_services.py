"""The metadata table's own services (``hoodie.metadata.services``) on copies of Apache Hudi's tables.

Every test works on a writable copy of a fixture table that has a metadata table (MDT). What
must hold: the merged MDT records read the same before and after each service, hudi-rs reads the
same data-table snapshot (it lists files through the MDT) and reads the base HFiles we write, and
each service follows Hudi 1.x's rules for when it may run. The MDT commits some tests need after a
compaction come from real rollbacks of abandoned data-table writes (each rollback commits to the MDT).
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import struct
import threading
import uuid
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hudi import HudiFileGroupReader

from hoodie.bloom import deserialize_bloom_filter
from hoodie.hfile.reader import HFileReader
from hoodie.metadata.compaction import compact_metadata_table, deltacommits_since_last_compaction
from hoodie.metadata.keys import partition_id
from hoodie.metadata.policy import MetadataTablePolicy
from hoodie.metadata.records import MetadataPartition, Payload, files_payload, metadata_schema
from hoodie.metadata.services import (
    archive_metadata_table,
    clean_metadata_table,
    earliest_data_instant_to_keep,
    maintain_metadata_table,
)
from hoodie.metadata.table import MetadataTable, open_metadata_table
from hoodie.metadata.writer import BLOOM_NUM_ENTRIES, MetadataWriter
from hoodie.models.clean import CleaningPolicy, CleanMetadata
from hoodie.models.commit import CommitMetadata
from hoodie.models.compaction import CompactionPlan
from hoodie.services.archival import ArchivalPolicy
from hoodie.services.base import JobCancelled, LocalRunner, ServiceContext
from hoodie.services.clean import CleanPolicy
from hoodie.services.rollback import rollback
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import instant_to_epoch_millis, normalize
from hoodie.timeline.timeline import Timeline
from tests.conftest import hudi_rs_rows

MDT_TABLES = [
    "sample_table/mor/avro/v9_txns_simple_meta",
    "quickstart_trips_table/mor/avro/v8_trips_8i3u1d",
    "sample_table/mor/avro/v9_nonpartitioned_rollback",
]
TXNS = MDT_TABLES[0]

# Retention small enough for the few MDT commits a test makes (Hudi's MDT keeps at least 20).
SHORT = dataclasses.replace(
    MetadataTablePolicy.from_options({}),
    clean=CleanPolicy(commits_retained=1),
    archival=ArchivalPolicy(min_commits=1, max_commits=2, cleaner_commits_retained=1),
)


# -- helpers ------------------------------------------------------------------------------------


def _ctx(path: Path) -> ServiceContext:
    return ServiceContext(HoodieTable.open(str(path)))


def _mdt_path(path: Path) -> Path:
    return path / ".hoodie" / "metadata"


def _records(path: Path) -> dict[str, dict[str, Payload]]:
    """Every live record of every MDT partition, merged as readers merge them."""
    mdt = MetadataTable.open(HoodieTable.open(str(path)))
    return {p: mdt.read_partition(p) for p in mdt.view().partitions()}


def _mdt_timeline(path: Path) -> list[Instant]:
    return list(open_metadata_table(HoodieTable.open(str(path))).reload())


def _abandoned_write(ctx: ServiceContext, *, reached_mdt: bool = False) -> str:
    """A data-table delta commit whose writer died right after starting it (no heartbeat), or
    (``reached_mdt``) right after its metadata-table deltacommit completed."""
    instant_time = ctx.new_instant_time()
    timeline = ctx.table.reload()
    requested = timeline.create_requested(Instant(instant_time, Action.DELTA_COMMIT, State.REQUESTED))
    timeline.transition_to_inflight(requested)
    if reached_mdt:
        MetadataWriter(ctx.table).commit(instant_time, {}, ctx.new_instant_time)
    return instant_time


def _mdt_deltacommits(ctx: ServiceContext, count: int) -> None:
    """``count`` MDT deltacommits, each of an empty data-table deltacommit (the data unchanged)."""
    for _ in range(count):
        instant_time = _abandoned_write(ctx, reached_mdt=True)
        timeline = ctx.table.reload()
        inflight = timeline.get(instant_time)
        last = timeline.completed().writes().last()
        assert inflight is not None and last is not None
        schema = ctx.table.commit_metadata(last).schema  # readers take the latest commit's schema
        empty = CommitMetadata(
            partition_to_write_stats={},
            compacted=False,
            extra_metadata={"schema": schema} if schema else {},
            version=None,
            operation_type="UPSERT",
        )
        timeline.complete(inflight, empty.to_bytes(ctx.table.table_version), ctx.new_instant_time())


def _value_file_names(reader: HFileReader, schema_json: str) -> set[str]:
    schema = fastavro.parse_schema(json.loads(schema_json))
    return {fastavro.schemaless_reader(io.BytesIO(v), schema)["_hoodie_file_name"] for _, v in reader.items()}


def _check_base_hfile(mdt_path: Path, partition: str, name: str, table_version: int) -> HFileReader:
    """A base HFile as Hudi writes one, that hudi-rs reads to the same records."""
    reader = HFileReader((mdt_path / partition / name).read_bytes(), source=name)
    keys = [k for k, _ in reader.items()]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    info = reader.file_info
    assert info[b"schema"].decode() == reader.schema
    assert json.loads(info[b"schema"]) == metadata_schema(table_version)
    assert info[b"bloomFilterTypeCode"] == b"DYNAMIC_V0"
    assert info[b"minRecordKey"] == (keys[0] if keys else b"")
    assert info[b"maxRecordKey"] == (keys[-1] if keys else b"")
    assert reader.meta_block_names == ["bloomFilter"]
    assert reader.bloom_filter is not None
    bloom = deserialize_bloom_filter(reader.bloom_filter, "DYNAMIC_V0")
    assert all(bloom.might_contain(k.decode()) for k in keys)
    if keys:
        assert _value_file_names(reader, info[b"schema"].decode()) == {name}
        batch = HudiFileGroupReader(str(mdt_path)).read_file_slice_from_paths(f"{partition}/{name}", [])
        assert batch.num_rows == len(keys)
        assert batch.column("key").to_pylist() == [k.decode() for k in keys]
        assert set(batch.column("_hoodie_file_name").to_pylist()) == {name}
    return reader


# -- policy -------------------------------------------------------------------------------------


def test_policy_follows_hudi_metadata_write_config() -> None:
    default = MetadataTablePolicy.from_options({})
    assert default.max_delta_commits == 10
    assert default.clean.policy is CleaningPolicy.KEEP_LATEST_COMMITS
    assert default.clean.commits_retained == 20  # max(20, 10 x 1.2)
    assert (default.archival.min_commits, default.archival.max_commits) == (21, 31)
    assert default.archival.compaction_max_delta_commits == 10
    assert default.instants_before_clean == 3

    tuned = MetadataTablePolicy.from_options(
        {
            "hoodie.metadata.compact.max.delta.commits": "4",
            "hoodie.clean.commits.retained": "30",
            "hoodie.keep.min.commits": "40",
            "hoodie.keep.max.commits": "50",
        }
    )
    assert tuned.max_delta_commits == 4 and tuned.archival.compaction_max_delta_commits == 4
    assert tuned.clean.commits_retained == 36
    assert (tuned.archival.min_commits, tuned.archival.max_commits) == (41, 51)

    versions = MetadataTablePolicy.from_options(
        {"hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.clean.fileversions.retained": "3"}
    )
    assert versions.clean.policy is CleaningPolicy.KEEP_LATEST_FILE_VERSIONS
    assert versions.clean.file_versions_retained == 4  # ceil(3 x 1.2)
    hours = MetadataTablePolicy.from_options({"hoodie.clean.hours.retained": "10"})
    assert hours.clean.policy is CleaningPolicy.KEEP_LATEST_BY_HOURS and hours.clean.hours_retained == 12


# -- not due ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MDT_TABLES)
def test_nothing_is_due_on_the_fixture_tables(table_copy: Any, name: str) -> None:
    """Fewer than 10 delta commits since the last MDT compaction, too few MDT commits to clean or
    archive: the services leave the MDT alone."""
    path = table_copy(name)
    before = _mdt_timeline(path)
    assert (
        0 < deltacommits_since_last_compaction(open_metadata_table(HoodieTable.open(str(path))).reload()) < 10
    )
    ctx = _ctx(path)
    assert compact_metadata_table(ctx.table, ctx) is None
    assert maintain_metadata_table(ctx) == {"compaction": None, "clean": None, "archived": []}
    assert _mdt_timeline(path) == before


# -- compaction ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MDT_TABLES)
def test_forced_compaction_rewrites_every_slice_and_reads_the_same(table_copy: Any, name: str) -> None:
    path = table_copy(name)
    records = _records(path)
    snapshot = hudi_rs_rows(path)
    ctx = _ctx(path)
    mdt_table = open_metadata_table(ctx.table)
    slices_before = {
        (s.partition_path, s.file_id): s
        for s in mdt_table.file_system_view(timeline=mdt_table.reload()).latest_file_slices()
    }

    done = compact_metadata_table(ctx.table, ctx, force=True)

    assert done is not None and done.action is Action.COMMIT and done.is_completed
    timeline = mdt_table.reload()
    plan = CompactionPlan.from_bytes(
        timeline.read_state(done.requested_time, State.REQUESTED, Action.COMPACTION), mdt_table.table_version
    )
    ops = plan.operations or []
    assert {(op.partition_path, op.file_id) for op in ops} == {
        k for k, s in slices_before.items() if s.log_files
    }
    for op in ops:
        s = slices_before[(op.partition_path or "", op.file_id or "")]
        assert op.data_file_path == (s.base_file.name if s.base_file else None)
        assert op.delta_file_paths == [lf.name for lf in s.log_files]
    meta = mdt_table.commit_metadata(done, timeline)
    assert meta.compacted is True and meta.operation_type == "COMPACT"
    assert meta.schema is not None and '"name":"HoodieMetadataRecord"' in meta.schema
    stats = list(meta.write_stats())
    assert len(stats) == len(ops)

    # merged records and the data snapshot are unchanged
    assert _records(path) == records
    assert hudi_rs_rows(path) == snapshot

    # each compacted file group's latest slice is the new base HFile alone
    latest = mdt_table.file_system_view(timeline=timeline).latest_file_slices()
    compacted = [s for s in latest if s.base_instant_time == done.requested_time]
    assert len(compacted) == len(ops)
    for s in compacted:
        assert s.base_file is not None and not s.log_files
        stat = next(st for st in stats if st.file_id == s.file_id and st.partition_path == s.partition_path)
        assert stat.path == f"{s.partition_path}/{s.base_file.name}"
        reader = _check_base_hfile(
            _mdt_path(path), s.partition_path, s.base_file.name, mdt_table.table_version
        )
        assert stat.num_writes == len(reader)
        assert (
            stat.file_size_in_bytes == (_mdt_path(path) / s.partition_path / s.base_file.name).stat().st_size
        )
    # a partition whose file groups were all compacted holds exactly the records of its new base files
    for partition, recs in records.items():
        groups = [s for s in latest if s.partition_path == partition]
        if not groups or any(s.base_instant_time != done.requested_time for s in groups):
            continue
        keys = set()
        for s in groups:
            assert s.base_file is not None
            reader = HFileReader((_mdt_path(path) / partition / s.base_file.name).read_bytes())
            keys |= {k.decode() for k, _ in reader.items()}
        assert keys == set(recs)


def test_bloom_filter_is_sized_as_hudi_sizes_it(table_copy: Any) -> None:
    path = table_copy(MDT_TABLES[2])
    ctx = _ctx(path)
    done = compact_metadata_table(ctx.table, ctx, force=True)
    assert done is not None
    new = next((_mdt_path(path) / "files").glob(f"*_{done.requested_time}.hfile"))
    theirs = next(p for p in (_mdt_path(path) / "files").glob("*.hfile") if p != new)
    ours_bloom = HFileReader(new.read_bytes()).bloom_filter
    their_bloom = HFileReader(theirs.read_bytes()).bloom_filter
    assert ours_bloom is not None and their_bloom is not None
    header = struct.Struct(">iibiiii")
    ours = header.unpack_from(base64.b64decode(ours_bloom))
    theirs_h = header.unpack_from(base64.b64decode(their_bloom))
    assert ours[:5] == theirs_h[:5] and ours[4] == BLOOM_NUM_ENTRIES  # version, hashes, type, bits, capacity


def test_cancelled_compaction_is_undone_and_runs_again(table_copy: Any) -> None:
    path = table_copy(TXNS)
    records = _records(path)
    ctx = _ctx(path)
    stop = threading.Event()
    runner = LocalRunner(progress=lambda done, total: stop.set() if done == 2 else None, cancel=stop)
    with pytest.raises(JobCancelled):
        compact_metadata_table(ctx.table, ctx, force=True, runner=runner)
    timeline = open_metadata_table(ctx.table).reload()
    pending = timeline.pending_compaction().first()
    assert pending is not None and pending.is_requested  # back to REQUESTED, its files gone
    assert not list(_mdt_path(path).glob(f"*/*_{pending.requested_time}.hfile"))
    assert _records(path) == records

    done = compact_metadata_table(ctx.table, ctx)  # not due, but the pending one runs first
    assert done is not None and done.requested_time == pending.requested_time
    assert _records(path) == records


# -- a pending data instant ---------------------------------------------------------------------


def test_pending_data_instant_bounds_the_compaction_then_blocks_it(table_copy: Any) -> None:
    """A writer died after its MDT delta commit completed: Hudi compacts the MDT one millisecond
    before that instant (its log stays out of the new base file, so it can still be rolled back),
    and blocks further compactions at that time until the instant is rolled back."""
    path = table_copy(TXNS)
    records = _records(path)
    snapshot = hudi_rs_rows(path)
    ctx = _ctx(path)
    data = ctx.table
    failed = _abandoned_write(ctx)
    partition = MetadataTable.open(data).all_partitions()[0]
    ghost = f"{uuid.uuid4()}-0_0-1-1_{failed}.parquet"
    update = {MetadataPartition.FILES: {partition_id(partition): files_payload({ghost: (4096, False)})}}
    MetadataWriter(data).commit(failed, update, ctx.new_instant_time)
    assert _records(path) == records  # the MDT update of a pending data instant is invisible

    done = compact_metadata_table(data, ctx, force=True)
    assert done is not None
    tz = data.tz
    assert instant_to_epoch_millis(done.requested_time, tz) == instant_to_epoch_millis(failed, tz) - 1
    assert _records(path) == records
    assert hudi_rs_rows(path) == snapshot
    mdt_table = open_metadata_table(data)
    latest = mdt_table.file_system_view(timeline=mdt_table.reload()).latest_file_slices(["files"])
    assert [lf.instant_time for s in latest for lf in s.log_files] == [failed]  # left for the new slice
    new_base = latest[0].base_file
    assert new_base is not None and new_base.commit_time == done.requested_time
    assert ghost.encode() not in (_mdt_path(path) / "files" / new_base.name).read_bytes()

    before = _mdt_timeline(path)
    assert compact_metadata_table(data, ctx, force=True) is None  # blocked by the pending data instant
    assert _mdt_timeline(path) == before

    rollback(ctx, failed, LocalRunner())  # rolls back its MDT delta commit too
    assert not list(_mdt_path(path).glob(f"files/.files-*_{failed}.log.*"))
    assert _records(path) == records
    assert hudi_rs_rows(path) == snapshot


# -- clean and archival -------------------------------------------------------------------------


@pytest.mark.parametrize("name", [TXNS, MDT_TABLES[2]])
def test_clean_then_archival_after_a_compaction(table_copy: Any, name: str) -> None:
    path = table_copy(name)
    records = _records(path)
    snapshot = hudi_rs_rows(path)
    ctx = _ctx(path)
    data = ctx.table
    mdt_table = open_metadata_table(data)
    done = compact_metadata_table(data, ctx, force=True, policy=SHORT)
    assert done is not None

    # Hudi waits for three MDT instants after a compaction before cleaning
    assert clean_metadata_table(data, ctx, policy=SHORT) is None
    _mdt_deltacommits(ctx, 2)
    assert clean_metadata_table(data, ctx, policy=SHORT) is None
    _mdt_deltacommits(ctx, 1)
    old_files = {
        p.relative_to(_mdt_path(path)).as_posix()
        for p in _mdt_path(path).glob("*/*")
        if p.name != ".hoodie_partition_metadata" and done.requested_time not in p.name
    }
    view = mdt_table.file_system_view(timeline=mdt_table.reload())
    latest_files = {
        f"{s.partition_path}/{f.rsplit('/', 1)[1]}"
        for s in view.latest_file_slices()
        for f in s.file_paths(str(_mdt_path(path)))
    }
    cleaned = clean_metadata_table(data, ctx, policy=SHORT)

    assert cleaned is not None and cleaned.instant.action is Action.CLEAN and cleaned.instant.is_completed
    timeline = mdt_table.reload()
    meta = CleanMetadata.from_bytes(
        timeline.read_state(cleaned.instant.requested_time, State.COMPLETED, Action.CLEAN),
        mdt_table.table_version,
    )
    deleted = {f"{p}/{f}" for p, m in meta.partition_metadata.items() for f in m.success_delete_files}
    assert deleted and deleted <= old_files
    remaining = {
        p.relative_to(_mdt_path(path)).as_posix()
        for p in _mdt_path(path).glob("*/*")
        if p.name != ".hoodie_partition_metadata"
    }
    assert not (deleted & remaining)
    assert latest_files <= remaining  # what readers read stays; only older slices went
    assert _records(path) == records
    assert hudi_rs_rows(path) == snapshot

    # archival: only MDT instants before the data table's earliest active instant go
    data_timeline = data.reload()
    keep_from = earliest_data_instant_to_keep(data_timeline)
    assert keep_from is not None
    before = [i for i in mdt_table.reload() if i.is_completed]
    archived = archive_metadata_table(data, ctx, policy=SHORT)
    assert archived is not None
    names = archived.details["archived_instants"]
    assert names and all(normalize(n) < normalize(keep_from.requested_time) for n in names)
    after = {i.requested_time for i in mdt_table.reload()}
    assert set(names).isdisjoint(after)
    assert {
        i.requested_time for i in before if normalize(i.requested_time) >= normalize(keep_from.requested_time)
    } <= after
    assert all(
        i.requested_time in names
        for i in before
        if i.action in (Action.DELTA_COMMIT, Action.COMMIT)
        and normalize(i.requested_time) < normalize(keep_from.requested_time)
    )
    assert archive_metadata_table(data, ctx, policy=SHORT) is None  # the data table bounds the rest
    assert _records(path) == records
    assert hudi_rs_rows(path) == snapshot


def test_earliest_data_instant_to_keep() -> None:
    def instant(ts: str, action: Action, state: State = State.COMPLETED) -> Instant:
        return Instant(ts, action, state, ts if state is State.COMPLETED else None)

    clean = instant("20240101000000001", Action.CLEAN)
    commit = instant("20240101000000010", Action.COMMIT)
    later = instant("20240101000000020", Action.DELTA_COMMIT)
    assert earliest_data_instant_to_keep(Timeline([])) is None
    assert earliest_data_instant_to_keep(Timeline([clean, commit, later])) == commit  # cleans do not count
    pending_clean = instant("20240101000000005", Action.CLEAN, State.REQUESTED)
    assert earliest_data_instant_to_keep(Timeline([clean, pending_clean, commit])) == pending_clean
    saved = instant("20240101000000010", Action.SAVEPOINT)
    assert earliest_data_instant_to_keep(Timeline([commit, saved, later]), beyond_savepoint=True) == later
    assert earliest_data_instant_to_keep(Timeline([commit, saved, later])) == commit


def test_tables_without_a_metadata_table_have_nothing_to_maintain(table_copy: Any) -> None:
    path = table_copy("sample_table/mor/avro/v9_txns_simple_nometa")
    ctx = _ctx(path)
    assert maintain_metadata_table(ctx) == {}
    assert compact_metadata_table(ctx.table, ctx, force=True) is None
    assert not _mdt_path(path).exists()


def test_maintain_runs_what_is_due(table_copy: Any) -> None:
    path = table_copy(MDT_TABLES[2])
    records = _records(path)
    ctx = _ctx(path)
    policy = dataclasses.replace(SHORT, max_delta_commits=2)
    out = maintain_metadata_table(ctx, policy=policy)
    assert out["compaction"] is not None and out["clean"] is None
    _mdt_deltacommits(ctx, 3)
    out = maintain_metadata_table(ctx, policy=policy)
    assert out["clean"] is not None
    assert _records(path) == records


def test_the_metadata_service_catches_up_after_writers_that_left_it_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Writers configured never to compact the metadata table inline leave delta commits behind;
    ``hts run metadata`` reports what is due, then compacts, and the listing stays right."""
    from hoodie.write.writer import HoodieWriter
    from service.cli import main
    from tests.tables import new_table, rows

    path = tmp_path / "t"
    lazy = {"hoodie.metadata.compact.max.delta.commits": "1000"}
    writer = HoodieWriter(new_table(path), write_props=lazy)
    for ts in range(1, 6):
        writer.upsert(rows(range(ts * 3), ts))
    mdt = open_metadata_table(HoodieTable.open(str(path)))
    assert not mdt.reload().actions(Action.COMMIT), "no inline compaction with that setting"
    due = ["--option", "hoodie.metadata.compact.max.delta.commits=3"]
    assert main(["schedule", "metadata", str(path), *due, "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert "compact after 6 delta commits" in planned["reason"]
    assert main(["run", "metadata", str(path), *due, "--spark-master", "in-process", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)["executed"][0]
    compaction = mdt.reload().completed().actions(Action.COMMIT).last()
    assert compaction is not None and done["compaction"] == compaction.requested_time
    table = HoodieTable.open(str(path))
    listed = MetadataTable.open(table, table.reload()).list_files()
    on_disk = {
        p: {f.name for f in (path / p).iterdir() if not f.name.startswith(".hoodie_partition")}
        for p in listed
    }
    assert {p: set(files) for p, files in listed.items()} == on_disk
    assert main(["schedule", "metadata", str(path), *due]) == 0
    assert "nothing" in capsys.readouterr().out.lower()
