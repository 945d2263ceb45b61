"""Reading a data table's metadata table (``<base>/.hoodie/metadata``).

The metadata table is a merge-on-read table with HFile base files; each record's key is the
HFile key. A key's value is the merge of its base-file record and the records of every valid log
block, in order (``records.merge_payloads``); DELETE blocks remove keys.

A log block is valid when its metadata-table instant completed and the data-table instant of the
same time completed too (or is older than the data table's active timeline): a metadata update
whose data commit failed is invisible, as it is to Apache Hudi's readers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from hoodie.config.table_config import METAFOLDER, TableConfig, read_table_properties
from hoodie.errors import TableNotFoundError
from hoodie.file_group.file_slice import FileSlice
from hoodie.file_group.log_block import BlockType
from hoodie.file_group.view import FileSystemView, ListingColumns
from hoodie.hfile.reader import HFileReader
from hoodie.io.fileio import join
from hoodie.metadata.files_columns import decode_file_lists
from hoodie.metadata.keys import ALL_PARTITIONS_KEY, NON_PARTITIONED_NAME, file_group_indexes
from hoodie.metadata.records import (
    MetadataPartition,
    Payload,
    decode_payload,
    is_live,
    merge_payloads,
    writer_schema_for,
)
from hoodie.metadata.secondary import shard_keys
from hoodie.read.log_scanner import scan_log_blocks
from hoodie.read.slice_reader import decode_delete_block
from hoodie.table import HoodieTable
from hoodie.timeline.timeline import ActiveTimeline

log = logging.getLogger(__name__)

__all__ = ["MetadataTable", "metadata_table_path", "open_metadata_table"]


def metadata_table_path(data_table: HoodieTable) -> str:
    return join(data_table.base_path, METAFOLDER, "metadata")


def open_metadata_table(data_table: HoodieTable) -> HoodieTable:
    """The metadata table of ``data_table`` as a table (same storage); raises if there is none."""
    path = metadata_table_path(data_table)
    meta = join(path, METAFOLDER)
    try:
        props = read_table_properties(data_table.fileio, meta)
    except FileNotFoundError as e:
        raise TableNotFoundError(f"{data_table.base_path} has no metadata table at {path}") from e
    config = TableConfig.from_properties(props, source=join(meta, "hoodie.properties"), metadata_table=True)
    return HoodieTable(data_table.fileio, path, config)


@dataclass
class MetadataTable:
    """A read view of a data table's metadata table, consistent with ``data_timeline``."""

    data_table: HoodieTable
    data_timeline: ActiveTimeline
    table: HoodieTable
    timeline: ActiveTimeline

    @classmethod
    def open(cls, data_table: HoodieTable, data_timeline: ActiveTimeline | None = None) -> MetadataTable:
        mdt = open_metadata_table(data_table)
        return cls(data_table, data_timeline or data_table.timeline, mdt, mdt.reload())

    @property
    def table_version(self) -> int:
        return self.data_table.table_version

    def view(self) -> FileSystemView:
        return self.table.file_system_view(timeline=self.timeline)

    def file_slices(self, partition: str) -> list[FileSlice]:
        """The latest slice of each file group of metadata partition ``partition``, by file id."""
        return sorted(self.view().latest_file_slices([partition]), key=lambda s: s.file_id)

    def file_group_count(self, partition: str) -> int:
        return len({s.file_id for s in self.file_slices(partition)})

    def block_committed(self, view: FileSystemView) -> Callable[[str], bool]:
        """Whether log blocks of an instant count, by Hudi's rule (``getValidInstantTimestamps``):
        the metadata-table instant is committed (in ``view``), and the data instant of its time
        is not still pending (the writer died between the two, or has not completed yet).
        Instants only the metadata table has count: those that initialise partitions and the
        sync after a restore."""
        data = self.data_timeline

        def committed(ts: str) -> bool:
            return view.is_committed(ts) and (data.is_completed(ts) or ts not in data)

        return committed

    def read_slice(self, file_slice: FileSlice, keys: set[str] | None = None) -> dict[str, Payload | None]:
        """Merged records of one metadata file slice (None marks a deleted key)."""
        out: dict[str, Payload | None] = {}
        version = self.table_version
        for key, value, schema in self._slice_values(file_slice, keys):
            newer = decode_payload(value, version, schema) if value else None
            out[key] = merge_payloads(out.get(key), newer)
        return out

    def _slice_values(
        self, file_slice: FileSlice, keys: set[str] | None
    ) -> Iterator[tuple[str, bytes | None, Any | None]]:
        """Every version of the (wanted) keys of one metadata file slice, oldest first: the base
        file's, then each valid log block's; a value of None (or empty) deletes the key. With the
        parsed writer schema of each (None: the reader's own)."""
        fileio = self.table.fileio
        version = self.table_version

        def wanted(key: str) -> bool:
            return keys is None or key in keys

        base = file_slice.base_file_path(self.table.base_path)
        if base is not None:
            reader = HFileReader.open(fileio, base)
            schema = writer_schema_for(reader.schema or "", version)
            items = (
                reader.items()
                if keys is None
                else ((k.encode(), v) for k in sorted(keys) if (v := reader.get(k)) is not None)
            )
            for raw_key, value in items:
                key = raw_key.decode("utf-8")
                if wanted(key):
                    yield key, value, schema

        blocks = scan_log_blocks(
            fileio,
            self.table.base_path,
            file_slice,
            is_committed=self.block_committed(self.view()),
            latest_instant=None,
            hfile_blocks=True,
        )
        for block in blocks:
            if block.block_type is BlockType.HFILE_DATA:
                reader = HFileReader.from_log_block(block)
                schema = writer_schema_for(block.schema or reader.schema or "", version)
                for raw_key, value in reader.items():
                    key = raw_key.decode("utf-8")
                    if wanted(key):
                        yield key, value, schema
            elif block.block_type is BlockType.DELETE:
                for key in decode_delete_block(block, version).keys:
                    if wanted(key):
                        yield key, None, None

    def read_partition(self, partition: str, keys: Iterable[str] | None = None) -> dict[str, Payload]:
        """Live records of metadata partition ``partition`` (all, or those of ``keys``)."""
        slices = self.file_slices(partition)
        if not slices:
            return {}
        wanted = set(keys) if keys is not None else None
        out: dict[str, Payload] = {}
        if wanted is not None and partition != MetadataPartition.FILES:
            by_group: dict[int, set[str]] = {}
            keys_list = list(wanted)
            hashed = shard_keys(self.data_table, partition, keys_list)
            for key, index in zip(keys_list, file_group_indexes(hashed, len(slices)).tolist(), strict=True):
                by_group.setdefault(index, set()).add(key)
            todo: list[tuple[FileSlice, set[str] | None]] = [(slices[i], ks) for i, ks in by_group.items()]
        else:
            todo = [(s, wanted) for s in slices]
        for file_slice, ks in todo:
            for key, payload in self.read_slice(file_slice, ks).items():
                if is_live(payload):
                    assert payload is not None
                    out[key] = payload
        return out

    # -- the files partition -------------------------------------------------------------------
    def all_partitions(self) -> list[str]:
        """Data partitions the metadata table lists (``""`` for a non-partitioned table)."""
        return _partitions_of(self.read_partition(MetadataPartition.FILES, [ALL_PARTITIONS_KEY]))

    def list_files(self, partitions: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        """Data partition -> {file name: size} of live files, as the metadata table records them."""
        if partitions is None:
            # Every partition: one read of the files partition gives the list and the partitions'
            # records (reading the list first, then the records, read every file of it twice).
            records = self.read_partition(MetadataPartition.FILES)
            wanted = _partitions_of(records)
            keys = [p or NON_PARTITIONED_NAME for p in wanted]
        else:
            wanted = list(partitions)
            keys = [p or NON_PARTITIONED_NAME for p in wanted]
            records = self.read_partition(MetadataPartition.FILES, keys)
        out: dict[str, dict[str, int]] = {}
        for partition, key in zip(wanted, keys, strict=True):
            record = records.get(key)
            files = (record or {}).get("filesystemMetadata") or {}
            out[partition] = {n: int(i["size"]) for n, i in files.items() if not i["isDeleted"]}
        return out

    def file_columns(self, partitions: Iterable[str] | None = None) -> ListingColumns:
        """``list_files`` as columns, partitions sorted: the same files in the same order, decoded
        without a dict per partition or per file (:mod:`hoodie.metadata.files_columns`) for the
        keys written once with the reader's schema; keys with several versions are merged record
        by record, as ``read_partition`` merges them."""
        if partitions is None:  # one read gives the partitions' list and their records (as list_files)
            versions = self._file_versions(None)
            listed = self._merged_files(versions.get(ALL_PARTITIONS_KEY, []))
            wanted = sorted("" if n == NON_PARTITIONED_NAME else n for n in listed)
        else:
            wanted = sorted(set(partitions))
            versions = self._file_versions({p or NON_PARTITIONED_NAME for p in wanted})
        keys = [p or NON_PARTITIONED_NAME for p in wanted]
        position = {k: i for i, k in enumerate(keys)}
        versions = {k: v for k, v in versions.items() if k in position}
        # Keys written once (one version, in one slice) with the reader's schema: decoded at once.
        single = {k: v[0][0][0] for k, v in versions.items() if len(v) == 1 and len(v[0]) == 1}
        once = [k for k, value in single.items() if value and versions[k][0][0][1] is None]
        decoded = decode_file_lists([single[k] or b"" for k in once])
        live = ~decoded.deleted
        part = np.asarray([position[k] for k in once], dtype=np.int64)[decoded.record]
        parts, names, sizes = [part[live]], [decoded.name.filter(pa.array(live))], [decoded.size[live]]
        taken = {k for k, ok in zip(once, decoded.taken.tolist(), strict=True) if ok}
        for key, in_slices in versions.items():
            if key not in taken:
                files = self._merged_files(in_slices)
                parts.append(np.full(len(files), position[key], dtype=np.int64))
                names.append(pa.array(list(files), pa.string()))
                sizes.append(np.asarray(list(files.values()), dtype=np.int64))
        at = np.concatenate(parts)
        order = np.argsort(at, kind="stable")  # by partition, each in its record's order
        return ListingColumns(
            partitions=wanted,
            bounds=np.concatenate([[0], np.cumsum(np.bincount(at, minlength=len(keys)))]).astype(np.int64),
            names=pa.concat_arrays(names).take(pa.array(order, pa.int64())),
            sizes=np.concatenate(sizes)[order],
        )

    def _file_versions(self, keys: set[str] | None) -> dict[str, list[list[tuple[bytes | None, Any | None]]]]:
        """Per key of the files partition (or of ``keys``), its versions in each file slice holding
        it (one slice, in practice), oldest first."""
        versions: dict[str, list[list[tuple[bytes | None, Any | None]]]] = {}
        for file_slice in self.file_slices(MetadataPartition.FILES):
            in_slice: dict[str, list[tuple[bytes | None, Any | None]]] = {}
            for key, value, schema in self._slice_values(file_slice, keys):
                in_slice.setdefault(key, []).append((value, schema))
            for key, found in in_slice.items():
                versions.setdefault(key, []).append(found)
        return versions

    def _merged_files(self, in_slices: list[list[tuple[bytes | None, Any | None]]]) -> dict[str, int]:
        """Live files of one key's versions: merged within each slice, the last live slice's."""
        record: Payload | None = None
        for found in in_slices:
            merged: Payload | None = None
            for value, schema in found:
                newer = decode_payload(value, self.table_version, schema) if value else None
                merged = merge_payloads(merged, newer)
            if is_live(merged):
                record = merged
        files = (record or {}).get("filesystemMetadata") or {}
        return {n: int(i["size"]) for n, i in files.items() if not i["isDeleted"]}


def _partitions_of(records: Mapping[str, Payload]) -> list[str]:
    """The live data partitions the files partition's ``__all_partitions__`` record lists."""
    record = records.get(ALL_PARTITIONS_KEY)
    if record is None:
        return []
    names = [n for n, info in (record["filesystemMetadata"] or {}).items() if not info["isDeleted"]]
    return sorted("" if n == NON_PARTITIONED_NAME else n for n in names)
