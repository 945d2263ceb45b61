"""Writing base files and partition metadata as Hudi does.

A base file is Parquet with the five meta fields first and the footer keys Hudi's index and
readers rely on: the min/max record key, the record-key bloom filter (keys added in row order)
and its type code, and the Avro schema (``parquet.avro.schema`` with ``writer.model.name=avro``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie.bloom import (
    BLOOM_FILTER_FOOTER_KEY,
    BLOOM_TYPE_FOOTER_KEY,
    BloomFilterTypeCode,
    create_bloom_filter,
)
from hoodie.config.properties import java_date_string
from hoodie.io.fileio import FileIO, join
from hoodie.schema.meta_fields import RECORD_KEY_METADATA_FIELD

MIN_RECORD_KEY_FOOTER = "hoodie_min_record_key"
MAX_RECORD_KEY_FOOTER = "hoodie_max_record_key"
AVRO_SCHEMA_FOOTER = "parquet.avro.schema"
PARTITION_METAFILE = ".hoodie_partition_metadata"


@dataclass(frozen=True, slots=True)
class BloomOptions:
    """``hoodie.index.bloom.num_entries``, ``.fpp``, ``hoodie.bloom.index.filter.type`` and max entries."""

    num_entries: int = 60000
    fpp: float = 0.000000001
    type_code: BloomFilterTypeCode = BloomFilterTypeCode.DYNAMIC_V0
    max_entries: int = 100000


@dataclass(frozen=True, slots=True)
class BaseFileResult:
    """What writing one base file produced (sizes feed the commit's write stats)."""

    path: str
    size: int
    num_records: int
    min_record_key: str | None
    max_record_key: str | None
    footer: pq.FileMetaData | None = None
    """The file's Parquet footer as written (its column statistics spare a re-read)."""


def set_constant(table: pa.Table, name: str, value: str) -> pa.Table:
    """``table`` with column ``name`` set to ``value`` on every row.

    Built as a one-entry dictionary array: no per-row Python strings, and Parquet stores it as
    the plain (dictionary-encoded) string column it would be anyway.
    """
    indices = pa.array(np.zeros(table.num_rows, dtype=np.int32))
    column = pa.DictionaryArray.from_arrays(indices, pa.array([value], pa.string()), safe=False)
    idx = table.schema.get_field_index(name)
    field = pa.field(name, column.type, table.schema.field(idx).nullable)
    return table.set_column(idx, field, column)


def footer_metadata(
    keys: pa.Array | pa.ChunkedArray, avro_schema: Mapping[str, Any], bloom: BloomOptions
) -> dict[str, str]:
    """Hudi's Parquet footer key/values for a file whose record keys are ``keys`` in row order."""
    meta = {AVRO_SCHEMA_FOOTER: json.dumps(avro_schema, separators=(",", ":")), "writer.model.name": "avro"}
    if len(keys):
        bf = create_bloom_filter(bloom.num_entries, bloom.fpp, bloom.type_code, bloom.max_entries)
        bf.add_all(keys)
        meta[BLOOM_FILTER_FOOTER_KEY] = bf.serialize()
        if bloom.type_code is BloomFilterTypeCode.DYNAMIC_V0:
            meta[BLOOM_TYPE_FOOTER_KEY] = bloom.type_code.value
        bounds = pc.min_max(keys)
        meta[MIN_RECORD_KEY_FOOTER] = str(bounds["min"].as_py())
        meta[MAX_RECORD_KEY_FOOTER] = str(bounds["max"].as_py())
    return meta


class BaseFileWriter:
    """Writes a base file in parts, in row order, building Hudi's footer keys as it goes.

    Parts are buffered into row groups of about ``row_group_rows`` rows. The bloom filter takes
    the record keys in the order they are written (the dynamic filter's rows fill in that order),
    hashing on a background thread while Parquet encodes, and the min/max record keys are
    tracked, so a compaction or clustering can stream its output without holding the whole file.
    """

    def __init__(
        self,
        fileio: FileIO,
        path: str,
        avro_schema: Mapping[str, Any],
        *,
        compression: str = "gzip",
        bloom: BloomOptions | None = None,
        with_key_metadata: bool = True,
        row_group_rows: int = 1_000_000,
    ) -> None:
        self.fileio = fileio
        self.path = path
        self.compression = compression
        self.row_group_rows = row_group_rows
        self.metadata = {
            AVRO_SCHEMA_FOOTER: json.dumps(avro_schema, separators=(",", ":")),
            "writer.model.name": "avro",
        }
        options = bloom or BloomOptions()
        self.bloom_options = options
        self._bloom = (
            create_bloom_filter(options.num_entries, options.fpp, options.type_code, options.max_entries)
            if with_key_metadata
            else None
        )
        self._hasher = ThreadPoolExecutor(max_workers=1) if self._bloom is not None else None
        self._hashing: list[Future[None]] = []
        self._min: str | None = None
        self._max: str | None = None
        self._rows = 0
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self._sink: Any = None
        self._writer: pq.ParquetWriter | None = None
        #: Encode each row group on a thread while the caller prepares the next (one in flight).
        self.encode_ahead = False
        #: Bytes of a column chunk's dictionary before it falls back to plain encoding; None: Arrow's
        #: 1 MiB, Hudi's too (HoodieBaseParquetWriter: dictionary page size = hoodie.parquet.page.size).
        self.dictionary_pagesize_limit: int | None = None
        self._encoder: ThreadPoolExecutor | None = None
        self._encoding: Future[None] | None = None

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        table = table.replace_schema_metadata(None)
        self._track_keys(table)
        self._buffer.append(table)
        self._buffered += table.num_rows
        if self._buffered >= self.row_group_rows:
            self._flush()

    def _track_keys(self, table: pa.Table) -> None:
        self._rows += table.num_rows
        if self._bloom is None or RECORD_KEY_METADATA_FIELD not in table.column_names:
            return
        keys = table[RECORD_KEY_METADATA_FIELD]
        assert self._hasher is not None
        # One worker keeps the keys in write order, which the dynamic filter depends on.
        self._hashing.append(self._hasher.submit(self._bloom.add_all, keys))
        bounds = pc.min_max(keys)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is not None and (self._min is None or low < self._min):
            self._min = str(low)
        if high is not None and (self._max is None or high > self._max):
            self._max = str(high)

    def _open(self, schema: pa.Schema) -> pq.ParquetWriter:
        if self._writer is None:
            self._sink = self.fileio.open_output(self.path)
            # Footer keys go in as plain key/values, as parquet-avro writes them; no ARROW:schema
            # copy (it would repeat the bloom filter and make every footer parse slower).
            self._writer = pq.ParquetWriter(
                self._sink,
                schema.remove_metadata(),
                compression=self.compression,
                use_compliant_nested_type=True,
                store_schema=False,
                dictionary_pagesize_limit=self.dictionary_pagesize_limit,
            )
        return self._writer

    def _flush(self) -> None:
        if not self._buffer:
            return
        table = pa.concat_tables(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        self._buffer = []
        self._buffered = 0
        writer = self._open(table.schema)
        if not self.encode_ahead:
            writer.write_table(table, row_group_size=self.row_group_rows)
            return
        if self._encoder is None:
            self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hts-parquet-encode")
        self._wait_encoded()
        self._encoding = self._encoder.submit(writer.write_table, table, row_group_size=self.row_group_rows)

    def _wait_encoded(self) -> None:
        if self._encoding is not None:
            done, self._encoding = self._encoding, None
            done.result()

    def close(self, schema: pa.Schema | None = None) -> BaseFileResult:
        """Finish the file (an empty file needs ``schema``)."""
        self._flush()
        self._wait_encoded()
        if self._encoder is not None:
            self._encoder.shutdown()
        if self._writer is None:
            if schema is None:
                raise ValueError(f"{self.path}: nothing was written and no schema was given")
            self._open(schema)
        assert self._writer is not None
        if self._hasher is not None:
            for done in self._hashing:
                done.result()
            self._hasher.shutdown()
        if self._bloom is not None and self._rows:
            self.metadata[BLOOM_FILTER_FOOTER_KEY] = self._bloom.serialize()
            if self.bloom_options.type_code is BloomFilterTypeCode.DYNAMIC_V0:
                self.metadata[BLOOM_TYPE_FOOTER_KEY] = self.bloom_options.type_code.value
            if self._min is not None and self._max is not None:
                self.metadata[MIN_RECORD_KEY_FOOTER] = self._min
                self.metadata[MAX_RECORD_KEY_FOOTER] = self._max
        self._writer.add_key_value_metadata(self.metadata)
        self._writer.close()
        size = self._sink.tell()  # the bytes written: no request to ask the store the file's size
        self._sink.close()
        return BaseFileResult(
            self.path,
            size,
            self._rows,
            self.metadata.get(MIN_RECORD_KEY_FOOTER),
            self.metadata.get(MAX_RECORD_KEY_FOOTER),
            self._writer.writer.metadata,
        )


def write_base_file(
    fileio: FileIO,
    path: str,
    table: pa.Table,
    avro_schema: Mapping[str, Any],
    *,
    compression: str = "gzip",
    bloom: BloomOptions | None = None,
    with_key_metadata: bool = True,
    row_group_rows: int = 1_000_000,
) -> BaseFileResult:
    """Write ``table`` (meta fields included) as a new base file at ``path``."""
    writer = BaseFileWriter(
        fileio,
        path,
        avro_schema,
        compression=compression,
        bloom=bloom,
        with_key_metadata=with_key_metadata,
        row_group_rows=row_group_rows,
    )
    writer.write(table)
    return writer.close(table.schema)


def write_partition_metadata(fileio: FileIO, base_path: str, partition_path: str, commit_time: str) -> bool:
    """Create ``.hoodie_partition_metadata`` in a partition if it is not there; True if created."""
    path = join(base_path, partition_path, PARTITION_METAFILE)
    if fileio.exists(path):
        return False
    depth = len([p for p in partition_path.split("/") if p]) if partition_path else 0
    text = (
        "#partition metadata\n"
        f"#{java_date_string(dt.datetime.now(dt.UTC))}\n"
        f"commitTime={commit_time}\n"
        f"partitionDepth={depth}\n"
    )
    try:
        fileio.create_new(path, text.encode())
    except FileExistsError:
        return False
    return True
