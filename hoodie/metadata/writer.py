"""Writing to a data table's metadata table: one deltacommit per data-table instant.

``MetadataWriter.commit(T, updates)`` writes, for every metadata file group that ``updates``
touch, one new log file ``.<fileId>_<T>.log.1_<token>`` holding an HFILE_DATA block (the upserted
keys, sorted) and a DELETE block (the removed keys), then completes the metadata table's
``T.deltacommit``. It runs before the data-table instant ``T`` completes; until that happens
readers ignore the update (``table.MetadataTable``). If ``T`` already has a metadata-table
instant (a retried or crashed commit), that instant is rolled back first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING

import numpy as np

from hoodie.errors import HoodieError
from hoodie.file_group.log_block import BlockType, HeaderKey, encode_block
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.log_writer import delete_block_content
from hoodie.file_group.view import list_partition
from hoodie.hfile.writer import RowsAndValues, write_hfile
from hoodie.io.fileio import join
from hoodie.metadata.keys import file_group_indexes
from hoodie.metadata.records import (
    Payload,
    encode_payload,
    header_schema_json,
    plain_metadata_schema_json,
    with_file_name,
)
from hoodie.metadata.secondary import shard_keys
from hoodie.metadata.table import open_metadata_table
from hoodie.models.commit import CommitMetadata, WriteStat
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import normalize
from hoodie.transaction.commit import commit

if TYPE_CHECKING:
    from hoodie.table import HoodieTable

log = logging.getLogger(__name__)

__all__ = ["MetadataWriter", "Updates", "hfile_block", "instant_files", "rollback_metadata_instant"]

Updates = Mapping[str, Mapping[str, Payload | None]]
"""Metadata partition -> record key -> payload to merge in (None deletes the key)."""


LOG_BLOCK_GZIP_LEVEL = 1
"""Deflate level of log blocks' HFiles: they live until the next compaction, which writes its base
HFile at HBase's level; level 1 costs a third of the time for ~5% more bytes."""


def hfile_block(
    entries: Mapping[str, Payload],
    instant_time: str,
    table_version: int,
    encoded: dict[int, bytes] | None = None,
) -> bytes:
    """An HFILE_DATA log block of ``entries`` (sorted by key, as HFiles require). ``encoded``
    caches datums by payload object across the blocks of a commit (record-index keys share the
    payload of their location); the payloads must outlive it."""
    schema = header_schema_json(table_version)
    encoded = {} if encoded is None else encoded
    ordered = sorted(zip(map(str.encode, entries), entries.values(), strict=True), key=itemgetter(0))
    payloads = list(map(itemgetter(1), ordered))
    ids = list(map(id, payloads))
    for ident, payload in dict(zip(ids, payloads, strict=True)).items():
        if ident not in encoded:
            encoded[ident] = encode_payload(payload, table_version)
    content = write_hfile(
        RowsAndValues(list(map(itemgetter(0), ordered)), list(map(encoded.__getitem__, ids))),
        file_info={"schema": schema.encode()},
        compression_level=LOG_BLOCK_GZIP_LEVEL,
    )
    header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: schema}
    return encode_block(BlockType.HFILE_DATA, header, content)


def mdt_delete_block(keys: list[str], instant_time: str, table_version: int) -> bytes:
    content = delete_block_content(sorted(keys), [""] * len(keys), None, table_version)
    header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: header_schema_json(table_version)}
    return encode_block(BlockType.DELETE, header, content)


def instant_files(mdt: HoodieTable, instant_time: str) -> list[str]:
    """Paths of the metadata table's data files written at ``instant_time``."""
    out = []
    key = normalize(instant_time)
    for info in mdt.fileio.list_files_recursive(mdt.base_path):
        rel = info.path[len(mdt.base_path) :].lstrip("/")
        if rel.startswith(".hoodie/") or "/" not in rel:
            continue
        name = rel.rsplit("/", 1)[1]
        log_file = LogFile.parse(name)
        if log_file is not None:
            written = log_file.instant_time
        elif name.endswith(".hfile"):
            written = name.rsplit("_", 1)[1].split(".", 1)[0]
        else:
            continue
        if normalize(written) == key:
            out.append(info.path)
    return out


def rollback_metadata_instant(
    data_table: HoodieTable, instant_time: str, mdt: HoodieTable | None = None
) -> bool:
    """Undo the metadata table's instant at ``instant_time`` (any state); True if there was one.

    The completed file goes first (readers stop seeing the update), then the files the instant
    wrote, then its requested and inflight files: a crash anywhere leaves an instant that is
    rolled back again next time.
    """
    mdt = mdt or open_metadata_table(data_table)
    timeline = mdt.reload()
    instant = timeline.get(instant_time)
    if instant is None:
        return False
    if instant.action is not Action.DELTA_COMMIT:
        raise HoodieError(
            f"metadata table of {data_table.base_path}: refusing to roll back {instant} "
            "(only the deltacommits that data-table instants write are rolled back this way)"
        )
    if instant.is_completed:
        timeline.delete_state(instant_time, State.COMPLETED, instant.action)
    for path in instant_files(mdt, instant_time):
        mdt.fileio.delete(path)
    timeline.delete_instant(instant_time, instant.action)
    log.info("%s: rolled back metadata-table instant %s", data_table.base_path, instant)
    return True


