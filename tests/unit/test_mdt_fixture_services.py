"""Acceptance: table services keep the metadata table (MDT) of tables Apache Hudi wrote in step.

On writable copies of the fixture tables that have a metadata table, each service of the sequence
log compaction, compaction, clustering, clean, archival runs in turn. After each one:

1. the MDT ``files`` listing (``MetadataTable.list_files``) equals a listing of the data
   partition directories: every live file with its size, nothing else;
2. the snapshot hudi-rs reads equals the snapshot before the service and the snapshot our own
   reader reads. hudi-rs lists files through the MDT on these tables, whatever
   ``hoodie.metadata.enable`` says, as long as ``files`` is in ``hoodie.table.metadata.partitions``.
   Its file slices (from the MDT) must also equal our storage-listed latest slices;
3. the MDT timeline has a deltacommit at the service's instant time, completed before the
   data instant. Archival writes no data instant, so this check does not apply to it;
4. the record index maps every live record key to the partition and file group that hold it.
   Only clustering may change it, and records that clustering moves carry the clustering
   instant. Secondary indexes do not change;
5. column stats exist for exactly the live files.

Archival must also archive no data instant newer than the MDT's latest compaction.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from hoodie.metadata.column_ranges import partition_stats
from hoodie.metadata.table import MetadataTable
from hoodie.read.reader import read_snapshot
from hoodie.services.base import LocalRunner, ServiceContext, service_named
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.timeline.instant_time import instant_to_epoch_millis

SEQUENCE = ("logcompaction", "compaction", "clustering", "clean", "archival")

# Services that must find work on each table. All the others must find none. The v9 tables were
# compacted (or only inserted into), so their latest slices have no log files.
EXPECTED_TO_RUN = {
    "sample_table/mor/avro/v9_txns_simple_meta": {"clustering", "clean", "archival"},
    "quickstart_trips_table/mor/avro/v8_trips_8i3u1d": {
        "logcompaction",
        "compaction",
        "clustering",
        "clean",
        "archival",
    },
    # No archival: this table's metadata table was never compacted (hence nothing is archivable).
    "sample_table/mor/avro/v9_nonpartitioned_rollback": {"clustering", "clean"},
}

OPTIONS = {
    "hoodie.log.compaction.blocks.threshold": "1",
    "hoodie.compact.inline.max.delta.commits": "1",
    "hoodie.clean.fileversions.retained": "1",
    "hoodie.keep.min.commits": "1",
    "hoodie.keep.max.commits": "2",
}

RECORD_INDEX = "record_index"
COLUMN_STATS = "column_stats"
PARTITION_STATS = "partition_stats"
SECONDARY_PREFIX = "secondary_index_"
PARTITION_METAFILE = ".hoodie_partition_metadata"

_BASE_FILE = re.compile(r"^(?P<file_id>.+)_(?P<token>[^_]+)_(?P<instant>\d+)\.[a-z]+$")
_LOG_FILE = re.compile(r"^\.(?P<file_id>.+)_(?P<instant>\d+)\.log\.\d+_.+$")


# -- helpers ------------------------------------------------------------------------------------


def _file_id_and_instant(name: str) -> tuple[str, str]:
    match = _LOG_FILE.match(name) or _BASE_FILE.match(name)
    assert match is not None, f"not a Hudi data file name: {name}"
    return match["file_id"], match["instant"]


def _committed(table: HoodieTable, instant_time: str) -> bool:
    """True if ``instant_time`` completed, or is older than the active timeline (archived)."""
    timeline = table.timeline
    if timeline.is_completed(instant_time):
        return True
    first = timeline.first()
    return instant_time not in timeline and first is not None and instant_time < first.requested_time


def _storage_listing(path: Path, table: HoodieTable) -> dict[str, dict[str, int]]:
    """Data partition -> {file name: size} of the committed data files on storage."""
    out: dict[str, dict[str, int]] = {}
    for directory, subdirs, files in os.walk(path):
        if Path(directory) == path:
            subdirs[:] = [d for d in subdirs if d != ".hoodie"]
        if PARTITION_METAFILE not in files:
            continue
        partition = Path(directory).relative_to(path).as_posix()
        live = {}
        for name in files:
            if name.startswith(PARTITION_METAFILE):
                continue
            if _committed(table, _file_id_and_instant(name)[1]):
                live[name] = (Path(directory) / name).stat().st_size
        out["" if partition == "." else partition] = live
    return out


def _rows(data: pa.Table, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Rows as dicts, sorted by record key (then by value: duplicate keys exist in a fixture)."""
    kept = data.drop_columns([c for c in drop if c in data.column_names])
    return sorted(kept.to_pylist(), key=lambda r: (r["_hoodie_record_key"], repr(r)))


SliceKey = tuple[str, str, str, tuple[str, ...]]


