"""Creating a metadata table and building (initialising) its partitions.

A partition is built by one BULK_INSERT_PREPPED deltacommit of the metadata table: every file group gets
an initial log file holding one empty DELETE block (``.<fileId>_<T>.log.1_0-0-0``) and, when it
has records, a base HFile at ``T``. When a table gets its metadata table, each partition is built
at an initialisation time ``00000000000000<NNN>`` (older than any data instant, so always
visible, and older than every log a writer adds to the new file groups); an INDEXING instant
builds each of its partitions at the next free one of those times, as Apache Hudi 1.x does. The partition is
listed in the data table's ``hoodie.table.metadata.partitions`` once it is complete.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from hoodie.config.table_config import (
    METAFOLDER,
    TableConfig,
    create_table_properties,
    update_table_properties,
)
from hoodie.errors import HoodieError
from hoodie.file_group.base_file_writer import write_partition_metadata
from hoodie.file_group.log_block import BlockType, HeaderKey, encode_block
from hoodie.file_group.log_writer import delete_block_content
from hoodie.file_group.view import list_partition
from hoodie.io.fileio import join
from hoodie.metadata.keys import ALL_PARTITIONS_KEY, file_group_indexes, partition_id
from hoodie.metadata.records import (
    MetadataPartition,
    Payload,
    files_payload,
    plain_metadata_schema_json,
)
from hoodie.metadata.secondary import shard_keys
from hoodie.metadata.table import metadata_table_path, open_metadata_table
from hoodie.metadata.writer import base_hfile_bytes
from hoodie.models.commit import CommitMetadata, WriteStat
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.commit import commit

log = logging.getLogger(__name__)

__all__ = [
    "build_partition",
    "complete_partition_build",
    "create_metadata_table",
    "files_on_storage",
    "files_partition_records",
    "free_init_instant_time",
    "init_instant_time",
    "initialize_metadata_table",
    "start_partition_build",
    "write_partition_base",
]

INIT_PREFIX = "00000000000000"

DEFAULT_FILE_GROUPS = {
    MetadataPartition.FILES: 1,
    MetadataPartition.COLUMN_STATS: 2,
    MetadataPartition.PARTITION_STATS: 1,
    MetadataPartition.RECORD_INDEX: 10,
    MetadataPartition.BLOOM_FILTERS: 4,  # hoodie.metadata.index.bloom.filter.file.group.count
}


def init_instant_time(offset: int) -> str:
    """The initialisation instant of the ``offset``-th partition built with a new metadata table."""
    return f"{INIT_PREFIX}{offset:03d}"


def metadata_table_properties(data_table: HoodieTable) -> dict[str, str]:
    version = str(data_table.table_version)
    return {
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.table.initial.version": version,
        "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.archivelog.folder": "history",
        "hoodie.timeline.layout.version": "2",
        "hoodie.timeline.history.path": "history",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
        "hoodie.table.recordkey.fields": "key",
        "hoodie.table.name": f"{data_table.name}_metadata",
        "hoodie.timeline.path": "timeline",
        "hoodie.populate.meta.fields": "false",
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.record.merge.mode": "CUSTOM",
        "hoodie.table.version": version,
    }


def create_metadata_table(data_table: HoodieTable) -> HoodieTable:
    """Write the metadata table's ``hoodie.properties`` (no partitions yet) and open it."""
    if data_table.table_version < 8:
        raise HoodieError(
            f"{data_table.base_path}: hts creates metadata tables for table versions 8 and 9 only "
            f"(this table is version {data_table.table_version})"
        )
    meta = join(metadata_table_path(data_table), METAFOLDER)
    if not data_table.fileio.exists(join(meta, "hoodie.properties")):
        create_table_properties(data_table.fileio, meta, metadata_table_properties(data_table))
    return open_metadata_table(data_table)


def _empty_delete_block(instant_time: str, table_version: int) -> bytes:
    content = delete_block_content([], [], None, table_version)
    return encode_block(BlockType.DELETE, {HeaderKey.INSTANT_TIME: instant_time}, content)


