"""Archived timelines of both layouts, built with our writers from the instants Apache Hudi wrote.

The fixtures' ``history/`` and ``archived/`` folders are empty, so each test archives real fixture
instants (their requested, inflight and completed files as they are on disk) and reads them back.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest

from hoodie.errors import (
    CorruptFileError,
    CorruptLogBlockError,
    MalformedPlanError,
    TimelineError,
    UnsupportedTableError,
)
from hoodie.file_group.log_block import BlockType, HeaderKey
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.log_reader import iter_blocks
from hoodie.models import codec
from hoodie.models.clean import CleanerPlan
from hoodie.models.clustering import RequestedReplaceMetadata
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata
from hoodie.models.compaction import CompactionPlan
from hoodie.models.index import IndexCommitMetadata
from hoodie.models.rollback import RollbackMetadata
from hoodie.table import HoodieTable
from hoodie.timeline.archived import ArchivedTimeline, archive_entries, write_archive_file
from hoodie.timeline.archived_instant import InstantFiles
from hoodie.timeline.history import (
    CompletionTimeLookup,
    Manifest,
    ManifestEntry,
    append_to_history,
    archived_completion_time,
    latest_manifest,
    lsm_row,
    read_history,
)
from hoodie.timeline.instant import Action, Instant, State

V8 = "quickstart_trips_table/mor/avro/v8_trips_8i3u1d"
V9 = "sample_table/mor/avro/v9_txns_simple_meta"
V6_MOR = "sample_table/mor/parquet/v6_nonpartitioned_rollback"
V6_COW = "sample_table/cow/v6_nonpartitioned"

TableCopy = Callable[[str], Path]


def _open(table_copy: TableCopy, name: str) -> HoodieTable:
    return HoodieTable.open(str(table_copy(name)))


def _completed(table: HoodieTable) -> list[InstantFiles]:
    tl = table.timeline
    return [InstantFiles.read(tl, i.requested_time) for i in tl.completed()]


def _history_names(table: HoodieTable) -> set[str]:
    return {p.name for p in Path(table.paths.history).iterdir()}


def _shifted(files: InstantFiles, offset: int) -> InstantFiles:
    """A copy of a real instant at other (still 17-digit) requested and completion times."""
    instant = files.instant

    def shift(ts: str) -> str:
        return str(int(ts) + offset)

    moved = Instant(
        shift(instant.requested_time), instant.action, instant.state, shift(instant.completion_time or "")
    )
    return dataclasses.replace(files, instant=moved)


# ------------------------------------------------------------------------------------------------
# layout 2: the LSM history


@pytest.mark.parametrize("name", [V8, V9])
def test_lsm_history_round_trips_every_payload(table_copy: TableCopy, name: str) -> None:
    table = _open(table_copy, name)
    version = table.table_version
    files = _completed(table)
    append_to_history(table.fileio, table.paths, files[:4])
    append_to_history(table.fileio, table.paths, files[4:])

    archived = ArchivedTimeline.load(table.fileio, table.paths, 2, table_version=version)
    assert archived.requested_times() == [f.requested_time for f in files]
    for original in files:
        got = archived.get(original.requested_time)
        assert got is not None
        assert got.action is original.instant.action
        assert got.state is State.COMPLETED
        assert got.completion_time == original.instant.completion_time
        # Hudi stores the completed file verbatim as the row's metadata.
        assert got.metadata_payload is not None and got.metadata_payload.raw == original.completed
        meta = got.metadata()
        if original.instant.action is Action.INDEXING:
            assert meta == IndexCommitMetadata.from_bytes(original.completed, version)
            assert got.plan() is None  # Hudi keeps no plan for indexing
        elif original.instant.action is Action.REPLACE_COMMIT:
            assert meta == ReplaceCommitMetadata.from_bytes(original.completed, version)
        else:
            assert meta == CommitMetadata.from_bytes(original.completed, version)
        if original.pending_action is Action.COMPACTION:
            assert got.pending_action is Action.COMPACTION
            assert got.plan_as(CompactionPlan) == CompactionPlan.from_bytes(
                original.requested or b"", version
            )
        elif original.pending_action is Action.DELTA_COMMIT:
            assert got.plan() is None and got.inflight_metadata() is None


def test_lsm_replace_commit_plan_follows_hudis_precedence(table_copy: TableCopy) -> None:
    table = _open(table_copy, V9)
    files = {f.requested_time: f for f in _completed(table)}
    clustering = files["20260307162619269"]
    overwrite = files["20260307162614221"]
    assert clustering.pending_action is Action.CLUSTERING and clustering.inflight == b""
    assert overwrite.pending_action is Action.REPLACE_COMMIT and overwrite.inflight
    # A non-empty inflight file replaces the requested one as the row's plan.
    assert lsm_row(clustering).plan == clustering.requested
    assert lsm_row(overwrite).plan == overwrite.inflight

    append_to_history(table.fileio, table.paths, [clustering, overwrite])
    got = {a.requested_time: a for a in read_history(table.fileio, table.paths, table_version=9)}
    plan = got["20260307162619269"].plan_as(RequestedReplaceMetadata)
    assert plan == RequestedReplaceMetadata.from_bytes(clustering.requested or b"", 9)
    assert plan is not None and plan.is_clustering
    assert got["20260307162614221"].plan() is None
    assert got["20260307162614221"].inflight_metadata() == CommitMetadata.from_bytes(
        overwrite.inflight or b"", 9
    )


def test_lsm_file_names_manifest_and_parquet_layout_match_hudi(table_copy: TableCopy) -> None:
    table = _open(table_copy, V8)
    files = _completed(table)[:3]
    name = append_to_history(table.fileio, table.paths, files)

    assert name == f"{files[0].requested_time}_{files[-1].requested_time}_0.parquet"
    assert re.match(r"^(\d+)_(\d+)_(\d)\.parquet", name)
    assert _history_names(table) == {name, "manifest_1", "_version_"}
    history = Path(table.paths.history)
    assert (history / "_version_").read_bytes() == b"1"
    size = (history / name).stat().st_size
    assert (history / "manifest_1").read_text() == (
        '{\n  "files" : [ {\n    "fileName" : "' + name + '",\n    "fileLen" : ' + str(size) + "\n  } ]\n}"
    )

    parquet = pq.ParquetFile(history / name)
    arrow = parquet.schema_arrow
    assert arrow.names == ["instantTime", "completionTime", "action", "metadata", "plan", "version"]
    assert [str(t) for t in arrow.types] == ["string", "string", "string", "binary", "binary", "int32"]
    assert not arrow.field("version").nullable and arrow.field("plan").nullable
    assert parquet.metadata.row_group(0).column(0).compression == "GZIP"
    kv = parquet.metadata.metadata
    assert kv[b"writer.model.name"] == b"avro"
    assert json.loads(kv[b"parquet.avro.schema"]) == codec.load_schema("HoodieLSMTimelineInstant", 8)
    rows = parquet.read().to_pylist()
    assert [r["instantTime"] for r in rows] == [f.requested_time for f in files]
    assert {r["version"] for r in rows} == {1}


def test_manifest_json_shape_round_trips_and_matches_jackson() -> None:
    manifest = Manifest((ManifestEntry("1_2_0.parquet", 10), ManifestEntry("3_4_0.parquet", 20)))
    text = manifest.to_json()
    assert text == (
        '{\n  "files" : [ {\n    "fileName" : "1_2_0.parquet",\n    "fileLen" : 10\n  }, {\n'
        '    "fileName" : "3_4_0.parquet",\n    "fileLen" : 20\n  } ]\n}'
    )
    assert json.loads(text) == {
        "files": [{"fileName": "1_2_0.parquet", "fileLen": 10}, {"fileName": "3_4_0.parquet", "fileLen": 20}]
    }
    assert Manifest.from_json(text, "m") == manifest
    assert Manifest().to_json() == '{\n  "files" : [ ]\n}'
    # Unknown properties are ignored, as Hudi's reader does.
    assert Manifest.from_json(
        '{"files":[{"fileName":"1_2_0.parquet","fileLen":3,"x":1}],"y":2}', "m"
    ).files == (ManifestEntry("1_2_0.parquet", 3),)


def test_ten_level0_files_merge_into_level1_and_each_instant_reads_once(table_copy: TableCopy) -> None:
    table = _open(table_copy, V8)
    real = _completed(table)
    batches = [[_shifted(real[i % len(real)], 10_000_000 * (i + 1))] for i in range(12)]
    for batch in batches:
        append_to_history(table.fileio, table.paths, batch)

    version, manifest = latest_manifest(table.fileio, table.paths)
    names = manifest.file_names()
    level1 = [n for n in names if n.endswith("_1.parquet")]
    assert version == 13  # 12 appends and one merge
    assert level1 == [f"{batches[0][0].requested_time}_{batches[9][0].requested_time}_1.parquet"]
    assert sorted(n for n in names if n.endswith("_0.parquet")) == sorted(
        f"{b[0].requested_time}_{b[0].requested_time}_0.parquet" for b in batches[10:]
    )
    # The merged level-0 files are gone once no kept snapshot (the newest three) lists them.
    assert _history_names(table) == {*names, "manifest_11", "manifest_12", "manifest_13", "_version_"}

    archived = ArchivedTimeline.load(table.fileio, table.paths, 2)
    expected = [b[0] for b in batches]
    assert archived.requested_times() == [f.requested_time for f in expected]
    for original in expected:
        got = archived.get(original.requested_time)
        assert got is not None and got.metadata_payload is not None
        assert got.metadata_payload.raw == original.completed
        assert got.completion_time == original.instant.completion_time


def test_small_batches_cascade_through_levels(table_copy: TableCopy) -> None:
    table = _open(table_copy, V8)
    files = _completed(table)
    for f in files:
        append_to_history(table.fileio, table.paths, [f], batch_size=2)
    _, manifest = latest_manifest(table.fileio, table.paths)
    # 8 single-instant files, merged in pairs: 4 level-1, then 2 level-2, then 1 level-3 file.
    assert manifest.file_names() == [f"{files[0].requested_time}_{files[-1].requested_time}_3.parquet"]
    got = read_history(table.fileio, table.paths)
    assert [a.requested_time for a in got] == [f.requested_time for f in files]


def test_archived_completion_time_lookup(table_copy: TableCopy) -> None:
    table = _open(table_copy, V8)
    files = _completed(table)
    append_to_history(table.fileio, table.paths, files[:5])
    lookup = CompletionTimeLookup(table.fileio, table.paths)
    for f in files[:5]:
        assert lookup(f.requested_time) == f.instant.completion_time
        assert (
            archived_completion_time(table.fileio, table.paths, f.requested_time) == f.instant.completion_time
        )
    assert lookup(files[6].requested_time) is None
    assert archived_completion_time(table.fileio, table.paths, "20200101000000000") is None
    archived = ArchivedTimeline.load(table.fileio, table.paths, 2)
    assert archived.completion_time(files[2].requested_time) == files[2].instant.completion_time


def test_range_filter_is_inclusive_and_skips_files(table_copy: TableCopy) -> None:
    table = _open(table_copy, V8)
    files = _completed(table)
    append_to_history(table.fileio, table.paths, files[:4])
    append_to_history(table.fileio, table.paths, files[4:])
    times = [f.requested_time for f in files]
    loaded = ArchivedTimeline.load(table.fileio, table.paths, 2, start=times[2], end=times[5])
    assert loaded.requested_times() == times[2:6]
    assert ArchivedTimeline.load(table.fileio, table.paths, 2, start=times[7]).requested_times() == times[7:]
    assert (
        ArchivedTimeline.load(table.fileio, table.paths, 2, end="20000101000000000").requested_times() == []
    )


def test_repeated_append_is_a_no_op_and_leftovers_are_replaced(table_copy: TableCopy) -> None:
    table = _open(table_copy, V8)
    files = _completed(table)
    name = append_to_history(table.fileio, table.paths, files[:2])
    assert append_to_history(table.fileio, table.paths, files[:2]) == name
    assert latest_manifest(table.fileio, table.paths)[0] == 1

    # A file a crashed archiver left (never listed by a manifest) is rewritten.
    leftover = Path(table.paths.history) / f"{files[2].requested_time}_{files[3].requested_time}_0.parquet"
    leftover.write_bytes(b"partial")
    append_to_history(table.fileio, table.paths, files[2:4])
    assert [a.requested_time for a in read_history(table.fileio, table.paths)] == [
        f.requested_time for f in files[:4]
    ]


def test_version_file_missing_or_garbled_falls_back_to_listing(table_copy: TableCopy) -> None:
    table = _open(table_copy, V8)
    files = _completed(table)
    append_to_history(table.fileio, table.paths, files[:2])
    append_to_history(table.fileio, table.paths, files[2:4])
    version_file = Path(table.paths.history) / "_version_"
    version_file.write_text("not a number")
    assert latest_manifest(table.fileio, table.paths)[0] == 2
    version_file.unlink()
    assert len(read_history(table.fileio, table.paths)) == 4


def test_corrupt_manifest_names_the_file(table_copy: TableCopy) -> None:
    table = _open(table_copy, V8)
    append_to_history(table.fileio, table.paths, _completed(table)[:2])
    manifest = Path(table.paths.history) / "manifest_1"
    manifest.write_text('{"files": [{"fileName": 12')
    with pytest.raises(CorruptFileError, match=re.escape(str(manifest))):
        read_history(table.fileio, table.paths)
    manifest.unlink()
    with pytest.raises(CorruptFileError, match="manifest_1.*missing"):
        read_history(table.fileio, table.paths)


def test_missing_or_truncated_data_file_names_the_file(table_copy: TableCopy) -> None:
    table = _open(table_copy, V8)
    name = append_to_history(table.fileio, table.paths, _completed(table)[:2])
    data = Path(table.paths.history) / name
    content = data.read_bytes()
    data.write_bytes(content[: len(content) // 2])
    with pytest.raises(CorruptFileError, match=re.escape(name)):
        read_history(table.fileio, table.paths)
    data.unlink()
    with pytest.raises(CorruptFileError, match=f"{re.escape(name)}.*missing"):
        CompletionTimeLookup(table.fileio, table.paths)("20251220210108078")


def test_lsm_history_rejects_layout1_tables_and_incomplete_instants(table_copy: TableCopy) -> None:
    v6 = _open(table_copy, V6_MOR)
    with pytest.raises(UnsupportedTableError, match="layout 1"):
        append_to_history(v6.fileio, v6.paths, _completed(v6))
    v8 = _open(table_copy, V8)
    files = _completed(v8)[0]
    pending = dataclasses.replace(
        files, instant=Instant(files.requested_time, Action.DELTA_COMMIT, State.INFLIGHT)
    )
    with pytest.raises(TimelineError, match="not completed"):
        append_to_history(v8.fileio, v8.paths, [pending])
    with pytest.raises(TimelineError, match="not completed"):
        InstantFiles.read(v8.timeline, "20990101000000000")


# ------------------------------------------------------------------------------------------------
# layout 1: .commits_.archive log files


def _archive_records(path: Path) -> tuple[list[dict[str, Any]], list[dict[HeaderKey, str]]]:
    records: list[dict[str, Any]] = []
    headers: list[dict[HeaderKey, str]] = []
    for block in iter_blocks(path.read_bytes(), str(path)):
        assert block.block_type is BlockType.AVRO_DATA
        headers.append(dict(block.header))
        schema = fastavro.parse_schema(json.loads(block.header[HeaderKey.SCHEMA]))
        content = block.content
        count = int.from_bytes(content[4:8], "big")
        assert int.from_bytes(content[:4], "big") == 3
        pos = 8
        for _ in range(count):
            length = int.from_bytes(content[pos : pos + 4], "big")
            records.append(
                fastavro.schemaless_reader(io.BytesIO(content[pos + 4 : pos + 4 + length]), schema, None)
            )
            pos += 4 + length
        assert pos == len(content)
    return records, headers


def test_v6_archive_file_layout_and_records_match_hudi(table_copy: TableCopy) -> None:
    table = _open(table_copy, V6_MOR)
    files = _completed(table)
    name = write_archive_file(table.fileio, table.paths, files)
    assert name == ".commits_.archive.1_1-0-1"
    parsed = LogFile.parse(name)
    assert parsed == LogFile("commits", "", 1, "1-0-1", "archive")

    records, headers = _archive_records(Path(table.paths.archived) / name)
    assert all(set(h) == {HeaderKey.SCHEMA} for h in headers)
    assert json.loads(headers[0][HeaderKey.SCHEMA]) == codec.load_schema("HoodieArchivedMetaEntry", 6)
    # One record per state file: 3 + 3 + 3, in blocks of at most ten.
    assert [(r["commitTime"], r["actionType"], r["actionState"]) for r in records] == [
        (f.requested_time, f.instant.action.value, state)
        for f in files
        for state in ("REQUESTED", "INFLIGHT", "COMPLETED")
    ]
    assert {r["version"] for r in records} == {None}
    for record, (f, state) in zip(records, [(f, s) for f in files for s in State], strict=True):
        assert record["stateTransitionTime"] == f.transition_times[state]
    by_key = {(r["commitTime"], r["actionState"]): r for r in records}
    first = files[0].requested_time
    # The empty requested file of a delta commit is archived as Hudi's default commit metadata.
    assert by_key[(first, "REQUESTED")]["hoodieCommitMetadata"] == {
        "partitionToWriteStats": {},
        "compacted": False,
        "extraMetadata": {},
        "version": None,
        "operationType": "UNKNOWN",
    }
    completed = by_key[(first, "COMPLETED")]["hoodieCommitMetadata"]
    assert completed["version"] is None  # the JSON form has no version
    assert CommitMetadata.from_avro(completed) == dataclasses.replace(
        CommitMetadata.from_bytes(files[0].completed, 6), version=None
    )
    rollback = files[1]
    assert rollback.instant.action is Action.ROLLBACK
    assert by_key[(rollback.requested_time, "REQUESTED")]["hoodieRollbackMetadata"] is None
    assert RollbackMetadata.from_avro(
        by_key[(rollback.requested_time, "COMPLETED")]["hoodieRollbackMetadata"]
    ) == (RollbackMetadata.from_bytes(rollback.completed, 6))


@pytest.mark.parametrize("name", [V6_MOR, V6_COW])
def test_v6_archive_reads_back_into_archived_instants(table_copy: TableCopy, name: str) -> None:
    table = _open(table_copy, name)
    files = _completed(table)
    write_archive_file(table.fileio, table.paths, files[:1])
    write_archive_file(table.fileio, table.paths, files[1:], batch_size=2)
    assert sorted(p.name for p in Path(table.paths.archived).iterdir()) == [
        ".commits_.archive.1_1-0-1",
        ".commits_.archive.2_1-0-1",
    ]
    archived = ArchivedTimeline.load(table.fileio, table.paths, 1)
    assert archived.requested_times() == [f.requested_time for f in files]
    for original in files:
        got = archived.get(original.requested_time)
        assert got is not None
        assert got.state is State.COMPLETED and got.action is original.instant.action
        assert got.completion_time == original.transition_times[State.COMPLETED]
        if original.instant.action is Action.ROLLBACK:
            assert got.metadata() == RollbackMetadata.from_bytes(original.completed, 6)
            assert got.plan() is None  # Hudi 0.14/0.15 does not archive rollback plans
            continue
        expected = dataclasses.replace(CommitMetadata.from_bytes(original.completed, 6), version=None)
        assert got.metadata_as(CommitMetadata) == expected
        assert got.inflight_metadata() == dataclasses.replace(
            CommitMetadata.from_bytes(original.inflight or b"", 6), version=None
        )


def test_v6_compaction_and_replace_commit_entries(table_copy: TableCopy) -> None:
    """Real compaction and insert-overwrite instants (from a v9 table), their commit metadata
    rewritten into table version 6 JSON, archived the way Hudi 0.14/0.15 does."""
    source = {f.requested_time: f for f in _completed(_open(table_copy, V9))}
    compaction = source["20260307162618152"]
    overwrite = source["20260307162614221"]

    def as_json(model: type[CommitMetadata], data: bytes) -> bytes:
        return model.from_bytes(data, 9).to_bytes(6)

    compaction = dataclasses.replace(compaction, completed=as_json(CommitMetadata, compaction.completed))
    overwrite = dataclasses.replace(
        overwrite,
        completed=as_json(ReplaceCommitMetadata, overwrite.completed),
        inflight=as_json(CommitMetadata, overwrite.inflight or b""),
    )
    table = _open(table_copy, V6_MOR)
    entries = {
        (r["commitTime"], r["actionState"]): r for f in (compaction, overwrite) for r in archive_entries(f)
    }
    ts = compaction.requested_time
    assert entries[(ts, "REQUESTED")]["actionType"] == "compaction"
    assert entries[(ts, "INFLIGHT")]["actionType"] == "compaction"
    assert entries[(ts, "INFLIGHT")]["hoodieCompactionPlan"] is None  # only the requested entry has it
    assert entries[(ts, "COMPLETED")]["actionType"] == "commit"

    write_archive_file(table.fileio, table.paths, [compaction, overwrite])
    archived = ArchivedTimeline.load(table.fileio, table.paths, 1)
    got = archived.get(ts)
    assert got is not None and got.action is Action.COMMIT and got.pending_action is Action.COMPACTION
    assert got.plan_as(CompactionPlan) == CompactionPlan.from_bytes(compaction.requested or b"", 6)
    assert got.metadata_as(CommitMetadata) == dataclasses.replace(
        CommitMetadata.from_bytes(compaction.completed, 6), version=None
    )
    replace = archived.get(overwrite.requested_time)
    assert replace is not None and replace.action is Action.REPLACE_COMMIT
    assert replace.plan() == RequestedReplaceMetadata.from_bytes(overwrite.requested or b"", 6)
    assert replace.metadata_as(ReplaceCommitMetadata) == dataclasses.replace(
        ReplaceCommitMetadata.from_bytes(overwrite.completed, 6), version=None
    )
    assert replace.inflight_metadata() == dataclasses.replace(
        CommitMetadata.from_bytes(overwrite.inflight or b"", 6), version=None
    )
    with pytest.raises(MalformedPlanError, match="CleanerPlan"):
        got.plan_as(CleanerPlan)


def test_v6_archiver_refuses_actions_hudi_does_not_archive(table_copy: TableCopy) -> None:
    indexing = next(f for f in _completed(_open(table_copy, V8)) if f.instant.action is Action.INDEXING)
    with pytest.raises(TimelineError, match="does not archive indexing"):
        archive_entries(indexing)


def test_truncated_archive_log_names_the_file(table_copy: TableCopy) -> None:
    table = _open(table_copy, V6_MOR)
    name = write_archive_file(table.fileio, table.paths, _completed(table))
    path = Path(table.paths.archived) / name
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(CorruptLogBlockError, match=re.escape(str(path))):
        ArchivedTimeline.load(table.fileio, table.paths, 1)

    # ... unless an unfinished merge of small archive files was writing that very file.
    plan_schema = {
        "type": "record",
        "name": "HoodieMergeArchiveFilePlan",
        "namespace": "org.apache.hudi.avro.model",
        "fields": [
            {"name": "version", "type": ["int", "null"], "default": 1},
            {"name": "candidate", "type": ["null", {"type": "array", "items": "string"}], "default": None},
            {"name": "mergedArchiveFileName", "type": ["null", "string"], "default": None},
        ],
    }
    buf = io.BytesIO()
    fastavro.writer(buf, plan_schema, [{"version": 1, "candidate": [], "mergedArchiveFileName": name}])
    (Path(table.paths.archived) / "mergeArchivePlan").write_bytes(buf.getvalue())
    assert len(ArchivedTimeline.load(table.fileio, table.paths, 1)) == 0


def test_archived_instants_expose_the_timeline_instant(table_copy: TableCopy) -> None:
    table = _open(table_copy, V8)
    files = _completed(table)
    append_to_history(table.fileio, table.paths, files)
    archived = ArchivedTimeline.load(table.fileio, table.paths, 2)
    assert [a.instant for a in archived] == [f.instant for f in files]
    assert [a.requested_time for a in archived.actions(Action.COMMIT)] == ["20251220210129235"]
    assert "20251220210129235" in archived and "20251220210129236" not in archived