def _hudi_rs(path: Path) -> tuple[pa.Table, set[SliceKey]]:
    """The snapshot and latest file slices hudi-rs reads (listing files through the MDT)."""
    table = (
        HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "true").build()
    )
    slices = {
        (s.partition_path, s.file_id, s.base_file_name, tuple(s.log_file_names))
        for s in table.get_file_slices()
    }
    return pa.Table.from_batches(table.read()), slices


def _check_hudi_rs_lists_through_the_mdt(path: Path, slices: set[SliceKey]) -> None:
    """A base file that only a storage listing would find stays invisible to hudi-rs.

    (hudi-rs falls back to storage listing when it cannot use the metadata table; this shows it
    did not.) The decoy copies a live base file under a new file id, at a completed instant.
    """
    partition, file_id, base, _ = min(s for s in slices if s[2])
    directory = path / partition if partition else path
    decoy = directory / base.replace(file_id, f"{uuid.uuid4()}-0", 1)
    shutil.copyfile(directory / base, decoy)
    try:
        assert _hudi_rs(path)[1] == slices, "hudi-rs did not list files through the metadata table"
    finally:
        decoy.unlink()


def _our_slices(table: HoodieTable) -> set[SliceKey]:
    return {
        (
            s.partition_path,
            s.file_id,
            s.base_file.name if s.base_file else "",
            tuple(lf.name for lf in s.log_files),
        )
        for s in table.file_system_view().latest_file_slices()
    }


def _decode_file_id(location: Mapping[str, Any]) -> str:
    """The file id a record-index entry points at (hudi-format.md §6.2), decoded independently."""
    if location["fileIdEncoding"] == 1:
        return str(location["fileId"])
    mask = (1 << 64) - 1
    bits = ((location["fileIdHighBits"] & mask) << 64) | (location["fileIdLowBits"] & mask)
    return f"{uuid.UUID(int=bits)}-{location['fileIndex']}"


def _record_locations(snapshot: pa.Table) -> dict[str, set[tuple[str, str]]]:
    """Record key -> the (partition, file group) pairs holding it, from the meta columns."""
    out: dict[str, set[tuple[str, str]]] = {}
    for row in snapshot.select(
        ["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"]
    ).to_pylist():
        name = row["_hoodie_file_name"]
        file_id = _file_id_and_instant(name)[0] if "_" in name else name
        out.setdefault(row["_hoodie_record_key"], set()).add((row["_hoodie_partition_path"] or "", file_id))
    return out


def _secondary_indexes(mdt: MetadataTable, table: HoodieTable) -> dict[str, dict[str, Any]]:
    return {
        p: mdt.read_partition(p) for p in table.config.metadata_partitions if p.startswith(SECONDARY_PREFIX)
    }


@dataclass
class Seen:
    """What the checks after each service compare against."""

    rows: list[dict[str, Any]]
    record_index: dict[str, Any]
    secondary: dict[str, dict[str, Any]]


def _check(path: Path, what: str, before: Seen | None, instant_time: str | None) -> Seen:
    """Checks 1 to 5 of the module docstring after ``what``; returns the state they saw."""
    table = HoodieTable.open(str(path))
    mdt = MetadataTable.open(table)

    # 1. The MDT files listing is the storage listing, sizes included.
    on_storage = _storage_listing(path, table)
    assert mdt.all_partitions() == sorted(on_storage), what
    listed = mdt.list_files()
    for partition in sorted(on_storage):
        assert listed.get(partition) == on_storage[partition], f"{what}: partition {partition!r}"
    assert listed == on_storage, what

    # 2. hudi-rs (through the MDT) reads the same snapshot as before, and as our reader.
    theirs, their_slices = _hudi_rs(path)
    ours = read_snapshot(table)
    assert their_slices == _our_slices(table), what
    _check_hudi_rs_lists_through_the_mdt(path, their_slices)
    assert _rows(theirs) == _rows(ours), what
    rows = _rows(theirs, drop=("_hoodie_file_name",))
    if before is not None:
        assert rows == before.rows, what

    # 3. The MDT deltacommit at the service's instant, completed before the data instant.
    if instant_time is not None:
        data_instant = table.timeline.get(instant_time)
        assert data_instant is not None and data_instant.is_completed, what
        mdt_instant = mdt.timeline.get(instant_time, Action.DELTA_COMMIT)
        assert mdt_instant is not None and mdt_instant.is_completed, (
            f"{what}: no MDT deltacommit {instant_time}"
        )
        assert mdt_instant.action is Action.DELTA_COMMIT, what
        if data_instant.completion_time is not None:
            assert mdt_instant.completion_time is not None, what
            assert mdt_instant.completion_time < data_instant.completion_time, what

    # 4. The record index locates every live record; secondary indexes are unchanged.
    record_index = mdt.read_partition(RECORD_INDEX)
    locations = _record_locations(ours)
    assert sorted(record_index) == sorted(locations), what
    for key, held_in in sorted(locations.items()):
        entry = record_index[key]["recordIndexMetadata"]
        located = (entry["partitionName"], _decode_file_id(entry))
        assert located in held_in, f"{what}: record index has {key} in {located}, the data in {held_in}"
    secondary = _secondary_indexes(mdt, table)
    if before is not None:
        assert secondary == before.secondary, what

    # 5. Column stats cover exactly the live files (new files gain stats, clean tombstones them).
    if COLUMN_STATS in table.config.metadata_partitions:
        with_stats = {
            r["ColumnStatsMetadata"]["fileName"]
            for r in mdt.read_partition(COLUMN_STATS).values()
            if r.get("ColumnStatsMetadata")
        }
        assert with_stats == {n for files in on_storage.values() for n in files}, what

    # 6. Partition stats span the latest file slices' files (Hudi's tight bound; clustering's
    #    replaced groups hold the same records, so their ranges agree).
    if PARTITION_STATS in table.config.metadata_partitions:
        _check_partition_stats(table, mdt, what)
    return Seen(rows, record_index, secondary)