def free_init_instant_time(mdt_timeline: ActiveTimeline) -> str:
    """The first initialisation time ``00000000000000<NNN>`` the metadata table has not used."""
    offset = 0
    while init_instant_time(offset) in mdt_timeline:
        offset += 1
    return init_instant_time(offset)


def file_group_count(partition: str, num_file_groups: int | None = None) -> int:
    return num_file_groups or DEFAULT_FILE_GROUPS.get(partition, 10)


def start_partition_build(
    data_table: HoodieTable, partition: str, instant_time: str, *, num_file_groups: int | None = None
) -> Instant:
    """Open metadata-table deltacommit ``instant_time`` to build ``partition``: write it requested
    and inflight, the partition's ``.hoodie_partition_metadata``, and each file group's initial log
    (one empty DELETE block). From then on writers can log updates to the file groups, which
    belong to the slice this build's base files start. Call with the data table's lock held.
    """
    mdt = create_metadata_table(data_table)
    timeline: ActiveTimeline = mdt.reload()
    if instant_time in timeline:
        raise HoodieError(
            f"metadata table of {data_table.base_path} already has an instant at {instant_time}"
        )
    requested = timeline.create_requested(Instant(instant_time, Action.DELTA_COMMIT, State.REQUESTED))
    inflight = timeline.transition_to_inflight(requested, b"")
    write_partition_metadata(mdt.fileio, mdt.base_path, partition, instant_time)
    version = data_table.table_version
    for i in range(file_group_count(partition, num_file_groups)):
        log_name = f".{MetadataPartition.file_id(partition, i)}_{instant_time}.log.1_0-0-0"
        mdt.fileio.write_bytes(
            join(mdt.base_path, partition, log_name), _empty_delete_block(instant_time, version)
        )
    return inflight


def write_partition_base(
    data_table: HoodieTable,
    partition: str,
    records: Mapping[str, Payload | bytes],
    instant_time: str,
    *,
    num_file_groups: int | None = None,
) -> list[WriteStat]:
    """Write the base HFiles of ``records`` at ``instant_time`` for a build opened by
    :func:`start_partition_build` (file groups without records get none); returns their stats."""
    mdt = open_metadata_table(data_table)
    version = data_table.table_version
    n = file_group_count(partition, num_file_groups)
    groups: dict[int, dict[str, Payload | bytes]] = {i: {} for i in range(n)}
    keys = list(records)
    hashed = shard_keys(data_table, partition, keys)
    for key, index in zip(keys, file_group_indexes(hashed, n).tolist(), strict=True):
        groups[index][key] = records[key]
    stats: list[WriteStat] = []
    for i, group in groups.items():
        if not group:
            continue
        file_id = MetadataPartition.file_id(partition, i)
        base_name = f"{file_id}_{i}-0-{i}_{instant_time}.hfile"
        data = base_hfile_bytes(group, base_name, version)
        mdt.fileio.write_bytes(join(mdt.base_path, partition, base_name), data)
        stats.append(
            WriteStat(
                file_id=file_id,
                path=f"{partition}/{base_name}",
                prev_commit="null",
                num_writes=len(group),
                num_deletes=0,
                num_update_writes=0,
                total_write_bytes=len(data),
                total_write_errors=0,
                partition_path=partition,
                num_inserts=len(group),
                file_size_in_bytes=len(data),
            )
        )
    return stats


def complete_partition_build(
    data_table: HoodieTable,
    partition: str,
    inflight: Instant,
    stats: list[WriteStat],
    completion_time: Callable[[], str],
    *,
    operation: str = "BULK_INSERT_PREPPED",
) -> Instant:
    """Complete the build deltacommit (call with the data table's lock held). Does not list the
    partition in the data table's properties (the caller does, once everything is built)."""
    mdt = open_metadata_table(data_table)
    version = data_table.table_version
    metadata = CommitMetadata(
        partition_to_write_stats={partition: stats},
        compacted=False,
        extra_metadata={"schema": plain_metadata_schema_json(version)},
        version=None,
        operation_type=operation,
    )
    done = commit(mdt, inflight, metadata.to_bytes(version), completion_time=lambda _: completion_time())
    log.info(
        "%s: built metadata partition %s (%d records) at %s",
        data_table.base_path,
        partition,
        sum(s.num_writes or 0 for s in stats),
        done,
    )
    return done