@dataclass
class MetadataWriter:
    """Appends updates to a data table's metadata table."""

    data_table: HoodieTable
    write_token_seed: int = 0
    written: list[str] = field(default_factory=list)

    def commit(
        self,
        instant_time: str,
        updates: Updates,
        completion_time: Callable[[], str],
        *,
        operation: str = "UPSERT_PREPPED",
    ) -> Instant:
        """Write ``updates`` as the metadata table's deltacommit ``instant_time`` and complete it."""
        mdt_table = open_metadata_table(self.data_table)
        if rollback_metadata_instant(self.data_table, instant_time, mdt_table):
            mdt_table.reload()
        version = self.data_table.table_version
        timeline = mdt_table.timeline
        requested = timeline.create_requested(Instant(instant_time, Action.DELTA_COMMIT, State.REQUESTED))
        inflight = timeline.transition_to_inflight(requested, b"")
        stats: dict[str, list[WriteStat]] = {}
        task = 0
        encoded: dict[int, bytes] = {}
        for partition in sorted(updates):
            records = updates[partition]
            if not records:
                continue
            # From storage: the file groups of a partition an indexer is building are not
            # committed yet, and writers log to them all the same.
            listing = list_partition(mdt_table.fileio, mdt_table.base_path, partition)
            file_ids = sorted(
                {b.file_id for b in listing.base_files} | {lf.file_id for lf in listing.log_files}
            )
            if not file_ids:
                raise HoodieError(
                    f"metadata table of {self.data_table.base_path} has no file groups in partition "
                    f"{partition!r}; it must be initialised before it is written"
                )
            keys = list(records)
            payloads = list(records.values())
            indexes = file_group_indexes(shard_keys(self.data_table, partition, keys), len(file_ids))
            order = np.argsort(indexes, kind="stable")
            bounds = np.flatnonzero(np.diff(indexes[order])) + 1
            for members in np.split(order, bounds):
                picked = members.tolist()
                file_id = file_ids[int(indexes[picked[0]])]
                group_keys = list(map(keys.__getitem__, picked))
                group_payloads = list(map(payloads.__getitem__, picked))
                deletes = [k for k, p in zip(group_keys, group_payloads, strict=True) if p is None]
                upserts: dict[str, Payload] = {
                    k: p for k, p in zip(group_keys, group_payloads, strict=True) if p is not None
                }
                blocks = []
                if upserts:
                    blocks.append(hfile_block(upserts, instant_time, version, encoded))
                if deletes:
                    blocks.append(mdt_delete_block(deletes, instant_time, version))
                token = f"{task}-{self.write_token_seed}-{task}"
                name = f".{file_id}_{instant_time}.log.1_{token}"
                rel = f"{partition}/{name}"
                data = b"".join(blocks)
                mdt_table.fileio.write_bytes(join(mdt_table.base_path, rel), data)
                self.written.append(rel)
                task += 1
                stats.setdefault(partition, []).append(
                    WriteStat(
                        file_id=file_id,
                        path=rel,
                        prev_commit=instant_time,
                        num_writes=len(group_keys),
                        num_deletes=len(deletes),
                        num_update_writes=len(upserts),
                        total_write_bytes=len(data),
                        total_write_errors=0,
                        partition_path=partition,
                        total_log_records=0,
                        total_updated_records_compacted=0,
                        num_inserts=0,
                        total_log_blocks=0,
                        total_corrupt_log_block=0,
                        total_rollback_blocks=0,
                        file_size_in_bytes=len(data),
                        log_version=1,
                        log_offset=0,
                        base_file="",
                        log_files=[name],
                        total_log_files_compacted=0,
                        total_log_read_time_ms=0,
                        total_log_size_compacted=0,
                        num_updates=0,
                    )
                )
        metadata = CommitMetadata(
            partition_to_write_stats=stats,
            compacted=False,
            extra_metadata={"schema": plain_metadata_schema_json(version)},
            version=None,
            operation_type=operation,
        )
        done = commit(
            mdt_table,
            inflight,
            metadata.to_bytes(version),
            completion_time=lambda _: completion_time(),
        )
        log.debug("%s: metadata table %s (%d log files)", self.data_table.base_path, done, task)
        return done


BLOOM_NUM_ENTRIES = 10_000
BLOOM_FPP = 1e-9
BLOOM_MAX_ENTRIES = 100_000
"""Bloom filter sizing of Hudi's base HFiles (10000 entries at 1e-9 decode from the fixtures)."""


def base_hfile_bytes(
    records: Mapping[str, Payload | bytes], file_name: str, table_version: int, *, create_time_ms: int = 0
) -> bytes:
    """A metadata-table base HFile of ``records`` as Hudi writes one.

    Keys sorted; each value names the file in ``_hoodie_file_name``; file info carries the
    schema, the bloom filter type and the min/max keys; the ``bloomFilter`` meta block holds a
    filter of every key. A record may come as a payload or as its datum encoded without a file
    name (what executors send back).
    """
    from hoodie.bloom import BloomFilterTypeCode, create_bloom_filter

    keys = sorted(records, key=lambda k: k.encode("utf-8"))
    bloom = create_bloom_filter(
        BLOOM_NUM_ENTRIES, BLOOM_FPP, BloomFilterTypeCode.DYNAMIC_V0, BLOOM_MAX_ENTRIES
    )
    if keys:
        bloom.add_all(keys)

    def value(record: Payload | bytes) -> bytes:
        if isinstance(record, bytes):
            return with_file_name(record, file_name)
        return encode_payload(record, table_version, file_name=file_name)

    return write_hfile(
        ((k, value(records[k])) for k in keys),
        file_info={
            "schema": header_schema_json(table_version).encode(),
            "bloomFilterTypeCode": bloom.type_code.value.encode(),
            "minRecordKey": keys[0].encode() if keys else b"",
            "maxRecordKey": keys[-1].encode() if keys else b"",
        },
        meta_blocks={"bloomFilter": bloom.serialize().encode()},
        create_time_ms=create_time_ms,
    )