def _check_partition_stats(table: HoodieTable, mdt: MetadataTable, what: str) -> None:
    file_stats: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in mdt.read_partition(COLUMN_STATS).values():
        s = r["ColumnStatsMetadata"]
        file_stats.setdefault((s["fileName"], s["columnName"]), []).append(s)
    recorded = {
        (r["ColumnStatsMetadata"]["fileName"], r["ColumnStatsMetadata"]["columnName"]): r[
            "ColumnStatsMetadata"
        ]
        for r in mdt.read_partition(PARTITION_STATS).values()
    }
    view = table.file_system_view(timeline=table.reload())
    for partition in {p for p, _ in recorded}:
        names = [
            n
            for sl in view.latest_file_slices([partition])
            for n in ([sl.base_file.name] if sl.base_file else []) + [lf.name for lf in sl.log_files]
        ]
        stats = [s for n in names for (f, _), ss in file_stats.items() if f == n for s in ss]
        for expected in partition_stats(partition, stats, tight_bound=True):
            got = recorded[(partition, expected["columnName"])]
            assert (got["minValue"], got["maxValue"]) == (expected["minValue"], expected["maxValue"]), (
                f"{what}: partition {partition!r} column {expected['columnName']}"
            )


# -- the test -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED_TO_RUN))
def test_services_keep_the_metadata_table_in_step(table_copy: Any, name: str) -> None:
    path = table_copy(name)
    state = _check(path, "the fixture as Hudi wrote it", None, None)
    ran = set()
    for service_name in SEQUENCE:
        service = service_named(service_name)
        scheduled = service.schedule(ServiceContext(HoodieTable.open(str(path)), options=OPTIONS))
        if service_name not in EXPECTED_TO_RUN[name]:
            assert scheduled is None, f"{service_name} unexpectedly found work: {scheduled}"
            continue
        assert scheduled is not None and scheduled.instant_time is not None, f"{service_name} found no work"
        active_before = set(HoodieTable.open(str(path)).timeline.requested_times())
        ctx = ServiceContext(HoodieTable.open(str(path)), options=OPTIONS)
        service.execute(ctx, scheduled.instant_time, LocalRunner())
        ran.add(service_name)
        is_archival = service_name == "archival"
        after = _check(path, service_name, state, None if is_archival else scheduled.instant_time)
        if is_archival:
            _check_archived_before_mdt_compaction(path, active_before)
        if service_name == "clustering":
            _check_moved_records(state.record_index, after.record_index, scheduled.instant_time, path)
        else:
            assert after.record_index == state.record_index, f"{service_name} changed the record index"
        state = after
    assert ran == EXPECTED_TO_RUN[name]


def _check_archived_before_mdt_compaction(path: Path, active_before: set[str]) -> None:
    """Archival archived something, and no data instant newer than the latest MDT compaction."""
    table = HoodieTable.open(str(path))
    archived = active_before - set(table.timeline.requested_times())
    assert archived, "archival archived nothing"
    mdt = MetadataTable.open(table)
    compactions = [i.requested_time for i in mdt.timeline.completed() if i.action is Action.COMMIT]
    assert compactions, "archived although the metadata table was never compacted"
    assert max(archived) < max(compactions), (sorted(archived), max(compactions))


def _check_moved_records(
    before: dict[str, Any], after: dict[str, Any], instant_time: str, path: Path
) -> None:
    """Records clustering moved point at their new file group as of the clustering instant."""
    millis = instant_to_epoch_millis(instant_time, HoodieTable.open(str(path)).tz)
    moved = 0
    for key, entry in after.items():
        old, new = before[key]["recordIndexMetadata"], entry["recordIndexMetadata"]
        if _decode_file_id(new) != _decode_file_id(old):
            moved += 1
            assert new["instantTime"] == millis, f"{key}: {new}"
        else:
            assert entry == before[key], key
    assert moved, "clustering moved no record"