def build_partition(
    data_table: HoodieTable,
    partition: str,
    records: Mapping[str, Payload],
    instant_time: str,
    completion_time: Callable[[], str],
    *,
    num_file_groups: int | None = None,
    operation: str = "BULK_INSERT_PREPPED",
) -> Instant:
    """Build metadata partition ``partition`` from ``records`` in one deltacommit at ``instant_time``
    (call with the data table's lock held)."""
    inflight = start_partition_build(data_table, partition, instant_time, num_file_groups=num_file_groups)
    stats = write_partition_base(
        data_table, partition, records, instant_time, num_file_groups=num_file_groups
    )
    return complete_partition_build(
        data_table, partition, inflight, stats, completion_time, operation=operation
    )


def files_on_storage(data_table: HoodieTable, timeline: ActiveTimeline) -> dict[str, dict[str, int]]:
    """Data partition -> {file name: size} of every committed file on storage (partitions with none
    left out): what the ``files`` partition should list."""
    view = data_table.file_system_view(timeline=timeline)
    out: dict[str, dict[str, int]] = {}
    for partition in view.partitions():
        listing = list_partition(data_table.fileio, data_table.base_path, partition)
        entries: dict[str, int] = {}
        for base in listing.base_files:
            if view.is_committed(base.commit_time):
                entries[base.name] = base.size
        for log_file in listing.log_files:
            if view.is_committed(log_file.instant_time) or view.completion_time(log_file.instant_time):
                entries[log_file.name] = log_file.size
        if entries:
            out[partition] = entries
    return out


def files_partition_records(data_table: HoodieTable, timeline: ActiveTimeline) -> dict[str, Payload]:
    """The ``files`` partition of the table as it is now: every committed file of every partition."""
    records: dict[str, Payload] = {}
    partitions: dict[str, tuple[int, bool]] = {}
    for partition, files in files_on_storage(data_table, timeline).items():
        partitions[partition_id(partition)] = (0, False)
        records[partition_id(partition)] = files_payload({n: (size, False) for n, size in files.items()})
    records[ALL_PARTITIONS_KEY] = files_payload(partitions, all_partitions=True)
    return records


def set_metadata_partitions(
    data_table: HoodieTable,
    *,
    add: Iterable[str] = (),
    remove: Iterable[str] = (),
    inflight_add: Iterable[str] = (),
    inflight_remove: Iterable[str] = (),
) -> None:
    """Update ``hoodie.table.metadata.partitions`` and ``.inflight`` in the data table's
    properties, starting from what they hold now (call with the table lock held)."""
    config = data_table.reload_config()
    built = (set(config.metadata_partitions) | set(add)) - set(remove)
    building = (set(config.metadata_partitions_inflight) | set(inflight_add)) - set(inflight_remove)
    updates: dict[str, str | None] = {
        "hoodie.table.metadata.partitions": ",".join(sorted(built)),
        "hoodie.table.metadata.partitions.inflight": ",".join(sorted(building - built)),
    }
    props = update_table_properties(data_table.fileio, data_table.paths.meta, updates)
    data_table.config = TableConfig.from_properties(props)


def initialize_metadata_table(
    data_table: HoodieTable, completion_time: Callable[[], str], timeline: ActiveTimeline | None = None
) -> list[Instant]:
    """Give ``data_table`` a metadata table with its ``files`` partition (call with the lock held)."""
    tl = timeline or data_table.reload()
    if data_table.has_metadata_table and MetadataPartition.FILES in data_table.config.metadata_partitions:
        return []
    done = build_partition(
        data_table,
        MetadataPartition.FILES,
        files_partition_records(data_table, tl),
        init_instant_time(0),
        completion_time,
    )
    set_metadata_partitions(data_table, add=(MetadataPartition.FILES,))
    return [done]
